import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { WebhookVerificationError, signTestWebhook, verifyWebhook } from '../../client/index.js';

const secret = 'whsec_test_secret_for_verification_0001';
const now = new Date('2026-11-22T10:00:00Z');
const ts = Math.floor(now.getTime() / 1000);
const body = JSON.stringify({
  id: 'a9f1c7d2-4b6e-4c8a-9d55-6f1e8f3a7c21',
  type: 'payment.refunded',
  created_at: now.toISOString(),
  data: {
    payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', amount: '25.00', currency: 'USD', provider: 'cardpay',
    status: 'refunded', previous_status: 'completed', refund_id: '7c9e6679-7425-40de-944b-e07fc1f90ae7', amount_refunded: '25.00',
  },
});
const sign = (timestamp: number, payload: string, key = secret) =>
  `sha256=${createHmac('sha256', key).update(`${timestamp}.${payload}`).digest('hex')}`;
const deliveryId = 'delivery-0001';
const signStandard = (timestamp: number, payload: string) =>
  `v1,${createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64')).update(`${deliveryId}.${timestamp}.${payload}`).digest('base64')}`;
/** Every header the service sends with a delivery of `payload` signed at `timestamp`. */
const headersFor = (timestamp: number, payload = body): Record<string, string> => ({
  'x-payments-timestamp': String(timestamp),
  'x-payments-signature': sign(timestamp, payload),
  'x-event-type': 'payment.refunded',
  'x-webhook-id': deliveryId,
  'webhook-id': deliveryId,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signStandard(timestamp, payload),
});
const without = (headers: Record<string, string>, ...names: string[]) =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => !names.includes(name.toLowerCase())));

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WebhookVerificationError);
    return (err as WebhookVerificationError).reason;
  }
  throw new Error('expected verification to fail');
}

describe('verifyWebhook', () => {
  it('returns the typed event for a valid delivery (string, bytes, Node headers and fetch Headers)', () => {
    const event = verifyWebhook(body, headersFor(ts), secret, { now });
    expect(event.type).toBe('payment.refunded');
    if (event.type === 'webhook.test') throw new Error('expected a payment event');
    expect(event.data.refund_id).toBe('7c9e6679-7425-40de-944b-e07fc1f90ae7');
    expect(verifyWebhook(new TextEncoder().encode(body), new Headers(headersFor(ts)), secret, { now: now.getTime() })).toEqual(event);
    const upper = Object.fromEntries(Object.entries(headersFor(ts)).map(([name, value]) => [name.toUpperCase(), [value]]));
    expect(verifyWebhook(Buffer.from(body), upper, secret, { now }).id).toBe(event.id);
    // fetch-style receivers (`await request.arrayBuffer()`).
    expect(verifyWebhook(new TextEncoder().encode(body).buffer, headersFor(ts), secret, { now }).id).toBe(event.id);
    // Without X-Payments-Signature: the Standard Webhooks signature, which covers the id, is enough.
    expect(verifyWebhook(body, without(headersFor(ts), 'x-payments-signature', 'x-payments-timestamp'), secret, { now }).id).toBe(event.id);
  });

  it('rejects missing headers', () => {
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'x-payments-timestamp']) {
      expect(reasonOf(() => verifyWebhook(body, without(headersFor(ts), name), secret, { now }))).toBe('missing_header');
    }
    // X-Payments-Signature alone does not cover the delivery id receivers de-duplicate on.
    expect(reasonOf(() => verifyWebhook(body, { 'x-payments-timestamp': String(ts), 'x-payments-signature': sign(ts, body) }, secret, { now }))).toBe('missing_header');
  });

  it('refuses a delivery without X-Webhook-Id (missing_header): a receiver de-duplicating on it would handle a replay again', () => {
    const signed = signTestWebhook({ type: 'webhook.test', data: { message: 'hi', merchant_id: 'm_1' } }, secret, { deliveryId: 'delivery-2', timestamp: now });
    expect(verifyWebhook(signed.body, signed.headers, secret, { now }).id).toBe(signed.event.id);
    const { 'X-Webhook-Id': _id, ...stripped } = signed.headers;
    const err = (() => {
      try {
        verifyWebhook(signed.body, stripped, secret, { now });
      } catch (e) {
        return e;
      }
      throw new Error('a delivery without X-Webhook-Id was verified');
    })();
    expect(err).toBeInstanceOf(WebhookVerificationError);
    expect(err).toMatchObject({ reason: 'missing_header', message: 'missing X-Webhook-Id header' });
    expect(reasonOf(() => verifyWebhook(signed.body, { ...stripped, 'X-Webhook-Id': ' ' }, secret, { now }))).toBe('missing_header');
  });

  it('rejects malformed headers', () => {
    expect(reasonOf(() => verifyWebhook(body, { ...headersFor(ts), 'x-payments-timestamp': '2026-11-22' }, secret, { now }))).toBe('malformed_header');
    expect(reasonOf(() => verifyWebhook(body, { ...headersFor(ts), 'x-payments-signature': 'v1=abc' }, secret, { now }))).toBe('malformed_header');
  });

  it('rejects a timestamp outside the tolerance, either way', () => {
    expect(reasonOf(() => verifyWebhook(body, headersFor(ts - 301), secret, { now }))).toBe('timestamp_too_old');
    expect(reasonOf(() => verifyWebhook(body, headersFor(ts + 301), secret, { now }))).toBe('timestamp_in_future');
    expect(verifyWebhook(body, headersFor(ts - 300), secret, { now }).type).toBe('payment.refunded');
    expect(reasonOf(() => verifyWebhook(body, headersFor(ts - 60), secret, { now, toleranceSec: 30 }))).toBe('timestamp_too_old');
  });

  it('rejects a wrong secret, a changed body and a signature moved to another timestamp', () => {
    expect(reasonOf(() => verifyWebhook(body, headersFor(ts), `whsec_${randomBytes(32).toString('base64')}`, { now }))).toBe('signature_mismatch');
    expect(reasonOf(() => verifyWebhook(body.replace('25.00', '2500.00'), headersFor(ts), secret, { now }))).toBe('signature_mismatch');
    const moved = { ...headersFor(ts), 'x-payments-timestamp': String(ts + 1) };
    expect(reasonOf(() => verifyWebhook(body, moved, secret, { now }))).toBe('signature_mismatch');
  });

  it('binds the delivery id: a captured delivery replayed under another X-Webhook-Id / webhook-id is refused', () => {
    const signed = signTestWebhook({ type: 'webhook.test', data: { message: 'hi', merchant_id: 'm_1' } }, secret, { deliveryId: 'delivery-1', timestamp: now });
    expect(verifyWebhook(signed.body, signed.headers, secret, { now }).id).toBe(signed.event.id);
    // A receiver that de-duplicates on the id (as advised) would take these for new deliveries.
    const renamed = { ...signed.headers, 'X-Webhook-Id': 'attacker-1', 'webhook-id': 'attacker-1' };
    expect(reasonOf(() => verifyWebhook(signed.body, renamed, secret, { now }))).toBe('signature_mismatch');
    const onlyOurs = { ...signed.headers, 'X-Webhook-Id': 'attacker-2' };
    expect(reasonOf(() => verifyWebhook(signed.body, onlyOurs, secret, { now }))).toBe('signature_mismatch');
    // With the Standard Webhooks headers stripped, X-Payments-Signature alone does not vouch for the id.
    const stripped = Object.fromEntries(Object.entries(signed.headers).filter(([name]) => !name.toLowerCase().startsWith('webhook-')));
    expect(Object.keys(stripped)).toContain('X-Payments-Signature');
    expect(reasonOf(() => verifyWebhook(signed.body, { ...stripped, 'X-Webhook-Id': 'attacker-3' }, secret, { now }))).toBe('missing_header');
    // Either signature wrong is enough to refuse.
    const badStandard = { ...signed.headers, 'webhook-signature': 'v1,AAAA' };
    expect(reasonOf(() => verifyWebhook(signed.body, badStandard, secret, { now }))).toBe('signature_mismatch');
  });

  it('rejects a correctly signed body that is not an event', () => {
    expect(reasonOf(() => verifyWebhook('not json', headersFor(ts, 'not json'), secret, { now }))).toBe('malformed_body');
    expect(reasonOf(() => verifyWebhook('{"hello":1}', headersFor(ts, '{"hello":1}'), secret, { now }))).toBe('malformed_body');
  });

  it('a body a JSON parser already read is a TypeError that says to pass the raw body, not a failed verification', () => {
    // The usual receiver mistake (express.json() before the handler): a receiver rethrowing anything but a
    // WebhookVerificationError answered 500 with Node's own ERR_INVALID_ARG_TYPE, and every delivery retried.
    for (const parsed of [JSON.parse(body), null, undefined, 42]) {
      expect(() => verifyWebhook(parsed, headersFor(ts), secret, { now })).toThrow(TypeError);
      expect(() => verifyWebhook(parsed, headersFor(ts), secret, { now })).toThrow(/^verifyWebhook: rawBody must be the raw body exactly as received/);
    }
    expect(() => verifyWebhook(JSON.parse(body), headersFor(ts), secret, { now })).toThrow(/got an object \(a parsed JSON body\?\)$/);
  });

  it('a secret anyone could sign with, or options that turn the timestamp check off, are a TypeError before anything is checked', () => {
    // X-Payments-Signature keyed by '' and the Standard Webhooks one keyed by the 0 bytes `whsec_…` decodes to:
    // anyone can compute both, and both were accepted.
    const forgedPayments = { 'x-payments-timestamp': String(ts), 'x-payments-signature': sign(ts, body, '') };
    const forgedStandard = {
      'webhook-id': 'forged-1',
      'webhook-timestamp': String(ts),
      'webhook-signature': `v1,${createHmac('sha256', Buffer.alloc(0)).update(`forged-1.${ts}.${body}`).digest('base64')}`,
    };
    expect(() => verifyWebhook(body, forgedPayments, '', { now })).toThrow(TypeError);
    expect(() => verifyWebhook(body, forgedStandard, 'whsec_…', { now })).toThrow(TypeError);
    const tooShort = `whsec_${randomBytes(23).toString('base64')}`;
    for (const bad of ['', 'whsec_', 'whsec_…', 'whsec_abcd', tooShort, `${secret}\n`, secret.slice('whsec_'.length), undefined as unknown as string]) {
      expect(() => verifyWebhook(body, headersFor(ts), bad, { now })).toThrow(TypeError);
    }
    // The message says what is wrong, never the secret.
    expect(() => verifyWebhook(body, headersFor(ts), 'whsec_abcd', { now })).toThrow(/at least 24 bytes.*got a 10-character string encoding 3 bytes$/);
    // What the service issues (32 bytes, standard base64 or, before, base64url) and 24 bytes are accepted.
    for (const good of [`whsec_${randomBytes(32).toString('base64')}`, `whsec_${randomBytes(32).toString('base64url')}`, `whsec_${randomBytes(24).toString('base64')}`]) {
      const signed = signTestWebhook({ type: 'webhook.test', data: { message: 'hi', merchant_id: 'm_1' } }, good, { timestamp: now });
      expect(verifyWebhook(signed.body, signed.headers, good, { now }).type).toBe('webhook.test');
    }

    // signTestWebhook checks and decodes the secret the same way: it signed with every one of these, so a
    // merchant's test passed a secret their receiver's verifyWebhook throws on.
    const event = { type: 'webhook.test', data: { message: 'hi', merchant_id: 'm_1' } } as const;
    for (const bad of ['', 'whsec_', 'whsec_…', 'whsec_abcd', tooShort, `${secret}\n`, secret.slice('whsec_'.length), `whsec_${randomBytes(32).toString('hex')}!`, undefined as unknown as string]) {
      expect(() => verifyWebhook(body, headersFor(ts), bad, { now })).toThrow(TypeError);
      expect(() => signTestWebhook(event, bad, { timestamp: now })).toThrow(TypeError);
    }
    expect(() => signTestWebhook(event, 'whsec_abcd')).toThrow(/^signTestWebhook: secret must be .*got a 10-character string encoding 3 bytes$/);

    // A delivery signed ten days ago: replayable for ever under a NaN tolerance or an invalid clock.
    const stale = headersFor(ts - 864_000);
    for (const toleranceSec of [NaN, Infinity, -1, '300' as unknown as number]) {
      expect(() => verifyWebhook(body, stale, secret, { now, toleranceSec })).toThrow(TypeError);
    }
    for (const bad of [new Date('not a date'), NaN, Infinity, '2026-11-22T10:00:00Z' as unknown as number]) {
      expect(() => verifyWebhook(body, stale, secret, { now: bad })).toThrow(TypeError);
    }
    expect(reasonOf(() => verifyWebhook(body, stale, secret, { now, toleranceSec: 0 }))).toBe('timestamp_too_old');
    expect(verifyWebhook(body, headersFor(ts), secret, { now, toleranceSec: 0 }).type).toBe('payment.refunded');
  });
});
