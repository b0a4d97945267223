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
  const url = new URL(callbackUrl(config, 'mobilemoney', subpath, storedBase(creds, subpath) ?? config.publicBaseUrl));
  url.searchParams.set('ref', ref);
  if (creds.env === 'sandbox' || answersOurRequest(subpath)) url.searchParams.set('token', callbackToken(creds.passkey, ref));
  return url.toString();
}

/**
 * The routes a stored result_url / timeout_url may end in (interface.md: where the operator sends the
 * results / queue timeouts of reversals and status queries): addresses of this service.
 */
export const STORED_ADDRESS_ROUTES = {
  result_url: ['/reversal/result', '/transactionstatus/result'],
  timeout_url: ['/reversal/timeout', '/transactionstatus/timeout'],
} as const;

/**
 * The base at which the operator reaches this service for the results (result_url) or queue timeouts
 * (timeout_url) of our requests, when the merchant stored one: the part of it before
 * `/v1/webhooks/mobilemoney`. Our own route, ref and token follow it, so a result routes and verifies as
 * at PUBLIC_BASE_URL. Null: none stored (or one stored before the routes were checked), PUBLIC_BASE_URL.
 */
function storedBase(creds: MobilemoneyCredentials, subpath: string): string | null {
  if (!answersOurRequest(subpath)) return null;
  const field = subpath.endsWith('/timeout') ? 'timeout_url' : 'result_url';
  const stored = creds[field];
  if (!stored) return null;
  const url = new URL(stored);
  const route = STORED_ADDRESS_ROUTES[field].map((r) => `/v1/webhooks/mobilemoney${r}`).find((r) => url.pathname.endsWith(r));
  return route ? `${url.origin}${url.pathname.slice(0, -route.length)}` : null;
}
