import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { verifyCardpaySignature } from '../../server/providers/cardpay/webhook.js';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// The merchant configured the provider's signing secret itself, so the simulator sends no events of its
// own here: every callback in this file is one the test signs (or forges) by hand.
const SIGNING_SECRET = 'whsec_cardpay_callbacks_test_secret';

let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;

const sign = (body: string, secret = SIGNING_SECRET, timestamp?: number) => signatureHeader(body, secret, timestamp);

/** An intent event as the provider sends it: with the intent's amount, what it collected and currency (those of pendingPayment unless given). */
function intentEvent(type: string, intent: Record<string, unknown>, id = `evt_test_${Date.now()}_${++n}`) {
  const object = { object: 'payment_intent', amount: 4000, amount_received: intent.status === 'succeeded' ? 4000 : 0, currency: 'eur', ...intent };
  return JSON.stringify({ id, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type, data: { object } });
}

const post = (body: string, signature?: string) => {
  const req = t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json');
  if (signature !== undefined) req.set('Cardpay-Signature', signature);
  return req.send(body);
};

async function pendingPayment() {
  const res = await t.http
    .post('/v1/payments')
    .set('X-API-Key', key)
    .set('Idempotency-Key', `cb-${Date.now()}-${++n}`)
    .send({ provider: 'cardpay', amount: '40.00', currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' });
  expect(res.body.data.status).toBe('pending');
  return res.body.data as { id: string; provider_ref: string };
}

const statusOf = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data.status;

beforeAll(async () => {
  t = await startTestService();
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Callback Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_callbacks_01', webhook_secret: SIGNING_SECRET } }).expect(200);
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('POST /v1/webhooks/cardpay', () => {
  it('applies a correctly signed payment_intent.succeeded and emits payment.completed', async () => {
    const p = await pendingPayment();
    const body = intentEvent('payment_intent.succeeded', { id: p.provider_ref, status: 'succeeded', metadata: { payment_id: p.id } });
    const res = await post(body, sign(body));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true });
    expect(await statusOf(p.id)).toBe('completed');
    const event = await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === p.id));
    expect(event.json.data.previous_status).toBe('pending');
  });

  it('matches by intent id when the metadata has no payment id, and applies payment_failed', async () => {
    const p = await pendingPayment();
    const body = intentEvent('payment_intent.payment_failed', {
      id: p.provider_ref, status: 'requires_payment_method', metadata: {},
      last_payment_error: { code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' },
    });
    expect((await post(body, sign(body))).status).toBe(200);
    expect(await statusOf(p.id)).toBe('failed');
  });

  it('accepts a header with several v1 signatures when one of them matches (secret rotation)', async () => {
    const p = await pendingPayment();
    const body = intentEvent('payment_intent.succeeded', { id: p.provider_ref, status: 'succeeded', metadata: { payment_id: p.id } });
    const ts = Math.floor(Date.now() / 1000);
    const good = sign(body, SIGNING_SECRET, ts).split(',v1=')[1];
    const bad = createHmac('sha256', 'whsec_old').update(`${ts}.${body}`).digest('hex');
    expect((await post(body, `t=${ts},v1=${bad},v1=${good}`)).status).toBe(200);
    expect(await statusOf(p.id)).toBe('completed');
  });

  it.each([
    ['a wrong secret', (body: string) => sign(body, 'whsec_attacker')],
    // Well outside the 300 s tolerance: a timestamp one second past it, floored, is within it again when
    // the request lands late in that second (the exact edge is tested below, on a fixed clock).
    ['a stale timestamp', (body: string) => sign(body, SIGNING_SECRET, Math.floor(Date.now() / 1000) - 330)],
    ['a timestamp too far ahead', (body: string) => sign(body, SIGNING_SECRET, Math.floor(Date.now() / 1000) + 330)],
    ['a malformed header', () => 'garbage'],
    ['no header', () => undefined],
  ])('rejects %s with 401 and changes nothing', async (_name, signer) => {
    const p = await pendingPayment();
    const body = intentEvent('payment_intent.succeeded', { id: p.provider_ref, status: 'succeeded', metadata: { payment_id: p.id } });
    const res = await post(body, signer(body));
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('UNAUTHORIZED');
    expect(await statusOf(p.id)).toBe('pending');
    const stored = await t.sql('SELECT 1 FROM provider_events WHERE payment_id = $1', [p.id]);
    expect(stored).toHaveLength(0);
  });

  it('accepts a timestamp up to 300 s away in either direction, and refuses one a second further', () => {
    const body = Buffer.from('{"id":"evt_edge"}');
    const now = 1_800_000_000;
    const at = (ts: number) => verifyCardpaySignature(body, sign(body.toString(), SIGNING_SECRET, ts), SIGNING_SECRET, now);
    expect([at(now - 300), at(now + 300)]).toEqual([true, true]);
    expect([at(now - 301), at(now + 301)]).toEqual([false, false]);
  });

  it('rejects a body altered after signing', async () => {
    const p = await pendingPayment();
    const body = intentEvent('payment_intent.payment_failed', { id: p.provider_ref, status: 'requires_payment_method', metadata: { payment_id: p.id } });
    const signature = sign(body);
    const tampered = body.replace('payment_intent.payment_failed', 'payment_intent.succeeded').replace('requires_payment_method', 'succeeded');
    expect((await post(tampered, signature)).status).toBe(401);
    expect(await statusOf(p.id)).toBe('pending');
  });

  it('acknowledges a duplicate event id once more and ignores it', async () => {
    const p = await pendingPayment();
    const eventId = `evt_dup_${Date.now()}`;
    const body = intentEvent('payment_intent.succeeded', { id: p.provider_ref, status: 'succeeded', metadata: { payment_id: p.id } }, eventId);
    // Every transition written, refused ones too: the duplicate must not add even a refused one.
    const allTransitions = () => t.sql('SELECT to_status, accepted, trigger FROM payment_transitions WHERE payment_id = $1 ORDER BY id', [p.id]);
    expect((await post(body, sign(body))).status).toBe(200);
    const afterFirst = await allTransitions();
    expect((await post(body, sign(body))).status).toBe(200);
    expect(await allTransitions()).toEqual(afterFirst);
    expect(await t.sql('SELECT payment_id FROM provider_events WHERE provider = $1 AND event_id = $2', ['cardpay', eventId])).toEqual([{ payment_id: p.id }]);
    const transitions = await t.sql('SELECT to_status FROM payment_transitions WHERE payment_id = $1 AND accepted ORDER BY id', [p.id]);
    expect(transitions).toEqual([{ to_status: 'pending' }, { to_status: 'completed' }]);
    const events = await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id]);
    expect(events).toEqual([{ type: 'payment.completed' }]);
  });

  it('acknowledges an event for an unknown reference with 200, changes nothing, and counts it unmatched, not accepted', async () => {
    const before = await t.sql('SELECT count(*)::int AS n FROM provider_events');
    const callbacks = async () => {
      const samples = await scrapeMetrics(t);
      const count = (outcome: string) => total(samples, 'provider_callbacks_total', { provider: 'cardpay', outcome });
      return { accepted: count('accepted'), unmatched: count('unmatched'), rejected: count('rejected') };
    };
    const sum = (c: Awaited<ReturnType<typeof callbacks>>) => c.accepted + c.unmatched + c.rejected;
    const counted = await callbacks();
    const body = intentEvent('payment_intent.succeeded', { id: 'pi_unknown_123', status: 'succeeded', metadata: {} });
    const res = await post(body, sign(body));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true });
    expect(await t.sql('SELECT count(*)::int AS n FROM provider_events')).toEqual(before);
    // The counter is bumped as the answer finishes, which supertest may see first.
    const after = await eventually(async () => {
      const now = await callbacks();
      return sum(now) > sum(counted) ? now : null;
    });
    expect(after).toEqual({ ...counted, unmatched: counted.unmatched + 1 });
  });

  it('ignores a late failure for a completed payment (no move back), recording the refusal', async () => {
    const p = await pendingPayment();
    const ok = intentEvent('payment_intent.succeeded', { id: p.provider_ref, status: 'succeeded', metadata: { payment_id: p.id } });
    await post(ok, sign(ok)).expect(200);
    const late = intentEvent('payment_intent.payment_failed', { id: p.provider_ref, status: 'requires_payment_method', metadata: { payment_id: p.id } });
    await post(late, sign(late)).expect(200);
    expect(await statusOf(p.id)).toBe('completed');
    const refused = await t.sql('SELECT from_status, to_status FROM payment_transitions WHERE payment_id = $1 AND NOT accepted', [p.id]);
    expect(refused).toEqual([{ from_status: 'completed', to_status: 'failed' }]);
  });

  it('rejects a body that is not a cardpay event with 400', async () => {
    const body = JSON.stringify({ hello: 'world' });
    const res = await post(body, sign(body));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('BAD_REQUEST');
  });
});
