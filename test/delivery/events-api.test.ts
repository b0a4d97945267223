import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

/**
 * GET /v1/events and /v1/events/{id}: the outbox's events as their delivered bodies, per merchant,
 * within EVENT_RETENTION; the prune job deletes older ones with their deliveries, unless one can still go out.
 */

let t: TestService;
let receiver: WebhookReceiver;
let a: { merchantId: string; apiKey: string };
let b: { merchantId: string; apiKey: string };
const p1 = randomUUID();
const p2 = randomUUID();
const ids: Record<string, string> = {};

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  // Retention of one day, pruned twice a second: events are aged by moving created_at back.
  t = await startTestService({ EVENT_RETENTION: '1d', EVENT_PRUNE_INTERVAL: '500ms' });
  a = await t.createMerchant('Events A');
  b = await t.createMerchant('Events B');
  await registerWebhook(t, a.apiKey, receiver.url('/a'));
  ids.completed = (await emitEvent(t, a.merchantId, { type: 'payment.completed', paymentId: p1 })).eventId;
  ids.refunded = (await emitEvent(t, a.merchantId, { type: 'payment.refunded', paymentId: p1 })).eventId;
  ids.failed = (await emitEvent(t, a.merchantId, { type: 'payment.failed', paymentId: p2 })).eventId;
  ids.other = (await emitEvent(t, b.merchantId, { type: 'payment.completed', paymentId: randomUUID() }).catch(async () => {
    // B has no webhook URL: the outbox records the event without a delivery.
    const [row] = await t.sql<{ id: string }>('SELECT id FROM events WHERE merchant_id = $1', [b.merchantId]);
    return { eventId: row!.id };
  })).eventId;
  await waitFor(async () => receiver.on('/a').length === 3, 'the three deliveries');
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

const list = (key: string, query = '') => t.http.get(`/v1/events${query}`).set('X-API-Key', key);

describe('GET /v1/events', () => {
  it("lists the merchant's events newest first, each exactly the body that was delivered", async () => {
    const res = await list(a.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.meta).toEqual({ page: 1, page_size: 50, total: 3 });
    expect(res.body.data.map((e: { id: string }) => e.id)).toEqual([ids.failed, ids.refunded, ids.completed]);
    // Byte for byte: the JSON of each item is the body the receiver got.
    for (const item of res.body.data) {
      const delivered = receiver.on('/a').find((r) => JSON.parse(r.body).id === item.id);
      expect(JSON.stringify(item)).toBe(delivered!.body);
    }
    expect(res.body.data[0]).toEqual({
      id: ids.failed, type: 'payment.failed', created_at: expect.any(String),
      data: { payment_id: p2, amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'failed', previous_status: 'pending' },
    });
  });

  it('lists events recorded while no webhook URL was registered', async () => {
    const res = await list(b.apiKey);
    expect(res.body.data.map((e: { id: string }) => e.id)).toEqual([ids.other]);
  });

  it.each([
    ['?type=payment.refunded', ['refunded']],
    [`?payment_id=${p1}`, ['refunded', 'completed']],
    [`?payment_id=${p1}&type=payment.completed`, ['completed']],
    [`?payment_id=${randomUUID()}`, []],
    ['?type=webhook.test', []],
  ])('filters %s', async (query, expected) => {
    const res = await list(a.apiKey, query);
    expect(res.status).toBe(200);
    expect(res.body.data.map((e: { id: string }) => e.id)).toEqual(expected.map((k) => ids[k]));
    expect(res.body.meta.total).toBe(expected.length);
  });

  it('filters by since and until, both exclusive (created after since, before until)', async () => {
    // The refunded event's stamp to the microsecond, and a microsecond before it.
    const [row] = await t.sql<{ at: string; before: string }>(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at,
              to_char((created_at - interval '1 microsecond') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS before
         FROM events WHERE id = $1`,
      [ids.refunded],
    );
    const listed = async (query: string) => (await list(a.apiKey, query)).body.data.map((e: { id: string }) => e.id);
    expect(await listed(`?since=${encodeURIComponent(row!.at)}`)).toEqual([ids.failed]);
    expect(await listed(`?since=${encodeURIComponent(row!.before)}`)).toEqual([ids.failed, ids.refunded]);
    expect(await listed(`?until=${encodeURIComponent(row!.at)}`)).toEqual([ids.completed]);
  });

  it('pages with page and page_size', async () => {
    const first = await list(a.apiKey, '?page_size=2');
    const second = await list(a.apiKey, '?page_size=2&page=2');
    expect(first.body.meta).toEqual({ page: 1, page_size: 2, total: 3 });
    expect(second.body.meta).toEqual({ page: 2, page_size: 2, total: 3 });
    expect([...first.body.data, ...second.body.data].map((e: { id: string }) => e.id)).toEqual([ids.failed, ids.refunded, ids.completed]);
  });

  it.each([
    ['?type=payment.bogus', 'type'],
    ['?payment_id=nope', 'payment_id'],
    ['?since=yesterday', 'since'],
    ['?until=2026-13-01T00:00:00Z', 'until'],
    ['?since=2026-11-22T00:00:00Z&until=2026-11-21T00:00:00Z', 'since'],
    ['?page=0', 'page'],
    ['?page_size=101', 'page_size'],
    ['?colour=blue', 'colour'],
  ])('rejects %s with 422 naming the field, in the envelope', async (query, field) => {
    const res = await list(a.apiKey, query);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', request_id: expect.any(String) } });
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
  });

  it('needs the webhooks:read scope and an API key', async () => {
    const { apiKey } = await t.issueKey(a.merchantId, ['payments:read', 'webhooks:write']);
    const res = await list(apiKey);
    expect(res.status).toBe(403);
    expect(res.body.error.message).toContain('webhooks:read');
    expect((await t.http.get('/v1/events')).status).toBe(401);
  });
});

describe('GET /v1/events/{id}', () => {
  it('returns one event as delivered', async () => {
    const res = await t.http.get(`/v1/events/${ids.refunded}`).set('X-API-Key', a.apiKey);
    expect(res.status).toBe(200);
    const [row] = await t.sql<{ body: string }>('SELECT body FROM events WHERE id = $1', [ids.refunded]);
    expect(JSON.stringify(res.body.data)).toBe(row!.body);
  });

  it("answers 404 for another merchant's event, an unknown id and a malformed one", async () => {
    for (const [key, id] of [[b.apiKey, ids.completed], [a.apiKey, ids.other], [a.apiKey, randomUUID()], [a.apiKey, 'not-a-uuid']] as const) {
      const res = await t.http.get(`/v1/events/${id}`).set('X-API-Key', key);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
    }
  });
});

describe('retention', () => {
  it('hides events past EVENT_RETENTION and the prune job deletes them with their delivered deliveries', async () => {
    // An old delivered event, and an old one whose delivery is dead (kept for manual review).
    const old = await emitEvent(t, a.merchantId, {
      type: 'payment.completed',
      notify: false,
      adjust: (tx, ids) => tx.execute(`UPDATE webhook_deliveries SET status = 'delivered', next_attempt_at = NULL, delivered_at = now() WHERE id = ?`, [ids.deliveryId]),
    });
    const oldDead = await emitEvent(t, a.merchantId, {
      type: 'payment.failed',
      notify: false,
      adjust: (tx, ids) => tx.execute(`UPDATE webhook_deliveries SET status = 'dead', next_attempt_at = NULL WHERE id = ?`, [ids.deliveryId]),
    });
    await t.sql(`UPDATE events SET created_at = now() - interval '25 hours' WHERE id = ANY($1)`, [[old.eventId, oldDead.eventId]]);

    expect((await t.http.get(`/v1/events/${old.eventId}`).set('X-API-Key', a.apiKey)).status).toBe(404);
    expect((await list(a.apiKey)).body.meta.total).toBe(3);

    await waitFor(async () => (await t.sql('SELECT 1 FROM events WHERE id = $1', [old.eventId])).length === 0, 'the prune job');
    expect(await t.sql('SELECT 1 FROM webhook_deliveries WHERE id = $1', [old.deliveryId])).toHaveLength(0);
    expect(await t.sql('SELECT 1 FROM webhook_deliveries WHERE id = $1', [oldDead.deliveryId])).toHaveLength(1);
    // Recent events are untouched.
    expect(await t.sql('SELECT 1 FROM events WHERE id = ANY($1)', [[ids.completed, ids.refunded, ids.failed]])).toHaveLength(3);
  });

  it('deletes an old event whose delivery died past the recover window, and keeps one still being retried or still recoverable', async () => {
    const withDelivery = (status: 'dead' | 'retrying') => (tx: EntityManager, ids: { deliveryId: string }) =>
      tx.execute(
        status === 'dead'
          ? `UPDATE webhook_deliveries SET status = 'dead', attempts = 6, next_attempt_at = NULL WHERE id = ?`
          : `UPDATE webhook_deliveries SET status = 'retrying', attempts = 2, next_attempt_at = now() + interval '1 hour' WHERE id = ?`,
        [ids.deliveryId],
      );
    // 40 days old: its endpoint failed six times and nobody recovered it since.
    const abandoned = await emitEvent(t, a.merchantId, { type: 'payment.completed', notify: false, adjust: withDelivery('dead') });
    // 40 days old, with a retry still booked (a long retry schedule).
    const retrying = await emitEvent(t, a.merchantId, { type: 'payment.completed', notify: false, adjust: withDelivery('retrying') });
    // 3 days old, past this service's one-day retention: recover (7 days back) can still queue it.
    const recoverable = await emitEvent(t, a.merchantId, { type: 'payment.failed', notify: false, adjust: withDelivery('dead') });
    await t.sql(`UPDATE events SET created_at = now() - interval '40 days' WHERE id = ANY($1)`, [[abandoned.eventId, retrying.eventId]]);
    await t.sql(`UPDATE webhook_deliveries SET created_at = now() - interval '40 days' WHERE id = ANY($1)`, [[abandoned.deliveryId, retrying.deliveryId]]);
    await t.sql(`UPDATE events SET created_at = now() - interval '3 days' WHERE id = $1`, [recoverable.eventId]);
    await t.sql(`UPDATE webhook_deliveries SET created_at = now() - interval '3 days' WHERE id = $1`, [recoverable.deliveryId]);

    // The payment's details go with the event: the body and the delivery (and its attempts) are deleted.
    await waitFor(async () => (await t.sql('SELECT 1 FROM events WHERE id = $1', [abandoned.eventId])).length === 0, 'the prune job', 5_000);
    expect(await t.sql('SELECT 1 FROM webhook_deliveries WHERE id = $1', [abandoned.deliveryId])).toHaveLength(0);
    expect((await t.http.get(`/v1/webhooks/logs/${abandoned.deliveryId}`).set('X-API-Key', a.apiKey)).status).toBe(404);
    // Looked at in that same pass (one batch), and kept.
    expect(await t.sql('SELECT 1 FROM events WHERE id = ANY($1)', [[retrying.eventId, recoverable.eventId]])).toHaveLength(2);
    const logs = await t.http.get('/v1/webhooks/logs').query({ status: 'dead' }).set('X-API-Key', a.apiKey);
    expect(logs.body.data.map((d: { id: string }) => d.id)).toContain(recoverable.deliveryId);
  });

  it('deletes every old event over several batches, past the ones it keeps', async () => {
    const c = await t.createMerchant('Events C');
    // 2,500 old events with nothing left to send (over two batches of 1,000), and among them, by age,
    // one whose delivery is still being retried.
    // One statement: the prune job runs every second and would take the kept one before its delivery existed.
    const [kept] = await t.sql<{ id: string }>(
      `WITH old AS (
         INSERT INTO events (id, merchant_id, type, payload, body, created_at)
         SELECT gen_random_uuid(), $1, 'payment.completed', '{}'::jsonb, '{}', now() - interval '40 days' - i * interval '1 second'
           FROM generate_series(1, 2500) i
         RETURNING id, created_at),
       pick AS (SELECT id FROM old ORDER BY created_at, id OFFSET 500 LIMIT 1)
       INSERT INTO webhook_deliveries (id, event_id, merchant_id, event_type, url, status, attempts, next_attempt_at, created_at)
       SELECT gen_random_uuid(), pick.id, $1, 'payment.completed', 'http://127.0.0.1:9/hooks', 'retrying', 2, now() + interval '1 hour', now() - interval '40 days'
         FROM pick
       RETURNING event_id AS id`,
      [c.merchantId],
    );
    await waitFor(async () => (await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE merchant_id = $1', [c.merchantId]))[0]!.n === 1 || null, 'the prune job', 10_000);
    expect(await t.sql('SELECT id FROM events WHERE merchant_id = $1', [c.merchantId])).toEqual([{ id: kept!.id }]);
  });
});
