/**
 * The currencies PayPal takes and how it writes them (developer.paypal.com/api/rest/reference/currency-codes),
 * the simulator's own table (it shares nothing with the adapter): two decimals, except HUF, JPY and TWD,
 * which "do not support decimals" — a `value` with a decimal point is refused for them, even `1000.00`.
 * Amounts are kept as integers in these units (whole forints for HUF).
 */
const DIGITS = new Map<string, number>([
  ...['AUD', 'BRL', 'CAD', 'CNY', 'CZK', 'DKK', 'EUR', 'HKD', 'ILS', 'MYR', 'MXN', 'NZD', 'NOK', 'PHP', 'PLN', 'GBP', 'SGD', 'SEK', 'CHF', 'THB', 'USD'].map(
    (code) => [code, 2] as const,
  ),
  ...['HUF', 'JPY', 'TWD'].map((code) => [code, 0] as const),
]);

/** Decimal digits of a PayPal currency, or null for a code PayPal does not take. */
export const paypalDigits = (currency: string): number | null => DIGITS.get(currency) ?? null;

/** An integer amount in PayPal's units as its `value` string: 1050 USD → "10.50", 1000 HUF → "1000". */
export function formatValue(minor: bigint, currency: string): string {
  const digits = paypalDigits(currency) ?? 2;
  const negative = minor < 0n;
  const text = (negative ? -minor : minor).toString().padStart(digits + 1, '0');
  const value = digits === 0 ? text : `${text.slice(0, -digits)}.${text.slice(-digits)}`;
  return negative ? `-${value}` : value;
}
