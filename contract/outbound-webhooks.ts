/**
 * The outbound webhooks the service POSTs to the merchant's webhook_url (interface.md "Events"),
 * described for openapi.json's `x-webhooks`: the headers of every delivery and an example body per
 * event type. The body schema is the contract's EventSchema (GET /v1/events returns the same bodies).
 */
import type { WEBHOOK_EVENT_TYPES } from './webhook-logs.js';

type EventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const OUTBOUND_WEBHOOK_HEADERS = [
  { name: 'X-Event-Type', description: 'The event type (the body\'s `type`).', example: 'payment.completed' },
  { name: 'X-Payments-Timestamp', description: 'Unix time in seconds when this attempt was signed; reject it when far from your clock (the SDK allows 300 s).', example: '1795428931' },
  {
    name: 'X-Payments-Signature',
    description: '`sha256=<hex HMAC-SHA256 of "<X-Payments-Timestamp>.<raw body>">`, keyed by the whole `whsec_` secret string from PUT /v1/merchant/webhook.',
    example: 'sha256=5f2b7c0e9d4a1b3c6e8f0a2d4c6e8f0a2b4d6f8a0c2e4a6c8e0b2d4f6a8c0e2b',
  },
  { name: 'X-Webhook-Id', description: 'The delivery id, the same on every retry of this delivery: de-duplicate on it.', example: '3f2b8c1d-9e4a-4b7c-8d6e-5f4a3b2c1d0e' },
  { name: 'webhook-id', description: 'Standard Webhooks: the same delivery id.', example: '3f2b8c1d-9e4a-4b7c-8d6e-5f4a3b2c1d0e' },
  { name: 'webhook-timestamp', description: 'Standard Webhooks: the same timestamp.', example: '1795428931' },
  {
    name: 'webhook-signature',
    description: 'Standard Webhooks: `v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<raw body>">`, keyed by the bytes the base64 after `whsec_` encodes.',
    example: 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  },
] as const;

const payment = { payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', amount: '25.00', currency: 'USD', provider: 'cardpay' };

/** What each event means and one example body, exactly as delivered. */
/** The `data.message` of every `webhook.test` event (POST /v1/webhooks/test): the example below shows the text sent. */
export const TEST_EVENT_MESSAGE = 'A test event from the payments service: your endpoint is reachable.';

export const OUTBOUND_WEBHOOK_EVENTS: Record<EventType, { summary: string; example: Record<string, unknown> }> = {
  'payment.completed': {
    summary: 'A payment became completed (provider callback, capture, status sync or reconciliation)',
    example: { id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d', type: 'payment.completed', created_at: '2026-11-22T10:15:31.000Z', data: { ...payment, status: 'completed', previous_status: 'pending' } },
  },
  'payment.failed': {
    summary: 'A payment was declined or failed',
    example: {
      id: '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f', type: 'payment.failed', created_at: '2026-11-22T10:15:31.000Z',
      data: { ...payment, status: 'failed', previous_status: 'pending' },
    },
  },
  'payment.refunded': {
    summary: 'A refund completed (cardpay, walletpay); status becomes refunded once refunds reach the amount',
    example: {
      id: '2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a', type: 'payment.refunded', created_at: '2026-11-22T11:02:10.000Z',
      data: { ...payment, status: 'completed', previous_status: 'completed', refund_id: '7c9e6679-7425-40de-944b-e07fc1f90ae7', amount_refunded: '5.00' },
    },
  },
  'payment.reversed': {
    summary: 'A mobile-money reversal completed',
    example: {
      id: '3e4f5a6b-7c8d-4e9f-8a1b-2c3d4e5f6a7b', type: 'payment.reversed', created_at: '2026-11-22T11:05:00.000Z',
      data: { payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', amount: '100.00', currency: 'KES', provider: 'mobilemoney', status: 'reversed', previous_status: 'completed', refund_id: '7c9e6679-7425-40de-944b-e07fc1f90ae7', amount_refunded: '100.00' },
    },
  },
  'refund.failed': {
    summary: 'A refund (or mobile-money reversal) failed, or a card refund failed after it completed (amount_refunded lowered); the payment keeps its status',
    example: {
      id: '4f5a6b7c-8d9e-4f0a-9b1c-2d3e4f5a6b7c', type: 'refund.failed', created_at: '2026-11-22T11:05:00.000Z',
      data: { payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', amount: '100.00', currency: 'KES', provider: 'mobilemoney', status: 'completed', previous_status: 'completed', refund_id: '7c9e6679-7425-40de-944b-e07fc1f90ae7', amount_refunded: '0.00', failure_reason: 'The initiator information is invalid.' },
    },
  },
  'webhook.test': {
    summary: 'A test event sent by POST /v1/webhooks/test',
    example: {
      id: '5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d', type: 'webhook.test', created_at: '2026-11-22T10:20:00.000Z',
      data: { message: TEST_EVENT_MESSAGE, merchant_id: '9b0c2d4e-6f80-4a1b-8c3d-5e7f9a1b3c5d' },
    },
  },
};

export const OUTBOUND_WEBHOOK_DELIVERY_RULES =
  'POSTed to the merchant\'s webhook_url with a JSON body (the Event schema; GET /v1/events returns the same bodies). A 2xx answer ' +
  'acknowledges it; anything else, or no answer within 30 s, is retried after 30 s, 2 min, 10 min, 30 min and 2 h, then the delivery is ' +
  'dead (see /v1/webhooks/logs). Deliveries can repeat: de-duplicate on X-Webhook-Id. Verify the signature over the raw body ' +
  '(the SDK\'s verifyWebhook does; signTestWebhook makes signed test deliveries).';
