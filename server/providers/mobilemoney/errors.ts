import type { HttpResponse } from '../http-client.js';
import { ProviderError, type ProviderErrorKind } from '../../domain/ports.js';
import { OperatorErrorSchema, type OperatorError } from './transformers.js';

/** The operator's error codes (providers.md §3, interface.md) and what they mean for us. */
const OPERATOR_ERRORS: Record<string, { kind: ProviderErrorKind; meaning: string }> = {
  // Daraja's answer to a wrong consumer key or secret, as to a header that is not Basic.
  '400.008.01': { kind: 'auth', meaning: 'the consumer key and secret were refused (invalid authentication)' },
  '400.008.02': { kind: 'auth', meaning: 'invalid grant type (grant_type=client_credentials expected)' },
  '404.001.03': { kind: 'auth', meaning: 'invalid access token' },
  '400.003.01': { kind: 'auth', meaning: 'invalid access token' },
  '401.001': { kind: 'auth', meaning: 'invalid access token' },
  // Daraja's answer to a token revoked by a newer one for the same consumer key (another system took one).
  '401.002.01': { kind: 'auth', meaning: 'invalid access token' },
  '404.001.04': { kind: 'auth', meaning: 'invalid authentication header' },
  '404.001.01': { kind: 'invalid_request', meaning: 'resource not found' },
  '405.001': { kind: 'invalid_request', meaning: 'method not allowed' },
  '400.002.02': { kind: 'invalid_request', meaning: 'invalid request field' },
  '400.002.05': { kind: 'invalid_request', meaning: 'invalid request payload' },
  '400.003.02': { kind: 'invalid_request', meaning: 'bad request, check the payload format' },
  '400.001': { kind: 'invalid_request', meaning: 'invalid shortcode' },
  '500.002.1001': { kind: 'invalid_request', meaning: 'duplicate OriginatorConversationID' },
  '500.003.02': { kind: 'rate_limited', meaning: 'spike arrest, too many requests' },
  '500.003.03': { kind: 'rate_limited', meaning: 'quota violation, reduce the request rate' },
  '500.003.1001': { kind: 'indeterminate', meaning: 'operator internal error' },
};

/**
 * What Daraja means by 500.001.1001 depends on the call. The M-Pesa Express (STK push) page lists it for
 * "Merchant does not exist" and "Wrong credentials" (its Password, from shortcode and passkey), and for
 * "Unable to lock subscriber" (another transaction of the customer's in progress); the STK query sends
 * the same Password. Elsewhere (the Reversal page: "Internal Server Error", HTTP 500) it is a server error
 * like any unknown 5xx: indeterminate, the operator may have acted.
 */
const PASSWORD_CALLS = new Set<OperatorCall>(['STK push', 'STK query']);

function passwordCallError(error: OperatorError): { kind: ProviderErrorKind; meaning: string } | undefined {
  if (error.errorCode !== '500.001.1001') return undefined;
  if (/unable to lock subscriber/i.test(error.errorMessage)) return { kind: 'unavailable', meaning: 'the subscriber has another transaction in progress' };
  return { kind: 'auth', meaning: 'merchant does not exist or wrong credentials (shortcode/passkey)' };
}

/** The operator calls, as named in messages ("mobilemoney reversal failed, …"). */
export type OperatorCall = 'token request' | 'STK push' | 'STK query' | 'transaction status query' | 'reversal' | 'pull registration' | 'pull query';

/**
 * Codes that mean "this token is no longer valid": fetch a new one once and retry. 401.002.01 is what
 * Daraja answers a token revoked by a newer one for the same consumer key; client libraries retry on it
 * as on 404.001.03 and 400.003.01.
 */
const INVALID_TOKEN_CODES = new Set(['404.001.03', '400.003.01', '401.001', '401.002.01']);

/** An error body saying our access token is not (or no longer) valid, by code or, for a code not listed, by its text. */
export function isInvalidTokenError(error: OperatorError): boolean {
  return INVALID_TOKEN_CODES.has(error.errorCode) || /invalid access token/i.test(error.errorMessage);
}

export function operatorError(res: HttpResponse): OperatorError | null {
  const parsed = OperatorErrorSchema.safeParse(res.json);
  return parsed.success ? parsed.data : null;
}

/** Operator text is echoed for diagnosis; it never contains our secrets, but keep it short. */
const short = (text: string) => text.replace(/\s+/g, ' ').trim().slice(0, 200);

/**
 * A non-success answer → ProviderError with a clear message. `action` says what we were doing
 * ("STK push", "token request", …). Unknown 5xx are indeterminate: the operator may have acted.
 */
export function toProviderError(res: HttpResponse, action: OperatorCall): ProviderError {
  const body = operatorError(res);
  if (body) {
    const known = (PASSWORD_CALLS.has(action) ? passwordCallError(body) : undefined) ?? OPERATOR_ERRORS[body.errorCode];
    const kind = known?.kind ?? kindForStatus(res.status);
    const meaning = known?.meaning ?? 'operator error';
    const said = body.errorMessage ? `: ${short(body.errorMessage)}` : '';
    return new ProviderError('mobilemoney', kind, `mobilemoney ${action} failed, ${meaning} (${body.errorCode})${said}`, body.errorCode);
  }
  return new ProviderError('mobilemoney', kindForStatus(res.status), `mobilemoney ${action} failed with HTTP ${res.status}`);
}

function kindForStatus(status: number): ProviderErrorKind {
  if (status === 401 || status === 403) return 'auth';
  if (status === 429) return 'rate_limited';
  if (status >= 500) return 'indeterminate';
  return 'invalid_request';
}

/** A 2xx answer we cannot read: the operator may have acted, so the outcome is unknown. */
export function unreadable(action: OperatorCall): ProviderError {
  return new ProviderError('mobilemoney', 'indeterminate', `mobilemoney ${action} returned an unexpected response`);
}
