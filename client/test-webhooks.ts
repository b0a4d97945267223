/// <reference types="node" />
/**
 * Signed webhook deliveries for a merchant's own tests: exactly what the service would POST (same
 * body bytes, same X-Payments-* and Standard Webhooks headers), so a receiver can be tested end to end
 * with `verifyWebhook` and no running service.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { webhookSecretKey, type PaymentWebhookEvent, type TestWebhookEvent, type WebhookEvent } from './webhooks.js';

/** An event to sign: `id` and `created_at` are filled in when left out. */
export type TestWebhookInput =
  | (Omit<PaymentWebhookEvent, 'id' | 'created_at'> & Partial<Pick<PaymentWebhookEvent, 'id' | 'created_at'>>)
  | (Omit<TestWebhookEvent, 'id' | 'created_at'> & Partial<Pick<TestWebhookEvent, 'id' | 'created_at'>>);

export interface SignTestWebhookOptions {
  /** The delivery id (X-Webhook-Id / webhook-id); a random UUID by default. */
  deliveryId?: string;
  /** When it was signed: a Date or milliseconds since the epoch (default: now). */
  timestamp?: Date | number;
}

export interface SignedTestWebhook {
  /** The raw body to POST (and to pass to verifyWebhook). */
  body: string;
  /** Every header the service sends with a delivery. */
  headers: Record<string, string>;
  event: WebhookEvent;
}

/**
 * Signs `event` with the merchant's `whsec_` secret the way the service signs deliveries. A secret
 * verifyWebhook refuses (not `whsec_` + the base64 of at least 24 bytes) is the same TypeError here.
 */
export function signTestWebhook(event: TestWebhookInput, secret: string, options: SignTestWebhookOptions = {}): SignedTestWebhook {
  const key = webhookSecretKey(secret, 'signTestWebhook');
  const full = { id: event.id ?? randomUUID(), type: event.type, created_at: event.created_at ?? new Date().toISOString(), data: event.data } as WebhookEvent;
  const body = JSON.stringify(full);
  const deliveryId = options.deliveryId ?? randomUUID();
  const ms = options.timestamp === undefined ? Date.now() : typeof options.timestamp === 'number' ? options.timestamp : options.timestamp.getTime();
  const timestamp = String(Math.floor(ms / 1000));
  const payments = createHmac('sha256', secret).update(`${timestamp}.`).update(body, 'utf8').digest('hex');
  const standard = createHmac('sha256', key).update(`${deliveryId}.${timestamp}.`).update(body, 'utf8').digest('base64');
  return {
    body,
    event: full,
    headers: {
      'Content-Type': 'application/json',
      'X-Event-Type': full.type,
      'X-Payments-Timestamp': timestamp,
      'X-Payments-Signature': `sha256=${payments}`,
      'X-Webhook-Id': deliveryId,
      'webhook-id': deliveryId,
      'webhook-timestamp': timestamp,
      'webhook-signature': `v1,${standard}`,
    },
  };
}
