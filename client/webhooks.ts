/// <reference types="node" />
/**
 * Verifying the service's signed webhooks on the receiving side. Self-contained (Node's `crypto`
 * only), so a merchant's receiver needs nothing else from this package.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { WebhookEventType } from '../contract/webhook-logs.js';

export type { WebhookEventType };

export interface WebhookEventData {
  payment_id: string;
  /** Decimal string in major units, e.g. "25.00". */
  amount: string;
  currency: string;
  provider: 'cardpay' | 'mobilemoney' | 'walletpay';
  /** The payment's status after the event. */
  status: string;
  previous_status: string;
  /** payment.refunded, refund.failed, payment.reversed. */
  refund_id?: string;
  amount_refunded?: string;
  failure_reason?: string;
}

/** The body of every delivery; `id` is the event id, the X-Webhook-Id header the delivery id. */
export interface WebhookEvent {
  id: string;
  type: WebhookEventType;
  created_at: string;
  data: WebhookEventData;
}

export type WebhookVerificationReason =
  | 'missing_header'
  | 'malformed_header'
  | 'timestamp_too_old'
  | 'timestamp_in_future'
  | 'signature_mismatch'
  | 'malformed_body';

export class WebhookVerificationError extends Error {
  constructor(
    readonly reason: WebhookVerificationReason,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

export interface VerifyWebhookOptions {
  /** Largest accepted distance between the timestamp and now, in seconds (default 300). */
  toleranceSec?: number;
  /** The receiver's clock (tests): a Date or milliseconds since the epoch. */
  now?: Date | number;
}

type HeaderBag = Record<string, string | string[] | undefined> | Headers;

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(bag).find((k) => k.toLowerCase() === name.toLowerCase());
  const value = key === undefined ? undefined : bag[key];
  return Array.isArray(value) ? value[0] : value;
}

function required(headers: HeaderBag, name: string): string {
  const value = header(headers, name)?.trim();
  if (!value) throw new WebhookVerificationError('missing_header', `missing ${name} header`);
  return value;
}

/**
 * Checks a delivery's `X-Payments-Signature` (`sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">`
 * keyed by your `whsec_` secret) and `X-Payments-Timestamp`, then returns the parsed event.
 * Pass the raw body exactly as received (before any JSON parsing). Throws WebhookVerificationError.
 * Deliveries can repeat: de-duplicate on the `X-Webhook-Id` header.
 */
export function verifyWebhook(rawBody: string | Uint8Array, headers: HeaderBag, secret: string, options: VerifyWebhookOptions = {}): WebhookEvent {
  const toleranceSec = options.toleranceSec ?? 300;
  const timestampText = required(headers, 'X-Payments-Timestamp');
  const signatureText = required(headers, 'X-Payments-Signature');

  if (!/^\d{1,12}$/.test(timestampText)) {
    throw new WebhookVerificationError('malformed_header', 'X-Payments-Timestamp must be unix seconds');
  }
  const timestamp = Number(timestampText);
  const nowMs = options.now === undefined ? Date.now() : typeof options.now === 'number' ? options.now : options.now.getTime();
  const skew = Math.floor(nowMs / 1000) - timestamp;
  if (skew > toleranceSec) throw new WebhookVerificationError('timestamp_too_old', `timestamp is ${skew} s old; the tolerance is ${toleranceSec} s`);
  if (-skew > toleranceSec) throw new WebhookVerificationError('timestamp_in_future', `timestamp is ${-skew} s in the future; the tolerance is ${toleranceSec} s`);

  const match = /^sha256=([0-9a-f]{64})$/i.exec(signatureText);
  if (!match) throw new WebhookVerificationError('malformed_header', 'X-Payments-Signature must be sha256=<64 hex digits>');
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  const expected = createHmac('sha256', secret).update(`${timestampText}.`).update(body).digest();
  const given = Buffer.from(match[1]!, 'hex');
  if (!timingSafeEqual(expected, given)) throw new WebhookVerificationError('signature_mismatch', 'signature does not match the body and timestamp');

  let event: unknown;
  try {
    event = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('malformed_body', 'body is not valid JSON');
  }
  const e = event as Partial<WebhookEvent> | null;
  if (!e || typeof e !== 'object' || typeof e.id !== 'string' || typeof e.type !== 'string' || typeof e.data !== 'object' || e.data === null) {
    throw new WebhookVerificationError('malformed_body', 'body is not a webhook event');
  }
  return e as WebhookEvent;
}
