import type { MobilemoneyCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { callbackUrl } from '../base-url.js';
import { callbackToken } from './callback.js';

/**
 * Transaction-status and reversal results answer a request of ours (a status query, a reversal): their
 * address is bound to that request in both envs. A reversal result could not be confirmed by asking
 * instead: the operator keeps no transaction for a refused or "already reversed" request to report on.
 */
export const answersOurRequest = (subpath: string): boolean => subpath.startsWith('/transactionstatus/') || subpath.startsWith('/reversal/');

/**
 * The addresses we give the operator. Each carries our id of what it is about (`ref`: the payment,
 * refund or status query). The operator does not sign its callbacks: in the sandbox env the URL also
 * carries an HMAC of that id keyed by the merchant's passkey (decisions.md), checked on arrival; in the
 * live env a callback is checked by its RSA signature when it has one, otherwise an STK result is
 * confirmed by a query — and the results of our own requests (status queries, reversals) come to an
 * address carrying the token too, which is what verifies them (only we and the operator know it).
 */
export function signedCallbackUrl(config: AppConfig, creds: MobilemoneyCredentials, subpath: string, ref: string): string {
  const url = new URL(callbackUrl(config, 'mobilemoney', subpath));
  url.searchParams.set('ref', ref);
  if (creds.env === 'sandbox' || answersOurRequest(subpath)) url.searchParams.set('token', callbackToken(creds.passkey, ref));
  return url.toString();
}

/**
 * The addresses a stored result_url / timeout_url may be (interface.md: where the operator sends the
 * results / queue timeouts of reversals and status queries): this service's own routes, under
 * PUBLIC_BASE_URL. Checked when stored and never read: each request sends its own address (above).
 */
export const STORED_ADDRESS_ROUTES = {
  result_url: ['/reversal/result', '/transactionstatus/result'],
  timeout_url: ['/reversal/timeout', '/transactionstatus/timeout'],
} as const;
