import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPaymentsClient, PaymentsApiError } from '../../client/index.js';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

let t: TestService;
let receiver: WebhookReceiver;
let a: { merchantId: string; apiKey: string };
let b: { merchantId: string; apiKey: string };
const p1 = randomUUID();
const p2 = randomUUID();
/** Merchant A's deliveries by role, with the status each is put in. */
const ids: Record<string, string> = {};

const FIELDS = [
  'attempts', 'created_at', 'delivered_at', 'event_id', 'event_type', 'id', 'last_error', 'last_response_status',
  'next_attempt_at', 'payment_id', 'status', 'url',
];

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService();
  a = await t.createMerchant('Logs A');
  b = await t.createMerchant('Logs B');
  await registerWebhook(t, a.apiKey, receiver.url('/a'));
  await registerWebhook(t, b.apiKey, receiver.url('/b'));
  // Rows written by the outbox and never enqueued, then put in each status; the pending and retrying
  // ones are due tomorrow so neither a job nor the sweeper moves them during the test.
  const plan: [string, 'payment.completed' | 'payment.failed' | 'payment.refunded', string, string][] = [
    ['completedDelivered', 'payment.completed', p1, 'delivered'],
    ['completedDead', 'payment.completed', p1, 'dead'],
    ['completedRetrying', 'payment.completed', p1, 'retrying'],
    ['failedDelivered', 'payment.failed', p2, 'delivered'],
    ['failedPending', 'payment.failed', p2, 'pending'],
    ['refundedDelivered', 'payment.refunded', p1, 'delivered'],
  ];
  for (const [name, type, paymentId, status] of plan) {
    const { deliveryId } = await emitEvent(t, a.merchantId, {
      type,
      paymentId,
      notify: false,
      // In the commit that makes it: a delivery committed due now may be claimed at once.
      adjust: (tx, created) =>
        tx.execute(
          `UPDATE webhook_deliveries d SET status = v.status,
             next_attempt_at = CASE WHEN v.status IN ('pending', 'retrying') THEN now() + interval '1 day' END,
             delivered_at = CASE WHEN v.status = 'delivered' THEN now() END,
             attempts = CASE WHEN v.status = 'pending' THEN 0 ELSE 1 END,
             last_response_status = CASE WHEN v.status = 'delivered' THEN 200 WHEN v.status = 'pending' THEN NULL ELSE 500 END
             FROM (SELECT ?::text AS status) v WHERE d.id = ?`,
          [status, created.deliveryId],
        ),
    });
    ids[name] = deliveryId;
  }
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

const list = (key: string, query = '') => t.http.get(`/v1/webhooks/logs${query}`).set('X-API-Key', key);

describe('GET /v1/webhooks/logs', () => {
  it("lists the merchant's deliveries newest first with every record field", async () => {
    const res = await list(a.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.meta).toEqual({ page: 1, page_size: 50, total: 6 });
    const expectedOrder = await t.sql<{ id: string }>(
      'SELECT id FROM webhook_deliveries WHERE merchant_id = $1 ORDER BY created_at DESC, id DESC',
      [a.merchantId],
    );
    expect(res.body.data.map((d: { id: string }) => d.id)).toEqual(expectedOrder.map((r) => r.id));

    const record = res.body.data.find((d: { id: string }) => d.id === ids.completedRetrying);
    expect(Object.keys(record).sort()).toEqual(FIELDS);
    const [event] = await t.sql<{ event_id: string }>('SELECT event_id FROM webhook_deliveries WHERE id = $1', [ids.completedRetrying]);
    expect(record).toEqual({
      id: ids.completedRetrying,
      event_id: event!.event_id,
      event_type: 'payment.completed',
      payment_id: p1,
      url: receiver.url('/a'),
      status: 'retrying',
      attempts: 1,
      last_response_status: 500,
      last_error: null,
      next_attempt_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      delivered_at: null,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
  });

  it.each([
    ['?status=delivered', ['completedDelivered', 'failedDelivered', 'refundedDelivered']],
    ['?status=dead', ['completedDead']],
    ['?status=pending', ['failedPending']],
    ['?event_type=payment.failed', ['failedDelivered', 'failedPending']],
    [`?payment_id=${p1}`, ['completedDelivered', 'completedDead', 'completedRetrying', 'refundedDelivered']],
    [`?status=delivered&payment_id=${p1}`, ['completedDelivered', 'refundedDelivered']],
    [`?status=delivered&event_type=payment.failed&payment_id=${p2}`, ['failedDelivered']],
    [`?status=dead&payment_id=${p2}`, []],
    [`?payment_id=${randomUUID()}`, []],
  ])('filters %s', async (query, expected) => {
    const res = await list(a.apiKey, query);
    expect(res.status).toBe(200);
    expect(res.body.data.map((d: { id: string }) => d.id).sort()).toEqual(expected.map((name) => ids[name]).sort());
    expect(res.body.meta.total).toBe(expected.length);
  });

  it('paginates with page and page_size', async () => {
    const first = await list(a.apiKey, '?page_size=4');
    const second = await list(a.apiKey, '?page_size=4&page=2');
    const third = await list(a.apiKey, '?page_size=4&page=3');
    expect(first.body.meta).toEqual({ page: 1, page_size: 4, total: 6 });
    expect(second.body.meta).toEqual({ page: 2, page_size: 4, total: 6 });
    expect(first.body.data).toHaveLength(4);
    expect(second.body.data).toHaveLength(2);
    expect(third.body).toEqual({ success: true, data: [], meta: { page: 3, page_size: 4, total: 6 } });
    const all = (await list(a.apiKey)).body.data.map((d: { id: string }) => d.id);
    expect([...first.body.data, ...second.body.data].map((d: { id: string }) => d.id)).toEqual(all);
    expect((await list(a.apiKey, '?page_size=100')).status).toBe(200);
  });

  it.each([
    ['?page_size=101', 'page_size'],
    ['?page_size=0', 'page_size'],
    ['?page=0', 'page'],
    ['?page=abc', 'page'],
    ['?status=bogus', 'status'],
    ['?event_type=payment.bogus', 'event_type'],
    ['?payment_id=not-a-uuid', 'payment_id'],
    ['?colour=blue', 'colour'],
  ])('rejects %s with 422 naming the field', async (query, field) => {
    const res = await list(a.apiKey, query);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
  });

  it("shows a merchant none of another merchant's deliveries", async () => {
    const res = await list(b.apiKey);
    expect(res.body).toEqual({ success: true, data: [], meta: { page: 1, page_size: 50, total: 0 } });
    expect((await t.http.get(`/v1/webhooks/logs/${ids.completedDead}`).set('X-API-Key', b.apiKey)).status).toBe(404);
  });

  it('needs the webhooks:read scope', async () => {
    const { apiKey } = await t.issueKey(a.merchantId, ['payments:read']);
    const res = await list(apiKey);
    expect(res.status).toBe(403);
    expect(res.body.error.message).toContain('webhooks:read');
  });
});

describe('GET /v1/webhooks/logs/{id}', () => {
  it('returns the delivery with its attempt history', async () => {
    const res = await t.http.get(`/v1/webhooks/logs/${ids.completedDelivered}`).set('X-API-Key', a.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: ids.completedDelivered, status: 'delivered', attempt_history: [] });
    expect((await t.http.get('/v1/webhooks/logs/not-a-uuid').set('X-API-Key', a.apiKey)).status).toBe(404);
    expect((await t.http.get(`/v1/webhooks/logs/${randomUUID()}`).set('X-API-Key', a.apiKey)).status).toBe(404);
  });
});

describe('POST /v1/webhooks/logs/{id}/retry', () => {
  const retry = (key: string, id: string) => t.http.post(`/v1/webhooks/logs/${id}/retry`).set('X-API-Key', key);

  it('404s for an unknown, malformed or other merchant\'s id, and sends nothing', async () => {
    for (const id of [randomUUID(), 'not-a-uuid']) {
      const res = await retry(a.apiKey, id);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('NOT_FOUND');
    }
    const res = await retry(b.apiKey, ids.completedDead!);
    expect(res.status).toBe(404);
    expect(receiver.requests).toHaveLength(0);
    expect((await delivery(t, ids.completedDead!)).attempts).toBe(1);
  });

  it('409s for a delivered or pending delivery', async () => {
    for (const id of [ids.completedDelivered!, ids.failedPending!]) {
      const res = await retry(a.apiKey, id);
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('CONFLICT');
    }
    expect(receiver.requests).toHaveLength(0);
  });

  it('needs the webhooks:write scope', async () => {
    const { apiKey } = await t.issueKey(a.merchantId, ['webhooks:read']);
    const res = await retry(apiKey, ids.completedDead!);
    expect(res.status).toBe(403);
    expect(res.body.error.message).toContain('webhooks:write');
  });

  it('re-sends a retrying delivery now; a failure keeps its schedule, a success delivers it', async () => {
    const before = await delivery(t, ids.completedRetrying!);
    receiver.failNext('/a', 1, 502);
    const failed = await retry(a.apiKey, ids.completedRetrying!);
    expect(failed.status).toBe(200);
    expect(failed.body.data).toMatchObject({
      id: ids.completedRetrying, status: 'retrying', attempts: 2, last_response_status: 502, last_error: 'HTTP 502',
      next_attempt_at: before.next_attempt_at!.toISOString(),
    });

    const ok = await retry(a.apiKey, ids.completedRetrying!);
    expect(ok.body.data).toMatchObject({ status: 'delivered', attempts: 3, last_response_status: 200, next_attempt_at: null });
    expect((await attemptsOf(t, ids.completedRetrying!)).map((x) => [x.attempt_number, x.trigger, x.response_status])).toEqual([
      [2, 'manual', 502],
      [3, 'manual', 200],
    ]);
    const sent = receiver.on('/a');
    expect(sent).toHaveLength(2);
    expect(sent.map((r) => r.headers['x-webhook-id'])).toEqual([ids.completedRetrying, ids.completedRetrying]);

    const detail = await t.http.get(`/v1/webhooks/logs/${ids.completedRetrying}`).set('X-API-Key', a.apiKey);
    expect(detail.body.data.attempt_history).toEqual([
      { attempt_number: 2, trigger: 'manual', response_status: 502, error: 'HTTP 502', duration_ms: expect.any(Number), created_at: expect.any(String) },
      { attempt_number: 3, trigger: 'manual', response_status: 200, error: null, duration_ms: expect.any(Number), created_at: expect.any(String) },
    ]);
  });

  it('409s with Retry-After while the delivery is being sent (another attempt holds it): the passing conflict, PaymentsApiError.inProgress', async () => {
    // Without Retry-After the SDK's inProgress was false: a merchant's code checking it gave up on the delivery for good.
    const c = await t.createMerchant('Logs C');
    await registerWebhook(t, c.apiKey, receiver.url('/c'));
    const { deliveryId } = await emitEvent(t, c.merchantId, {
      notify: false,
      adjust: (tx, created) => tx.execute(`UPDATE webhook_deliveries SET status = 'dead', next_attempt_at = NULL, attempts = 6, last_response_status = 500 WHERE id = ?`, [created.deliveryId]),
    });
    // A first retry holds the delivery's lease while the endpoint takes its time.
    const release = receiver.holdNext('/c');
    const first = retry(c.apiKey, deliveryId).then((res) => res); // then: sent now, awaited below
    await waitFor(async () => receiver.on('/c').length === 1, 'the first retry to reach the endpoint');

    const raw = await retry(c.apiKey, deliveryId);
    expect([raw.status, raw.body.error?.code, raw.body.error?.message, raw.headers['retry-after']])
      .toEqual([409, 'CONFLICT', 'The delivery is being sent right now; try again shortly', '1']);
    const sdk = createPaymentsClient({ baseUrl: t.baseUrl, apiKey: c.apiKey });
    const error = await sdk.webhookLogs.retry(deliveryId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsApiError);
    expect(error).toMatchObject({ status: 409, code: 'CONFLICT', inProgress: true, mayHaveSucceeded: false });
    // Neither refused retry was sent.
    expect(receiver.on('/c')).toHaveLength(1);

    release(200);
    expect((await first).body.data).toMatchObject({ id: deliveryId, status: 'delivered', attempts: 7 });
    // The final 409 (a delivered delivery) still comes without Retry-After.
    const done = await retry(c.apiKey, deliveryId);
    expect([done.status, done.headers['retry-after']]).toEqual([409, undefined]);
    await expect(sdk.webhookLogs.retry(deliveryId)).rejects.toMatchObject({ status: 409, inProgress: false });
  });
});
