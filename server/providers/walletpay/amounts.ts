import { formatMinorUnits } from '../../lib/money.js';
import type { Money } from '../../domain/ports.js';

/**
 * What the provider can charge (developer.paypal.com/api/rest/reference/currency-codes): 24 currencies,
 * each written as a decimal string with ISO 4217's digits, except HUF, JPY and TWD, which "do not support
 * decimals; a decimal amount causes an error": they go out as whole units ("1000", never "1000.00"),
 * and a fraction of them cannot be charged at all. BRL, CNY and MYR are for in-country accounts only:
 * valid codes, refused by the provider for other accounts (its reason then names it).
 */
const CURRENCIES = new Set([
  'AUD', 'BRL', 'CAD', 'CNY', 'CZK', 'DKK', 'EUR', 'HKD', 'HUF', 'ILS', 'JPY', 'MYR',
  'MXN', 'TWD', 'NZD', 'NOK', 'PHP', 'PLN', 'GBP', 'SGD', 'SEK', 'CHF', 'THB', 'USD',
]);
const NO_DECIMALS = new Set(['HUF', 'JPY', 'TWD']);

/** Our amount as the provider's `value` string; null when it cannot be charged there. */
export function toWireValue(money: Money): string | null {
  if (walletpayAmountIssue(money)) return null;
  const text = formatMinorUnits(money.minor, money.currency);
  return NO_DECIMALS.has(money.currency) ? text.replace(/\.0+$/, '') : text;
}

/** Why the provider cannot charge or refund `money` (a request issue), or null when it can. */
export function walletpayAmountIssue(money: Money): string | null {
  const code = money.currency.toUpperCase();
  if (!CURRENCIES.has(code)) return `walletpay cannot charge ${code}`;
  if (NO_DECIMALS.has(code) && /\.\d*[1-9]/.test(formatMinorUnits(money.minor, code))) {
    return `must be a whole number of ${code} for walletpay (the provider takes no fractions of ${code})`;
  }
  return null;
}

/** The request field an issue belongs to: the currency when the provider has none of it, else the amount. */
export const walletpayIssueField = (money: Money): 'currency' | 'amount' => (CURRENCIES.has(money.currency.toUpperCase()) ? 'amount' : 'currency');
