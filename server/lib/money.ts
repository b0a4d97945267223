import currencyCodes from 'currency-codes';

/** A malformed amount or currency; the domain turns it into a 422 naming the field. */
export class InvalidAmountError extends Error {
  constructor(message: string, readonly field: string, readonly issue: string) {
    super(message);
    this.name = 'InvalidAmountError';
  }
}

/**
 * ISO 4217 codes that are not money a payment can be made in: precious metals, bond-market and
 * accounting units, SDR, Sucre, ADB unit, the testing code and "no currency" (XXX), and the fund /
 * unit-of-account codes (next-day dollars, indexed units). ISO lists no minor units for most of them.
 */
const NON_MONETARY = new Set([
  'XAU', 'XAG', 'XPT', 'XPD', 'XBA', 'XBB', 'XBC', 'XBD', 'XDR', 'XSU', 'XUA', 'XTS', 'XXX',
  'BOV', 'CHE', 'CHW', 'CLF', 'COU', 'MXV', 'USN', 'UYI', 'UYW',
]);

/** True for a code payments can be made in; false for unknown and non-monetary codes. */
export function isPaymentCurrency(currency: string): boolean {
  return !NON_MONETARY.has(currency.toUpperCase()) && currencyDigits(currency) !== null;
}

/** ISO 4217 minor-unit digits of a currency, or null for an unknown code. */
export function currencyDigits(currency: string): number | null {
  const entry = currencyCodes.code(currency.toUpperCase());
  return entry ? entry.digits : null;
}

/**
 * How decimal places are counted: as written (a merchant's input: `10.000` USD has three, more than
 * USD has, decisions.md → 422), or significant only (a provider's report, where `10.0` is ten).
 */
export type DecimalPlaces = 'written' | 'significant';

/**
 * Parses a decimal amount (JSON number or string) into integer minor units without binary floating
 * point: the text is split into digits, never multiplied as a float. Strict: no surrounding spaces,
 * no sign, no exponent, at most the currency's digits (counted as `places` says). A JSON number too
 * precise for a double, or with trailing fractional zeros, arrives here as its exact text (see the JSON
 * body parser), so `19.999999999999999` is refused rather than read as 20, and `10.000` USD as 10.
 */
export function toMinorUnits(value: string | number, currency: string, field = 'amount', places: DecimalPlaces = 'written'): bigint {
  const digits = currencyDigits(currency);
  if (digits === null) throw new InvalidAmountError(`unknown currency ${currency}`, 'currency', 'must be a known ISO 4217 code');
  const text = typeof value === 'number' ? numberToPlainString(value) : value;
  const match = /^(\d{1,15})(?:\.(\d+))?$/.exec(text);
  if (!match && text.trim() !== text && /^(\d{1,15})(?:\.(\d+))?$/.test(text.trim())) {
    throw new InvalidAmountError(`Invalid request: ${field} must not have spaces around the number`, field, 'must be a decimal number without surrounding spaces');
  }
  if (!match) {
    throw new InvalidAmountError(`${field} must be a positive decimal number`, field, 'must be a positive decimal number');
  }
  const whole = match[1]!;
  const fraction = match[2] ?? '';
  const significantFraction = fraction.replace(/0+$/, '');
  if ((places === 'written' ? fraction : significantFraction).length > digits) {
    const issue = `must have at most ${digits} decimal places for ${currency.toUpperCase()}`;
    throw new InvalidAmountError(`${field} has more decimal places than ${currency.toUpperCase()} allows (${digits})`, field, issue);
  }
  return BigInt(whole) * 10n ** BigInt(digits) + BigInt(significantFraction.padEnd(digits, '0') || '0');
}

/** Formats minor units as a decimal string with the currency's digits: 1050n USD → "10.50". */
export function formatMinorUnits(minor: bigint, currency: string): string {
  const digits = currencyDigits(currency) ?? 2;
  const negative = minor < 0n;
  const abs = negative ? -minor : minor;
  const text = abs.toString().padStart(digits + 1, '0');
  const whole = digits === 0 ? text : text.slice(0, -digits);
  const fraction = digits === 0 ? '' : `.${text.slice(-digits)}`;
  return `${negative ? '-' : ''}${whole}${fraction}`;
}

/** A JSON number as its shortest decimal text; exponent forms (1e21, 1e-7) are not amounts. */
function numberToPlainString(value: number): string {
  if (!Number.isFinite(value)) return 'NaN';
  return String(value);
}

/** Compares two non-negative decimal strings exactly (no floats): -1, 0 or 1. */
export function compareDecimals(a: string, b: string): number {
  const scale = (text: string) => {
    const [whole = '0', fraction = ''] = text.split('.');
    return BigInt(whole) * 10n ** 6n + BigInt(fraction.padEnd(6, '0').slice(0, 6) || '0');
  };
  const left = scale(a);
  const right = scale(b);
  return left === right ? 0 : left < right ? -1 : 1;
}
