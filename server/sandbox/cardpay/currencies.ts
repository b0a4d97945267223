import { invalidRequest, type SimError } from './errors.js';

/**
 * How Stripe's API writes amounts (docs.stripe.com/currencies): every `amount` the simulator takes or
 * shows is an integer in these units, not in ISO 4217 minor units. The simulator's own table (it shares
 * nothing with the adapter, so an adapter that converts wrongly is charged the wrong amount here, as it
 * would be at the provider):
 * - zero-decimal: the amount is whole units (5000 MGA is 5000, although ISO gives MGA two digits);
 * - ISK and UGX: two-decimal, but only whole units are charged: amounts must be divisible by 100;
 * - three-decimal (BHD, JOD, KWD, OMR, TND): the last digit must be 0;
 * - every other currency Stripe supports (SUPPORTED below): two-decimal.
 */
const ZERO_DECIMAL = new Set(['bif', 'clp', 'djf', 'gnf', 'jpy', 'kmf', 'krw', 'mga', 'pyg', 'rwf', 'vnd', 'vuv', 'xaf', 'xof', 'xpf']);
const WHOLE_UNITS_AS_TWO_DECIMALS = new Set(['isk', 'ugx']);
const THREE_DECIMAL = new Set(['bhd', 'jod', 'kwd', 'omr', 'tnd']);

/**
 * The presentment currencies docs.stripe.com/currencies lists (the US account list, plus XCG and the
 * three-decimal currencies accounts elsewhere can present). Stripe refuses any other code, so the
 * simulator does: an adapter that sends an unsupported currency fails here as it would there.
 */
const SUPPORTED = new Set(
  (
    'usd aed afn all amd ang aoa ars aud awg azn bam bbd bdt bgn bhd bif bmd bnd bob brl bsd bwp byn bzd cad cdf chf ' +
    'clp cny cop crc cve czk djf dkk dop dzd egp etb eur fjd fkp gbp gel gip gmd gnf gtq gyd hkd hnl htg huf idr ils ' +
    'inr isk jmd jod jpy kes kgs khr kmf krw kwd kyd kzt lak lbp lkr lrd lsl mad mdl mga mkd mmk mnt mop mur mvr mwk ' +
    'mxn myr mzn nad ngn nio nok npr nzd omr pab pen pgk php pkr pln pyg qar ron rsd rub rwf sar sbd scr sek sgd shp ' +
    'sle sos srd std szl thb tjs tnd top try ttd twd tzs uah ugx uyu uzs vnd vuv wst xaf xcd xcg xof xpf yer zar zmw'
  ).split(' '),
);

/** Every presentment currency the simulator takes (lower case). */
export const supportedCurrencies = (): string[] => [...SUPPORTED];

/** Stripe's refusal of a currency it does not support (`currency` in lower case), or null. */
export function unsupportedCurrency(currency: string): SimError | null {
  if (SUPPORTED.has(currency)) return null;
  return invalidRequest(`Invalid currency: ${currency}. Stripe currently supports these currencies: ${[...SUPPORTED].join(', ')}`, 'currency');
}

/** Decimal digits of `currency` (lower case, one Stripe supports) in API amounts. */
export function apiDigits(currency: string): number {
  if (ZERO_DECIMAL.has(currency)) return 0;
  if (THREE_DECIMAL.has(currency)) return 3;
  return 2;
}

/** The refusal Stripe answers for an amount it cannot charge in `currency` (charges and refunds alike), or null. */
export function incompatibleAmount(amount: bigint, currency: string): SimError | null {
  const code = currency.toUpperCase();
  if (WHOLE_UNITS_AS_TWO_DECIMALS.has(currency) && amount % 100n !== 0n) {
    return invalidRequest(
      `Invalid amount. Currency ${code} has become effectively zero-decimal and charged amounts must be evenly divisible by 100. See https://stripe.com/docs/currencies#special-cases for more information.`,
      'amount',
      'invalid_charge_amount_no_decimal_compatible',
    );
  }
  if (THREE_DECIMAL.has(currency) && amount % 10n !== 0n) {
    // Stripe documents the rule (round to the nearest ten) but not the error's code: none is given.
    return invalidRequest(
      `Invalid amount. Amounts in ${code} must have 0 as their last digit (round to the nearest ten). See https://stripe.com/docs/currencies#three-decimal for more information.`,
      'amount',
    );
  }
  return null;
}

/** An API amount as the cardholder reads it: 5000 mga → "5000", 50000 isk → "500", 12340 kwd → "12.340". */
export function displayAmount(amount: bigint, currency: string): string {
  const whole = WHOLE_UNITS_AS_TWO_DECIMALS.has(currency) && amount % 100n === 0n;
  const digits = whole ? 0 : apiDigits(currency);
  const value = whole ? amount / 100n : amount;
  const text = value.toString().padStart(digits + 1, '0');
  return digits === 0 ? text : `${text.slice(0, -digits)}.${text.slice(-digits)}`;
}
