import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { Money } from '../../domain/ports.js';
import { eventMeaning, failedIntentReason, intentMoney, redactIntent } from './transformers.js';

/**
 * Inbound cardpay events (POST /v1/webhooks/cardpay): the Stripe signature scheme and the event shapes
 * the service acts on.
 */

/**
 * `Cardpay-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]`, HMAC-SHA256 of `t.rawBody` with the endpoint secret.
 * Schemes other than v1 are ignored; any v1 may match (secret rolling); a timestamp more than
 * `toleranceSec` away from now, in either direction, is refused; a malformed header is refused.
 */
export function verifyCardpaySignature(
  rawBody: Buffer,
  header: string | undefined,
  secret: string,
  nowSec: number = Date.now() / 1000,
  toleranceSec = 300,
): boolean {
  if (!header || !secret) return false;
  let timestamp: number | null = null;
  const signatures: Buffer[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) return false;
    const scheme = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (scheme === 't') {
      if (timestamp !== null || !/^\d{1,12}$/.test(value)) return false;
      timestamp = Number(value);
    } else if (scheme === 'v1' && /^[0-9a-fA-F]{64}$/.test(value)) {
      signatures.push(Buffer.from(value, 'hex'));
    }
  }
  if (timestamp === null || signatures.length === 0) return false;
  if (Math.abs(nowSec - timestamp) > toleranceSec) return false;
  const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();
  // Compare with every candidate (no early exit), each in constant time.
  let matched = false;
  for (const signature of signatures) if (timingSafeEqual(signature, expected)) matched = true;
  return matched;
}

export type CardpayNotification = { eventId: string; type: string } & (
  | {
      kind: 'payment';
      paymentIntentId: string;
      /** Our payment id, from the intent's metadata.payment_id. */
      paymentId: string | null;
      status: 'completed' | 'failed';
      failureReason: string | null;
      /** What the intent collected (a success) or asks for (a failure), as the provider reports it (intentMoney). */
      amount: Money | null;
      raw: unknown;
    }
  | {
      kind: 'refund';
      paymentIntentId: string;
      /**
       * Our payment id, from the charge's metadata.payment_id (Stripe copies the intent's metadata to the
       * charge it makes): finds the payment also while its intent id is not recorded (a lost create answer).
       */
      paymentId: string | null;
      /** The refunded charge: its refunds are fetched from the provider (a charge no longer embeds them). */
      chargeId: string;
      raw: unknown;
    }
  | { kind: 'ignored' }
);

const minor = z.number().int().nonnegative().safe();

const EventSchema = z.object({
  id: z.string().min(1),
  object: z.literal('event'),
  type: z.string().min(1),
  data: z.object({ object: z.record(z.unknown()) }),
});

const IntentSchema = z
  .object({
    id: z.string().min(1),
    object: z.literal('payment_intent'),
    status: z.string(),
    amount: minor.nullish(),
    amount_received: minor.nullish(),
    currency: z.string().nullish(),
    metadata: z.record(z.string()).nullish(),
    last_payment_error: z.object({ message: z.string().nullish() }).passthrough().nullish(),
    cancellation_reason: z.string().nullish(),
  })
  .passthrough();

const ChargeSchema = z
  .object({
    id: z.string().min(1),
    object: z.literal('charge'),
    payment_intent: z.union([z.string(), z.object({ id: z.string() }).passthrough()]).nullish(),
    amount_refunded: minor,
    metadata: z.record(z.string()).nullish(),
  })
  .passthrough();

const ExpandableId = z.union([z.string(), z.object({ id: z.string() }).passthrough()]).nullish();
const idOf = (value: z.infer<typeof ExpandableId>): string | null => (typeof value === 'string' ? value : (value?.id ?? null));

const RefundSchema = z
  .object({ id: z.string().min(1), object: z.literal('refund'), charge: ExpandableId, payment_intent: ExpandableId })
  .passthrough();

/**
 * Where an event comes from, as it says: its mode (livemode; null when absent) and, for an event of a
 * connected account delivered to a Connect endpoint, that account (null otherwise). A signature proves
 * only which endpoint's secret signed it: an endpoint's events are of its mode, while the secret stored
 * may be of an endpoint of another mode than the key (the merchant's own).
 */
export function cardpayEventOrigin(body: unknown): { livemode: boolean | null; account: string | null } {
  const event = body && typeof body === 'object' ? (body as Record<string, unknown>) : {};
  return {
    livemode: typeof event.livemode === 'boolean' ? event.livemode : null,
    account: typeof event.account === 'string' && event.account !== '' ? event.account : null,
  };
}

/** Parses a verified event body. Event types the service does not use → `ignored`; a body that is not an event throws. */
export function parseCardpayEvent(body: unknown): CardpayNotification {
  const event = EventSchema.parse(body);
  const base = { eventId: event.id, type: event.type };
  const meaning = eventMeaning(event.type);
  if (!meaning) return { ...base, kind: 'ignored' };
  if (meaning.kind === 'payment') {
    const intent = IntentSchema.parse(event.data.object);
    const raw = redactIntent(intent);
    return {
      ...base,
      kind: 'payment',
      paymentIntentId: intent.id,
      paymentId: intent.metadata?.payment_id ?? null,
      status: meaning.status,
      failureReason: meaning.status === 'failed' ? failedIntentReason(intent) : null,
      amount: intentMoney(intent, meaning.status === 'completed'),
      raw,
    };
  }
  // charge.refunded carries a charge, charge.refund.updated and refund.* a refund: either way the charge's refunds are what is read.
  const object = meaning.carries === 'refund' ? RefundSchema.parse(event.data.object) : ChargeSchema.parse(event.data.object);
  const chargeId = object.object === 'refund' ? idOf(object.charge) : object.id;
  const intentId = idOf(object.payment_intent);
  // A charge made without a PaymentIntent was not made by this service.
  if (!intentId || !chargeId) return { ...base, kind: 'ignored' };
  const paymentId = object.object === 'charge' ? (object.metadata?.payment_id ?? null) : null;
  return { ...base, kind: 'refund', paymentIntentId: intentId, paymentId, chargeId, raw: object };
}
