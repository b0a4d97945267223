import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema } from './common.js';

const c = initContract();

const Ack = extendApi(z.object({ received: z.literal(true) }), { example: { received: true } });
const callback = { scope: null, tag: 'Provider callbacks' } as const;

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
      "merchant's cardpay webhook secret; several v1 values allowed; 300 s tolerance). Duplicates (by event id) are acknowledged and ignored.",
    metadata: callback,
    headers: z.object({ 'cardpay-signature': z.string().optional(), 'stripe-signature': z.string().optional() }),
    body: z.record(z.string(), z.unknown()),
    responses: { 200: Ack, 400: ErrorBodySchema, 401: ErrorBodySchema, 413: ErrorBodySchema, 500: ErrorBodySchema },
  },
  walletpay: {
    method: 'POST',
    path: '/v1/webhooks/walletpay',
    summary: 'walletpay event callback',
    description:
      'Capture and refund events from the wallet provider (PAYMENT.CAPTURE.COMPLETED, PAYMENT.CAPTURE.DENIED, PAYMENT.CAPTURE.REFUNDED), with ' +
      '`Walletpay-Transmission-Id`, `-Time`, `-Sig`, `-Cert-Url`, `-Auth-Algo` and `Walletpay-Webhook-Id`. Verified through the provider\'s ' +
      "verify-webhook-signature call with the merchant's credentials and stored webhook_id. Duplicates (by transmission id) are acknowledged and ignored.",
    metadata: callback,
    headers: z.object({
      'walletpay-transmission-id': z.string().optional(),
      'walletpay-transmission-time': z.string().optional(),
      'walletpay-transmission-sig': z.string().optional(),
      'walletpay-webhook-id': z.string().optional(),
    }),
    body: z.record(z.string(), z.unknown()),
    responses: { 200: Ack, 401: ErrorBodySchema, 413: ErrorBodySchema, 500: ErrorBodySchema, 502: ErrorBodySchema },
  },
});
