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
  /** payment.refunded, refund.failed and payment.reversed only: the refund. */
  refund_id?: string;
  /** payment.refunded, refund.failed and payment.reversed only: the payment's amount refunded after the event. */
  amount_refunded?: string;
  /** refund.failed only: why the refund failed. payment.failed carries none (GET /v1/payments/{id} has the payment's failure_reason). */
  failure_reason?: string;
}

/** The body of a payment event delivery; `id` is the event id, the X-Webhook-Id header the delivery id. */
export interface PaymentWebhookEvent {
  id: string;
  type: Exclude<WebhookEventType, 'webhook.test'>;
  created_at: string;
  data: WebhookEventData;
}

/** The body of a `webhook.test` delivery (POST /v1/webhooks/test). */
export interface TestWebhookEvent {
  id: string;
  type: 'webhook.test';
  created_at: string;
  data: { message: string; merchant_id: string };
}

/** Every delivery's body: narrow on `type`. */
export type WebhookEvent = PaymentWebhookEvent | TestWebhookEvent;

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
  /** Largest accepted distance between the timestamp and now, in seconds (default 300): a finite number ≥ 0, else a TypeError. */
  toleranceSec?: number;
  /** The receiver's clock (tests): a valid Date or finite milliseconds since the epoch, else a TypeError. */
  now?: Date | number;
}

const SECRET_PREFIX = 'whsec_';
/**
 * The fewest key bytes a secret may carry: Standard Webhooks asks for 24 to 64; the service issues 32
 * (`whsec_` + the base64 of 32 random bytes). A shorter key — README's placeholder `whsec_…` copied as
 * it is decodes to none — is one anyone can sign with.
 */
const MIN_SECRET_BYTES = 24;

/**
 * The HMAC key of the Standard Webhooks signature: the bytes the base64 (or base64url) after `whsec_`
 * encodes. Throws a TypeError (naming `where`) unless `secret` is a `whsec_` secret encoding at least
 * MIN_SECRET_BYTES bytes. verifyWebhook and signTestWebhook both go through it, so a secret one refuses the
 * other refuses too, and both decode it alike. The secret itself never goes into the message.
 */
export function webhookSecretKey(secret: unknown, where: string): Buffer {
  const shown = typeof secret === 'string' ? `a ${secret.length}-character string` : secret === null ? 'null' : typeof secret;
  const encoded = typeof secret === 'string' && secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : undefined;
  const key = encoded !== undefined && /^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded) ? Buffer.from(encoded, 'base64') : Buffer.alloc(0);
  if (key.length < MIN_SECRET_BYTES) {
    throw new TypeError(
      `${where}: secret must be the whsec_ secret PUT /v1/merchant/webhook returned (whsec_ + base64 of at least ${MIN_SECRET_BYTES} bytes), got ${shown}${encoded === undefined ? '' : ` encoding ${key.length} bytes`}`,
    );
  }
  return key;
}

/** Throws a TypeError unless toleranceSec and now, when given, are usable: otherwise replay protection would be off. */
function checkOptions(options: VerifyWebhookOptions): void {
  const { toleranceSec, now } = options;
  if (toleranceSec !== undefined && (typeof toleranceSec !== 'number' || !Number.isFinite(toleranceSec) || toleranceSec < 0)) {
    throw new TypeError(`verifyWebhook: toleranceSec must be a finite number of seconds ≥ 0, got ${String(toleranceSec)}`);
  }
  const nowMs = now instanceof Date ? now.getTime() : now;
  if (now !== undefined && (typeof nowMs !== 'number' || !Number.isFinite(nowMs))) {
    throw new TypeError(`verifyWebhook: now must be a valid Date or milliseconds since the epoch, got ${now instanceof Date ? 'an invalid Date' : String(now)}`);
  }
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

/** The timestamp as unix seconds, within `toleranceSec` of the receiver's clock. */
function checkTimestamp(name: string, text: string, options: VerifyWebhookOptions): void {
  const toleranceSec = options.toleranceSec ?? 300;
  if (!/^\d{1,12}$/.test(text)) throw new WebhookVerificationError('malformed_header', `${name} must be unix seconds`);
  const timestamp = Number(text);
  const nowMs = options.now === undefined ? Date.now() : typeof options.now === 'number' ? options.now : options.now.getTime();
  const skew = Math.floor(nowMs / 1000) - timestamp;
  if (skew > toleranceSec) throw new WebhookVerificationError('timestamp_too_old', `timestamp is ${skew} s old; the tolerance is ${toleranceSec} s`);
  if (-skew > toleranceSec) throw new WebhookVerificationError('timestamp_in_future', `timestamp is ${-skew} s in the future; the tolerance is ${toleranceSec} s`);
}

/** X-Payments-Signature: `sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">` keyed by the whole secret string. */
function verifyPaymentsSignature(body: Buffer, headers: HeaderBag, secret: string, options: VerifyWebhookOptions): void {
  const timestampText = required(headers, 'X-Payments-Timestamp');
  const signatureText = required(headers, 'X-Payments-Signature');
  checkTimestamp('X-Payments-Timestamp', timestampText, options);
  const match = /^sha256=([0-9a-f]{64})$/i.exec(signatureText);
  if (!match) throw new WebhookVerificationError('malformed_header', 'X-Payments-Signature must be sha256=<64 hex digits>');
  const expected = createHmac('sha256', secret).update(`${timestampText}.`).update(body).digest();
  const given = Buffer.from(match[1]!, 'hex');
  if (!timingSafeEqual(expected, given)) throw new WebhookVerificationError('signature_mismatch', 'signature does not match the body and timestamp');
}

/**
 * Standard Webhooks: `webhook-signature: v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<raw body>">`
 * (space-separated when there are several) keyed by the bytes the base64 after `whsec_` encodes.
 */
function verifyStandardSignature(body: Buffer, headers: HeaderBag, key: Buffer, options: VerifyWebhookOptions): void {
  const id = required(headers, 'webhook-id');
  const timestampText = required(headers, 'webhook-timestamp');
  const signatures = required(headers, 'webhook-signature');
  checkTimestamp('webhook-timestamp', timestampText, options);
  const expected = createHmac('sha256', key).update(`${id}.${timestampText}.`).update(body).digest();
  const given = signatures
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .map((entry) => Buffer.from(entry.slice(3), 'base64'));
  if (given.length === 0) throw new WebhookVerificationError('malformed_header', 'webhook-signature has no v1,<base64> entry');
  if (!given.some((mac) => mac.length === expected.length && timingSafeEqual(mac, expected))) {
    throw new WebhookVerificationError('signature_mismatch', 'signature does not match the body, id and timestamp');
  }
}

/**
 * The body's bytes: a string (as received, UTF-8), a Buffer or other Uint8Array, or an ArrayBuffer (fetch's
 * `await request.arrayBuffer()`). Anything else — most often the object a JSON body parser made of it, which
 * cannot be turned back into the signed bytes — is a TypeError that says so, not a failed verification.
 */
function rawBodyBytes(rawBody: unknown): Buffer {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  if (rawBody instanceof ArrayBuffer) return Buffer.from(rawBody);
  const got = rawBody === null ? 'null' : typeof rawBody === 'object' ? 'an object (a parsed JSON body?)' : typeof rawBody;
  throw new TypeError(`verifyWebhook: rawBody must be the raw body exactly as received (a string, Buffer, Uint8Array or ArrayBuffer), before any JSON parsing (e.g. express.raw({ type: 'application/json' })); got ${got}`);
}

/**
 * Verifies a delivery and returns the parsed event. Every delivery carries the delivery id `X-Webhook-Id`
 * and two signatures: the service's `X-Payments-Signature` + `X-Payments-Timestamp` and the Standard
 * Webhooks `webhook-id` / `webhook-timestamp` / `webhook-signature`. `X-Webhook-Id` is required (receivers
 * de-duplicate on it: without it a replay would be handled again), and so is the Standard Webhooks
 * signature, the only one that covers the id: `X-Webhook-Id` must equal the signed `webhook-id`, so a
 * captured delivery replayed under another id, or with its id stripped, is refused. `X-Payments-Signature`
 * is checked too when present. A missing header is `missing_header`.
 * Pass the raw body exactly as received (before any JSON parsing): a string, Buffer, Uint8Array or ArrayBuffer;
 * anything else is a TypeError. Throws WebhookVerificationError.
 * Deliveries can repeat: de-duplicate on the `X-Webhook-Id` (= `webhook-id`) header, or on the event's
 * `id` when you also read events from `GET /v1/events` (one delivery per event; the delivery id differs
 * from the event id).
 * A receiver's own mistakes are a TypeError before anything is checked: a secret that is not `whsec_` + the
 * base64 of at least 24 bytes (an empty secret, or the placeholder `whsec_…`, is one anyone can sign with),
 * a toleranceSec that is not a finite number ≥ 0, or a `now` that is not a valid time (either turned the
 * timestamp check off).
 */
export function verifyWebhook(rawBody: string | Uint8Array | ArrayBuffer, headers: HeaderBag, secret: string, options: VerifyWebhookOptions = {}): WebhookEvent {
  const key = webhookSecretKey(secret, 'verifyWebhook');
  checkOptions(options);
  const body = rawBodyBytes(rawBody);
  // Receivers de-duplicate on X-Webhook-Id: a delivery without it (the service always sends it) would be
  // handled again on every replay.
  required(headers, 'X-Webhook-Id');
  // X-Payments-Signature does not cover X-Webhook-Id: with the Standard Webhooks headers stripped, a captured
  // delivery re-posted under a new id would pass as a new delivery to a receiver de-duplicating on that id.
  if (header(headers, 'webhook-signature') === undefined) {
    throw new WebhookVerificationError('missing_header', 'missing webhook-signature header: X-Webhook-Id is only trusted when webhook-signature signs it');
  }
  if (header(headers, 'X-Payments-Signature') !== undefined) verifyPaymentsSignature(body, headers, secret, options);
  verifyStandardSignature(body, headers, key, options);
  if (header(headers, 'X-Webhook-Id') !== header(headers, 'webhook-id')) {
    throw new WebhookVerificationError('signature_mismatch', 'X-Webhook-Id is not the signed webhook-id');
  }

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
