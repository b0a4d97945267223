import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { verifyWebhook } from '../../client/index.js';
import { scrapeMetrics, total, type Samples } from '../support/prometheus.js';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

/**
 * DELETE /v1/merchant/webhook: a merchant turns delivery off. Nothing more goes to the old URL — not new
 * events, not deliveries retrying or being sent at that moment — and what it ends is the merchant's doing,
 * not counted in webhook_delivery_attempts_total{status="dead"} (the operator's alert).
 */

let t: TestService;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  // A first retry soon, the second after the test is over: a delivery failing twice stays `retrying`.
  t = await startTestService({ WEBHOOK_RETRY_SCHEDULE: '100ms,1h' });
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

const remove = (key: string) => t.http.delete('/v1/merchant/webhook').set('X-API-Key', key);
const dead = (s: Samples) => total(s, 'webhook_delivery_attempts_total', { status: 'dead' });

describe('DELETE /v1/merchant/webhook', () => {
  it('needs merchant:write: 403 in the envelope, the registration kept', async () => {
    const m = await t.createMerchant('Removal Scope Shop');
    await registerWebhook(t, m.apiKey, receiver.url('/scope'));
    const { apiKey } = await t.issueKey(m.merchantId, ['merchant:read', 'webhooks:write']);
    const res = await remove(apiKey);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ success: false, error: { code: 'FORBIDDEN', message: expect.stringContaining('merchant:write'), request_id: expect.any(String) } });
    const me = await t.http.get('/v1/merchant').set('X-API-Key', m.apiKey).expect(200);
    expect(me.body.data.webhook_url).toBe(receiver.url('/scope'));
  });

  it('removes URL and secret (200, also again when none is left), and a payment after it gets an event but no delivery', async () => {
    const m = await t.createMerchant('Removal Shop');
    await registerWebhook(t, m.apiKey, receiver.url('/removed'));
    for (let i = 0; i < 2; i += 1) {
      const res = await remove(m.apiKey);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ success: true, data: { webhook_url: null, deleted: true } });
    }
    const me = await t.http.get('/v1/merchant').set('X-API-Key', m.apiKey).expect(200);
    expect(me.body.data.webhook_url).toBeNull();
    expect(await t.sql('SELECT webhook_url, webhook_secret_enc FROM merchants WHERE id = $1', [m.merchantId])).toEqual([{ webhook_url: null, webhook_secret_enc: null }]);

    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: `sk_test_${randomUUID().replace(/-/g, '')}` } }).expect(200);
    const paid = await t.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `removal-${randomUUID()}`)
      .send({ provider: 'cardpay', amount: '5.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
    expect(await t.sql('SELECT 1 FROM events WHERE payment_id = $1', [paid.body.data.id])).not.toHaveLength(0);
    expect(await t.sql('SELECT 1 FROM webhook_deliveries WHERE merchant_id = $1', [m.merchantId])).toHaveLength(0);
    // A test event still needs a URL.
    expect((await t.http.post('/v1/webhooks/test').set('X-API-Key', m.apiKey).send({})).status).toBe(409);
    expect(receiver.on('/removed')).toHaveLength(0);
  });

  it('ends deliveries retrying or being sent at the removal: dead with the reason, never sent again, not counted dead; a new URL and recover deliver them', async () => {
    const m = await t.createMerchant('Abandoned Shop');
    await registerWebhook(t, m.apiKey, receiver.url('/old'));
    receiver.alwaysFail('/old', 500);
    // Retrying: failed twice, its next attempt booked an hour on.
    const retrying = await emitEvent(t, m.merchantId);
    await waitFor(async () => {
      const row = await delivery(t, retrying.deliveryId);
      return row.status === 'retrying' && row.attempts === 2 && row.lease_until === null;
    }, 'the delivery to be retrying');
    // Being sent: the endpoint holds its first attempt while the merchant removes the URL.
    const release = receiver.holdNext('/old');
    const inFlight = await emitEvent(t, m.merchantId);
    await waitFor(async () => receiver.on('/old').length === 3, 'the held attempt');
    const before = await scrapeMetrics(t);

    expect((await remove(m.apiKey)).status).toBe(200);
    expect(await delivery(t, retrying.deliveryId)).toMatchObject({ status: 'dead', attempts: 2, next_attempt_at: null, last_error: 'no webhook URL registered' });
    release(500);
    await waitFor(async () => {
      const row = await delivery(t, inFlight.deliveryId);
      return row.status === 'dead' && row.lease_until === null;
    }, 'the delivery being sent to be dead');
    expect(await delivery(t, inFlight.deliveryId)).toMatchObject({ attempts: 1, next_attempt_at: null, last_response_status: null, last_error: 'no webhook URL registered' });
    // Its one attempt, the one that was under way; none after it.
    expect(await attemptsOf(t, inFlight.deliveryId)).toEqual([expect.objectContaining({ attempt_number: 1, trigger: 'scheduled', response_status: 500 })]);
    expect(receiver.on('/old')).toHaveLength(3);
    expect(dead(await scrapeMetrics(t)) - dead(before)).toBe(0);

    // A manual retry answers as before (200, a failed attempt, status kept) and sends nothing.
    const retried = await t.http.post(`/v1/webhooks/logs/${retrying.deliveryId}/retry`).set('X-API-Key', m.apiKey).expect(200);
    expect(retried.body.data).toMatchObject({ status: 'dead', last_error: 'no webhook URL registered' });
    expect(receiver.on('/old')).toHaveLength(3);

    const secret = await registerWebhook(t, m.apiKey, receiver.url('/new'));
    const recovered = await t.http.post('/v1/webhooks/recover').set('X-API-Key', m.apiKey).send({ since: new Date(Date.now() - 3_600_000).toISOString() }).expect(200);
    expect(recovered.body.data.queued).toBe(2);
    for (const id of [retrying.deliveryId, inFlight.deliveryId]) {
      await waitFor(async () => (await delivery(t, id)).status === 'delivered', `delivery ${id} recovered`);
    }
    const sent = receiver.on('/new');
    expect(sent.map((r) => r.headers['webhook-id']).sort()).toEqual([retrying.deliveryId, inFlight.deliveryId].sort());
    for (const req of sent) expect(verifyWebhook(req.body, req.headers, secret).type).toBe('payment.completed');
    expect(receiver.on('/old')).toHaveLength(3);
    expect(dead(await scrapeMetrics(t)) - dead(before)).toBe(0);
  });
});

describe('POST /v1/webhooks/recover with no webhook URL registered', () => {
  const recover = (key: string) =>
    t.http.post('/v1/webhooks/recover').set('X-API-Key', key).send({ since: new Date(Date.now() - 3_600_000).toISOString() });
  const NO_URL = 'No webhook URL is registered: register one with PUT /v1/merchant/webhook first';

  /** A merchant with a URL and a delivery that failed twice (retrying, its next attempt an hour on). */
  async function withRetryingDelivery(name: string, path: string) {
    const m = await t.createMerchant(name);
    await registerWebhook(t, m.apiKey, receiver.url(path));
    receiver.alwaysFail(path, 500);
    const { deliveryId } = await emitEvent(t, m.merchantId);
    await waitFor(async () => {
      const row = await delivery(t, deliveryId);
      return row.status === 'retrying' && row.attempts === 2 && row.lease_until === null;
    }, 'the delivery to be retrying');
    return { ...m, deliveryId };
  }

  /** 409 in the envelope, and the delivery dead as the removal left it: not queued, no attempt, nothing sent. */
  async function expectRefused(res: { status: number; body: Record<string, unknown> }, m: { deliveryId: string }, path: string) {
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ success: false, error: { code: 'CONFLICT', message: NO_URL, request_id: expect.any(String) } });
    // Long enough for a worker to take a delivery queued again (it would be ended at once, unsent).
    await new Promise((r) => setTimeout(r, 300));
    expect(await delivery(t, m.deliveryId)).toMatchObject({ status: 'dead', attempts: 2, last_error: 'no webhook URL registered' });
    expect(await attemptsOf(t, m.deliveryId)).toHaveLength(2);
    expect(receiver.on(path)).toHaveLength(2);
  }

  it('is 409 CONFLICT, as a test event is, and leaves the deliveries the removal ended dead (was 200 queued 1, ended again unsent)', async () => {
    const m = await withRetryingDelivery('Recover Unregistered Shop', '/recover-unregistered');
    expect((await remove(m.apiKey)).status).toBe(200);
    expect((await delivery(t, m.deliveryId)).status).toBe('dead');
    await expectRefused(await recover(m.apiKey), m, '/recover-unregistered');
  });

  it('is 409 when the URL is removed while the call waits on it: the registration is judged with the deliveries it queues, not before', async () => {
    const m = await withRetryingDelivery('Recover Racing Removal Shop', '/recover-racing');
    // The delivery dead (schedule not used up) while the URL is still registered: recover would send it.
    await t.sql(`UPDATE webhook_deliveries SET status = 'dead', next_attempt_at = NULL, last_error = 'no webhook URL registered' WHERE id = $1`, [m.deliveryId]);
    // A removal under way (DELETE /v1/merchant/webhook's first statement, not yet committed) when recover runs.
    const removal = new pg.Client({ connectionString: t.databaseUrl });
    await removal.connect();
    try {
      await removal.query('BEGIN');
      await removal.query('UPDATE merchants SET webhook_url = NULL, webhook_secret_enc = NULL, updated_at = now() WHERE id = $1', [m.merchantId]);
      const answer = recover(m.apiKey).then((res) => res);
      await new Promise((r) => setTimeout(r, 300));
      await removal.query('COMMIT');
      await expectRefused(await answer, m, '/recover-racing');
    } finally {
      await removal.end();
    }
  });
});

describe('DELETE /v1/merchant/webhook during an attempt, with a retry an hour away', () => {
  // Its first retry an hour on: an attempt in flight at the removal that is retried instead of ended stays
  // `retrying` for that hour (the logs, the retrying gauge, a URL registered meanwhile getting it unasked).
  let hourly: TestService;
  beforeAll(async () => {
    hourly = await startTestService({ WEBHOOK_RETRY_SCHEDULE: '1h' });
  });
  afterAll(async () => {
    await hourly.stop();
  });

  const removeFrom = (key: string) => hourly.http.delete('/v1/merchant/webhook').set('X-API-Key', key);

  it('a failure of the attempt being sent ends it dead at once (not retried), with the removal\'s reason, not counted dead', async () => {
    const m = await hourly.createMerchant('Hourly Abandoned Shop');
    await registerWebhook(hourly, m.apiKey, receiver.url('/hourly-failed'));
    const release = receiver.holdNext('/hourly-failed');
    const inFlight = await emitEvent(hourly, m.merchantId);
    await waitFor(async () => receiver.on('/hourly-failed').length === 1, 'the held attempt');
    const before = await scrapeMetrics(hourly);

    expect((await removeFrom(m.apiKey)).status).toBe(200);
    release(500);
    const row = await waitFor(async () => {
      const r = await delivery(hourly, inFlight.deliveryId);
      return r.lease_until === null && r.attempts === 1 ? r : null;
    }, 'the attempt to be recorded');
    expect(row).toMatchObject({ status: 'dead', attempts: 1, next_attempt_at: null, last_response_status: null, last_error: 'no webhook URL registered' });
    // The attempt itself is in its history as it went.
    expect(await attemptsOf(hourly, inFlight.deliveryId)).toEqual([expect.objectContaining({ attempt_number: 1, trigger: 'scheduled', response_status: 500 })]);

    const logs = await hourly.http.get('/v1/webhooks/logs').set('X-API-Key', m.apiKey).expect(200);
    expect(logs.body.data).toEqual([expect.objectContaining({ id: inFlight.deliveryId, status: 'dead', next_attempt_at: null, last_error: 'no webhook URL registered' })]);
    expect(dead(await scrapeMetrics(hourly)) - dead(before)).toBe(0);
    expect(receiver.on('/hourly-failed')).toHaveLength(1);
  });

  it('a success of the attempt being sent stays delivered', async () => {
    const m = await hourly.createMerchant('Hourly Delivered Shop');
    await registerWebhook(hourly, m.apiKey, receiver.url('/hourly-ok'));
    const release = receiver.holdNext('/hourly-ok');
    const inFlight = await emitEvent(hourly, m.merchantId);
    await waitFor(async () => receiver.on('/hourly-ok').length === 1, 'the held attempt');

    expect((await removeFrom(m.apiKey)).status).toBe(200);
    release(200);
    await waitFor(async () => (await delivery(hourly, inFlight.deliveryId)).lease_until === null, 'the attempt to be recorded');
    expect(await delivery(hourly, inFlight.deliveryId)).toMatchObject({ status: 'delivered', attempts: 1, last_response_status: 200, last_error: null });
  });
});
