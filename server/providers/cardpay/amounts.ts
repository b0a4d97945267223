import { currencyDigits, formatMinorUnits } from '../../lib/money.js';
import type { Money } from '../../domain/ports.js';

/**
 * THE conversion between the service's amounts (integer ISO 4217 minor units) and Stripe's API amounts
 * (docs.stripe.com/currencies, "Minor units in API amounts" and "Special cases"). They differ for a few
 * currencies, and a mistake there charges the wrong amount:
 * - zero-decimal in the API: BIF, CLP, DJF, GNF, JPY, KMF, KRW, MGA, PYG, RWF, VND, VUV, XAF, XOF, XPF —
 *   ISO gives MGA two digits, so 5000 MGA is 500000 here and 5000 at the provider (no fractions of MGA);
 * - ISK and UGX: ISO gives them no digits, the API keeps them two-decimal with the decimals always 00
 *   (500 ISK is 50000 at the provider; an amount not divisible by 100 is refused there with
 *   `invalid_charge_amount_no_decimal_compatible`);
 * - three-decimal: BHD, JOD, KWD, OMR, TND keep three digits, but the last must be 0 (12.340 KWD, never 12.345).
 * Every other currency: the API's minor unit is ISO's. Every amount sent (create, refund) and read
 * (intent, refund, event objects) goes through here, so the integrity check compares real money.
 */
const ZERO_DECIMAL = new Set(['BIF', 'CLP', 'DJF', 'GNF', 'JPY', 'KMF', 'KRW', 'MGA', 'PYG', 'RWF', 'VND', 'VUV', 'XAF', 'XOF', 'XPF']);
const WHOLE_UNITS_AS_TWO_DECIMALS = new Set(['ISK', 'UGX']);
const THREE_DECIMAL = new Set(['BHD', 'JOD', 'KWD', 'OMR', 'TND']);

/** How the API writes a currency: its digits, and the step its amounts must be a multiple of. */
interface ApiUnit {
  digits: number;
  step: bigint;
}

function apiUnit(currency: string): ApiUnit | null {
  const code = currency.toUpperCase();
  if (ZERO_DECIMAL.has(code)) return { digits: 0, step: 1n };
  if (WHOLE_UNITS_AS_TWO_DECIMALS.has(code)) return { digits: 2, step: 100n };
  if (THREE_DECIMAL.has(code)) return { digits: 3, step: 10n };
  const iso = currencyDigits(code);
  return iso === null ? null : { digits: iso, step: 1n };
}

const pow10 = (n: number) => 10n ** BigInt(n);

/**
 * The largest amount the API takes is technical, in its units: "up to twelve digits for IDR (…
 * 999999999999 for a charge of 9,999,999,999.99 IDR), and up to eight digits for all other currencies (…
 * 99999999 for a charge of 999,999.99 USD)" (docs.stripe.com/currencies, "Minimum and maximum charge
 * amounts"). Above it the provider answers 400 `amount_too_large`.
 */
const maximumDigits = (code: string) => (code === 'IDR' ? 12 : 8);

/** The largest amount the provider can charge in `code` (a known currency), in its units and in ours. */
function largestAmount(code: string): { units: bigint; minor: bigint } {
  const unit = apiUnit(code)!;
  const iso = currencyDigits(code)!;
  const limit = pow10(maximumDigits(code)) - 1n;
  const units = limit - (limit % unit.step);
  return { units, minor: unit.digits >= iso ? units / pow10(unit.digits - iso) : units * pow10(iso - unit.digits) };
}

/** Our amount in the API's units; null when the provider cannot charge it (a fraction it does not take). */
export function toApiAmount(money: Money): bigint | null {
  const iso = currencyDigits(money.currency);
  const unit = apiUnit(money.currency);
  if (iso === null || unit === null) return null;
  let units: bigint;
  if (unit.digits >= iso) {
    units = money.minor * pow10(unit.digits - iso);
  } else {
    const factor = pow10(iso - unit.digits);
    if (money.minor % factor !== 0n) return null;
    units = money.minor / factor;
  }
  return units % unit.step === 0n ? units : null;
}

/** The API's integer amount and currency as our Money; null when either is missing or it is no exact amount of ours. */
export function fromApiAmount(amount: number | null | undefined, currency: string | null | undefined): Money | null {
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 0 || !currency) return null;
  const code = currency.toUpperCase();
  const iso = currencyDigits(code);
  const unit = apiUnit(code);
  if (iso === null || unit === null) return null;
  const units = BigInt(amount);
  if (unit.digits <= iso) return { minor: units * pow10(iso - unit.digits), currency: code };
  const factor = pow10(unit.digits - iso);
  return units % factor === 0n ? { minor: units / factor, currency: code } : null;
}

/**
 * Why the provider cannot charge or refund `money` (a request issue for its amount field), or null when
 * it can. Every amount it takes is a multiple of `quantum` (in our minor units), which the issue names.
 */
export function apiAmountIssue(money: Money): string | null {
  const units = toApiAmount(money);
  if (units !== null) {
    const code = money.currency.toUpperCase();
    const maximum = largestAmount(code);
    return units <= maximum.units ? null : `must be at most ${formatMinorUnits(maximum.minor, code)} ${code} for cardpay (the provider takes amounts of at most ${maximumDigits(code)} digits)`;
  }
  const iso = currencyDigits(money.currency);
  const unit = apiUnit(money.currency);
  if (iso === null || unit === null) return `cardpay cannot charge ${money.currency}`;
  const quantum = unit.digits >= iso ? unit.step / minBig(unit.step, pow10(unit.digits - iso)) : pow10(iso - unit.digits) * unit.step;
  const code = money.currency.toUpperCase();
  return quantum === pow10(iso)
    ? `must be a whole number of ${code} for cardpay (the provider takes no fractions of ${code})`
    : `must be a multiple of ${formatMinorUnits(quantum, code)} ${code} for cardpay`;
}

const minBig = (a: bigint, b: bigint) => (a < b ? a : b);
