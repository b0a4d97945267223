import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

/**
 * GET /v1/events and /v1/events/{id}: the outbox's events as their delivered bodies, per merchant,
 * within EVENT_RETENTION; the prune job deletes older ones with their delivered deliveries.
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

  it('filters by since (inclusive) and until (exclusive)', async () => {
    const [row] = await t.sql<{ created_at: Date }>('SELECT created_at FROM events WHERE id = $1', [ids.refunded]);
    const at = row!.created_at.toISOString();
    const since = await list(a.apiKey, `?since=${encodeURIComponent(at)}`);
    expect(since.body.data.map((e: { id: string }) => e.id)).toEqual([ids.failed, ids.refunded]);
    const until = await list(a.apiKey, `?until=${encodeURIComponent(at)}`);
    expect(until.body.data.map((e: { id: string }) => e.id)).toEqual([ids.completed]);
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
});
