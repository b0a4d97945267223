import { SETTLEMENT_CURRENCY } from './account.js';
import { apiDigits, displayAmount } from './currencies.js';
import { invalidRequest, type SimError } from './errors.js';
import { USD_PER_UNIT } from './exchange-rates.js';

/**
 * Stripe's minimum charge amounts by SETTLEMENT currency, in the API's units (docs.stripe.com/currencies,
 * "Minimum and maximum charge amounts"; ¥50 is 50, 175.00 HUF is 17500). `display` is Stripe's own text
 * for the minimum. The minimum is the settlement currency's: a charge presented in another currency must
 * convert to at least it (belowMinimum). Every simulated account settles in USD (account.ts), so the
 * `usd` row is the one applied; the others are the minimums of accounts settling elsewhere, kept with it
 * as Stripe lists them.
 */
const MINIMUMS: Record<string, { minor: number; display: string }> = {
  usd: { minor: 50, display: '$0.50' },
  aed: { minor: 200, display: 'AED 2.00' },
  aud: { minor: 50, display: 'A$0.50' },
  bgn: { minor: 100, display: 'BGN 1.00' },
  brl: { minor: 50, display: 'R$0.50' },
  cad: { minor: 50, display: 'CA$0.50' },
  chf: { minor: 50, display: 'CHF 0.50' },
  czk: { minor: 1500, display: 'CZK 15.00' },
  dkk: { minor: 250, display: 'DKK 2.50' },
  eur: { minor: 50, display: '€0.50' },
  gbp: { minor: 30, display: '£0.30' },
  hkd: { minor: 400, display: 'HK$4.00' },
  huf: { minor: 17500, display: 'HUF 175.00' },
  inr: { minor: 50, display: '₹0.50' },
  jpy: { minor: 50, display: '¥50' },
  mxn: { minor: 1000, display: 'MX$10.00' },
  myr: { minor: 200, display: 'MYR 2.00' },
  nok: { minor: 300, display: 'NOK 3.00' },
  nzd: { minor: 50, display: 'NZ$0.50' },
  pln: { minor: 200, display: 'PLN 2.00' },
  ron: { minor: 200, display: 'RON 2.00' },
  sek: { minor: 300, display: 'SEK 3.00' },
  sgd: { minor: 50, display: 'SGD 0.50' },
  thb: { minor: 1000, display: 'THB 10.00' },
};

const pow10 = (n: number) => 10n ** BigInt(n);

/** A decimal string ('0.0077') as an exact fraction. */
function fraction(decimal: string): { numerator: bigint; denominator: bigint } {
  const [whole, part = ''] = decimal.split('.');
  return { numerator: BigInt(`${whole}${part}`), denominator: pow10(part.length) };
}

/**
 * `amount_too_small` (400 invalid_request_error, param amount) when the charge is under the minimum of
 * the account's settlement currency (USD: $0.50). A charge in USD is compared as it is ("Amount must be at
 * least $0.50 usd"); one in another currency is converted at the simulator's fixed, approximate rate
 * (exchange-rates.ts) and answered as Stripe answers it: "Amount must convert to at least 50 cents. KES 1.00
 * converts to approximately $0.01 USD." Every currency the simulator takes has a rate (a test keeps it
 * so); a currency it does not take was refused before (currencies.ts, unsupportedCurrency).
 */
export function belowMinimum(amount: bigint, currency: string): SimError | null {
  const minimum = MINIMUMS[SETTLEMENT_CURRENCY]!;
  if (currency === SETTLEMENT_CURRENCY) {
    if (amount >= BigInt(minimum.minor)) return null;
    return invalidRequest(`Amount must be at least ${minimum.display} ${currency}`, 'amount', 'amount_too_small');
  }
  const rate = Object.hasOwn(USD_PER_UNIT, currency) ? fraction(USD_PER_UNIT[currency]!) : null;
  if (!rate) return null;
  // Cents = amount / 10^digits × rate × 100, compared exactly: amount × num × 100 against minimum × 10^digits × den.
  const cents = { numerator: amount * rate.numerator * 100n, denominator: pow10(apiDigits(currency)) * rate.denominator };
  if (cents.numerator >= BigInt(minimum.minor) * cents.denominator) return null;
  const rounded = (2n * cents.numerator + cents.denominator) / (2n * cents.denominator);
  const converted = `$${rounded / 100n}.${(rounded % 100n).toString().padStart(2, '0')}`;
  return invalidRequest(
    `Amount must convert to at least ${minimum.minor} cents. ${currency.toUpperCase()} ${displayAmount(amount, currency)} converts to approximately ${converted} USD.`,
    'amount',
    'amount_too_small',
  );
}

/**
 * The largest amount, in API units: "The amount value supports up to twelve digits for IDR (for example,
 * a value of 999999999999 for a charge of 9,999,999,999.99 IDR), and up to eight digits for all other
 * currencies (for example, a value of 99999999 for a charge of 999,999.99 USD)" (docs.stripe.com/currencies,
 * "Minimum and maximum charge amounts"; stripe-node's `amount` docs: "up to eight digits").
 */
const MAXIMUM_DIGITS: Record<string, number> = { idr: 12 };
const DEFAULT_MAXIMUM_DIGITS = 8;

/**
 * `amount_too_large` (400 invalid_request_error, param amount) above the currency's maximum. Stripe's
 * text for USD is "Amount must be no more than $999,999.99"; the other currencies' wording is not
 * documented: the same sentence with the amount as the cardholder reads it and the currency code.
 */
export function aboveMaximum(amount: bigint, currency: string): SimError | null {
  const digits = Object.hasOwn(MAXIMUM_DIGITS, currency) ? MAXIMUM_DIGITS[currency]! : DEFAULT_MAXIMUM_DIGITS;
  const maximum = 10n ** BigInt(digits) - 1n;
  if (amount <= maximum) return null;
  const [whole, fraction] = displayAmount(maximum, currency).split('.');
  const grouped = `${whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ',')}${fraction === undefined ? '' : `.${fraction}`}`;
  const text = currency === 'usd' ? `$${grouped}` : `${grouped} ${currency}`;
  return invalidRequest(`Amount must be no more than ${text}`, 'amount', 'amount_too_large');
}
