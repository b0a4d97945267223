import { cardpayEventOrigin } from './webhook.js';

/**
 * The form of the provider account cardpay credentials record (PROVIDER_ACCOUNT_FIELD) and every payment
 * made under them: the account's id and the key's mode, `acct_…:live` or `acct_…:test` (a test-mode key
 * of an account sees none of its live objects).
 */
export const accountWithMode = (accountId: string, live: boolean): string => `${accountId}:${live ? 'live' : 'test'}`;

/**
 * The account an event verified with credentials of account `stored` is of: the connected account it
 * names (a Connect endpoint's event), else `stored`'s, in the event's own mode (livemode) — the endpoint
 * whose secret is stored may be of another mode than the key (a merchant's own endpoint). null when the
 * credentials recorded no account: nothing to compare, as for every other check of the account.
 */
export function eventAccount(body: unknown, stored: string | null): string | null {
  const sep = stored?.lastIndexOf(':') ?? -1;
  if (!stored || sep <= 0) return stored;
  const { livemode, account } = cardpayEventOrigin(body);
  return accountWithMode(account ?? stored.slice(0, sep), livemode ?? stored.slice(sep + 1) === 'live');
}
