import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema } from './common.js';

const c = initContract();

const Ack = extendApi(z.object({ received: z.literal(true) }), { example: { received: true } });
const callback = { scope: null, tag: 'Provider callbacks' } as const;

/**
 * The operator does not sign its callbacks: they are accepted only from allowlisted addresses, and
 * verified by the `ref` + `token` query (HMAC keyed by the passkey) in the sandbox env, or the RSA
 * signature in X-Mobilemoney-Signature (operator certificate) in the live env.
 */
function operatorCallback<P extends string>(subpath: P, summary: string, description: string) {
  return {
    method: 'POST' as const,
    path: `/v1/webhooks/mobilemoney${subpath}` as `/v1/webhooks/mobilemoney${P}`,
    summary,
    description: `${description} Accepted only from allowlisted operator addresses; verified by the URL token (sandbox) or X-Mobilemoney-Signature (live).`,
    metadata: { scope: null, tag: 'Provider callbacks' } as const,
    query: z.object({ ref: z.string().max(64).optional(), token: z.string().max(128).optional() }),
    headers: z.object({ 'x-mobilemoney-signature': z.string().optional() }),
    body: z.record(z.string(), z.unknown()),
    responses: { 200: Ack, 400: ErrorBodySchema, 401: ErrorBodySchema, 413: ErrorBodySchema, 422: ErrorBodySchema, 429: ErrorBodySchema, 500: ErrorBodySchema, 503: ErrorBodySchema },
  };
}


/** A callback route that can also answer 502 (it must ask the provider first, and the provider could not be asked now). */
function withProviderError<R extends ReturnType<typeof operatorCallback>>(route: R) {
  return { ...route, responses: { ...route.responses, 502: ErrorBodySchema } };
}

/**
 * Called by the providers, not by merchants: no API key; each is verified with the provider's own
 * scheme over the raw body. A duplicate or an unknown reference is acknowledged (200) and ignored.
 */
export const providerCallbacksContract = c.router({
  cardpay: {
    method: 'POST',
    path: '/v1/webhooks/cardpay',
    summary: 'cardpay event callback',
    description:
      'Payment-intent and refund events from the card provider. Verified with `Cardpay-Signature: t=…,v1=…` (HMAC-SHA256 of `t.rawBody` with the ' +
      "merchant's cardpay webhook secret; several v1 values allowed; 300 s tolerance). Duplicates (by event id) are acknowledged and ignored. " +
      'A refund event for a payment still pending here first asks the provider about the payment; one it has not completed is answered 409 (502 when the provider cannot be asked), not stored, so the provider sends it again.',
    metadata: { ...callback, callbackHeaders: { 'Cardpay-Signature': 'required' } },
    query: z.object({
      merchant: z
        .string()
        .max(64)
        .optional()
        .describe('The merchant whose endpoint this is (in the URL the service registers for each merchant); an event about another merchant\'s payment on a shared provider account is verified with this merchant\'s secret and acknowledged without effect'),
    }),
    headers: z.object({
      'cardpay-signature': z.string().optional().describe('Cardpay-Signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.rawBody">` (several v1 allowed); a callback without a valid one is 401'),
    }),
    body: z.record(z.string(), z.unknown()),
    responses: { 200: Ack, 400: ErrorBodySchema, 401: ErrorBodySchema, 409: ErrorBodySchema, 413: ErrorBodySchema, 422: ErrorBodySchema, 429: ErrorBodySchema, 500: ErrorBodySchema, 502: ErrorBodySchema, 503: ErrorBodySchema },
  },
  walletpay: {
    method: 'POST',
    path: '/v1/webhooks/walletpay',
    summary: 'walletpay event callback',
    description:
      'Capture and refund events from the wallet provider (PAYMENT.CAPTURE.COMPLETED, PAYMENT.CAPTURE.DENIED, PAYMENT.CAPTURE.REFUNDED), with ' +
      '`Walletpay-Transmission-Id`, `-Time`, `-Sig`, `-Cert-Url`, `-Auth-Algo` and `Walletpay-Webhook-Id`. Verified through the provider\'s ' +
      "verify-webhook-signature call with the merchant's credentials and stored webhook_id. Duplicates (by transmission id) are acknowledged and ignored.",
    metadata: {
      ...callback,
      callbackHeaders: {
        'Walletpay-Transmission-Id': 'required', 'Walletpay-Transmission-Time': 'required', 'Walletpay-Transmission-Sig': 'required',
        'Walletpay-Cert-Url': 'required', 'Walletpay-Auth-Algo': 'optional', 'Walletpay-Webhook-Id': 'optional',
      },
    },
    // All optional here; the four the verification needs are required in openapi.json (RouteMetadata.callbackHeaders): a missing one is 401, never a validation 422.
    headers: z.object({
      'walletpay-transmission-id': z.string().optional().describe('The transmission id, unique per delivery (a repeat is acknowledged and ignored). Without it the callback is 401'),
      'walletpay-transmission-time': z.string().optional().describe('When the provider sent it, ISO 8601: at most 72 hours old, at most 5 minutes ahead. Without it the callback is 401'),
      'walletpay-transmission-sig': z.string().optional().describe('The base64 SHA256withRSA signature of `transmission id|time|webhook id|CRC-32 of the body`. Without it the callback is 401'),
      'walletpay-cert-url': z.string().optional().describe("The provider's signing certificate (fetched only from the provider's own host). Without it the callback is 401"),
      'walletpay-auth-algo': z.string().optional().describe('The signature algorithm: SHA256withRSA, assumed when absent; any other value is 401'),
      'walletpay-webhook-id': z.string().optional().describe("The provider's webhook id; when sent it must be the one stored with the merchant's walletpay credentials (401 otherwise), which is what the signature is checked against"),
    }),
    body: z.record(z.string(), z.unknown()),
    responses: { 200: Ack, 400: ErrorBodySchema, 401: ErrorBodySchema, 409: ErrorBodySchema, 413: ErrorBodySchema, 422: ErrorBodySchema, 429: ErrorBodySchema, 500: ErrorBodySchema, 502: ErrorBodySchema, 503: ErrorBodySchema },
  },
  mobilemoney: operatorCallback('', 'mobilemoney STK push result', 'The push result `Body.stkCallback` (MerchantRequestID, CheckoutRequestID, ResultCode, ResultDesc, CallbackMetadata). ResultCode 0 → completed (the receipt becomes provider_ref), anything else → failed. De-duplicated by CheckoutRequestID for 24 hours.'),
  mobilemoneyStatusResult: operatorCallback('/transactionstatus/result', 'mobilemoney transaction-status result', 'The `Result` of a check-status query. A completed transaction settles its pending payment and enqueues the merchant event.'),
  mobilemoneyStatusTimeout: operatorCallback('/transactionstatus/timeout', 'mobilemoney transaction-status timeout', 'The operator could not process a check-status query in time. Recorded on the query.'),
  mobilemoneyReversalResult: withProviderError(operatorCallback('/reversal/result', 'mobilemoney reversal result', 'The `Result` of a reversal. 0 or R000001: refund completed, payment reversed, payment.reversed. Any other code: refund failed with the reason, refund.failed; but once the reversal was sent again (an earlier request\'s answer was lost), only a success settles it and a refusal is recorded, the refund left pending. 502 when the result comes before its request\'s acknowledgement was recorded (the operator sends it again).')),
  mobilemoneyReversalTimeout: withProviderError(operatorCallback('/reversal/timeout', 'mobilemoney reversal timeout', 'The operator reports a queue timeout for a reversal request. It is no final outcome (the operator may still carry the request out and send its result): ' +
      'recorded in the refund\'s audit, the refund stays pending until its result or a status report the refund sync asks for settles it (without an outcome the sync sends the reversal again; a repeat of one that did happen is answered \'already reversed\', which completes it). ' +
      "502 when the timeout comes before its request's acknowledgement was recorded (the operator sends it again).")),
});
