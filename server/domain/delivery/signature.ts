import { createHmac } from 'node:crypto';

/** Headers of every outbound delivery (interface.md "Events"). */
export const WEBHOOK_HEADERS = {
  eventType: 'X-Event-Type',
  timestamp: 'X-Payments-Timestamp',
  signature: 'X-Payments-Signature',
  webhookId: 'X-Webhook-Id',
} as const;

/** `sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`, keyed by the merchant's `whsec_` secret. */
export function signWebhook(secret: string, timestampSec: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${timestampSec}.`).update(body, 'utf8').digest('hex');
  return `sha256=${mac}`;
}
