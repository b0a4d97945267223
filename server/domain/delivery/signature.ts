import { createHmac } from 'node:crypto';

/** Headers of every outbound delivery (interface.md "Events"). */
export const WEBHOOK_HEADERS = {
  eventType: 'X-Event-Type',
  timestamp: 'X-Payments-Timestamp',
  signature: 'X-Payments-Signature',
  webhookId: 'X-Webhook-Id',
} as const;

/** The Standard Webhooks headers (standardwebhooks.com) sent next to the interface's own. */
export const STANDARD_WEBHOOK_HEADERS = {
  id: 'webhook-id',
  timestamp: 'webhook-timestamp',
  signature: 'webhook-signature',
} as const;

const SECRET_PREFIX = 'whsec_';

/** `sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`, keyed by the merchant's whole `whsec_` secret string. */
export function signWebhook(secret: string, timestampSec: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${timestampSec}.`).update(body, 'utf8').digest('hex');
  return `sha256=${mac}`;
}

/**
 * The Standard Webhooks key: the bytes the base64 after `whsec_` encodes. Secrets issued now use only
 * the characters both alphabets share; Node's decoder also reads `-`/`_`, so secrets issued earlier in
 * url-safe base64, and those in standard base64 with `+`/`/`, still sign here.
 */
export function standardWebhookKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` keyed by the decoded secret (Standard Webhooks). */
export function signStandardWebhook(secret: string, messageId: string, timestampSec: number, body: string): string {
  const mac = createHmac('sha256', standardWebhookKey(secret)).update(`${messageId}.${timestampSec}.`).update(body, 'utf8').digest('base64');
  return `v1,${mac}`;
}

/** Every signature header of one attempt: the interface's X-Payments-* and the Standard Webhooks set. */
export function signatureHeaders(secret: string, deliveryId: string, eventType: string, timestampSec: number, body: string): Record<string, string> {
  return {
    [WEBHOOK_HEADERS.eventType]: eventType,
    [WEBHOOK_HEADERS.timestamp]: String(timestampSec),
    [WEBHOOK_HEADERS.signature]: signWebhook(secret, timestampSec, body),
    [WEBHOOK_HEADERS.webhookId]: deliveryId,
    [STANDARD_WEBHOOK_HEADERS.id]: deliveryId,
    [STANDARD_WEBHOOK_HEADERS.timestamp]: String(timestampSec),
    [STANDARD_WEBHOOK_HEADERS.signature]: signStandardWebhook(secret, deliveryId, timestampSec, body),
  };
}
