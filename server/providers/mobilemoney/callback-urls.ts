import type { MobilemoneyCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { callbackUrl } from '../base-url.js';
import { callbackToken } from './callback.js';

/** Transaction-status results answer a query of ours: their address is bound to that query in both envs. */
export const answersOurQuery = (subpath: string): boolean => subpath.startsWith('/transactionstatus/');

/**
 * The addresses we give the operator. Each carries our id of what it is about (`ref`: the payment,
 * refund or status query). The operator does not sign its callbacks: in the sandbox env the URL also
 * carries an HMAC of that id keyed by the merchant's passkey (decisions.md), checked on arrival; in the
 * live env a callback is checked by its RSA signature when it has one, otherwise confirmed by a query —
 * whose own result address carries the token too, since that answer is what the confirmation rests on.
 */
export function signedCallbackUrl(config: AppConfig, creds: MobilemoneyCredentials, subpath: string, ref: string): string {
  const url = new URL(callbackUrl(config, 'mobilemoney', subpath));
  url.searchParams.set('ref', ref);
  if (creds.env === 'sandbox' || answersOurQuery(subpath)) url.searchParams.set('token', callbackToken(creds.passkey, ref));
  return url.toString();
}
