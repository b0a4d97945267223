import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DeliveryService } from '../../server/domain/delivery/delivery.service.js';
import type { DeliveryQueue } from '../../server/domain/ports.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';
import { registerWebhook } from './events.js';

// POST /v1/webhooks/recover over a window with more failed deliveries than one batch. This service
// serves the API only (no worker), so what recover queued stays pending for the test to count.

let t: TestService;

beforeAll(async () => {
  t = await startTestService({ ROLE: 'api' });
});
afterAll(async () => {
  await t.stop();
});

describe('recover over many failed deliveries', () => {
  it('queues every one of them, counted right, and a second call queues none', async () => {
    const m = await t.createMerchant('Long outage');
    await registerWebhook(t, m.apiKey, 'http://127.0.0.1:9/hooks');
    const failed = 2345;
    await t.sql(
      `WITH e AS (
         INSERT INTO events (id, merchant_id, type, payload, body, created_at)
         SELECT gen_random_uuid(), $1, 'payment.failed', '{}'::jsonb, '{}', now() - interval '1 hour'
           FROM generate_series(1, $2)
         RETURNING id)
       INSERT INTO webhook_deliveries (id, event_id, merchant_id, event_type, url, status, attempts, created_at)
       SELECT gen_random_uuid(), e.id, $1, 'payment.failed', 'http://127.0.0.1:9/hooks', 'dead', 6, now() - interval '1 hour' FROM e`,
      [m.merchantId, failed],
    );

    const since = new Date(Date.now() - 2 * 3_600_000).toISOString();
    const first = await t.http.post('/v1/webhooks/recover').set('X-API-Key', m.apiKey).send({ since });
    expect(first.status).toBe(200);
    expect(first.body.data.queued).toBe(failed);
    const statuses = await t.sql<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM webhook_deliveries WHERE merchant_id = $1 GROUP BY status',
      [m.merchantId],
    );
    expect(statuses).toEqual([{ status: 'pending', n: failed }]);

    const second = await t.http.post('/v1/webhooks/recover').set('X-API-Key', m.apiKey).send({ since });
    expect(second.body.data.queued).toBe(0);
  });
});

// The same, with a worker sending what recover queued while recover is still going: the deliveries of
// its first batch go out and fail again (retrying, next try in an hour) before the next batch is taken.
describe('recover while the worker retries what it queued', () => {
  let w: TestService;
  beforeAll(async () => {
    w = await startTestService({ WEBHOOK_RETRY_SCHEDULE: '1h,1h,1h,1h,1h', WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: '32' });
  });
  afterAll(async () => {
    await w.stop();
  });

  it('queues each failed delivery once, not again after it failed again during the same call', async () => {
    const m = await w.createMerchant('Still refusing');
    await registerWebhook(w, m.apiKey, 'http://127.0.0.1:9/hooks');
    const failed = 1500; // one full batch of 1000 and part of a second
    await w.sql(
      `WITH e AS (
         INSERT INTO events (id, merchant_id, type, payload, body, created_at)
         SELECT gen_random_uuid(), $1, 'payment.failed', '{}'::jsonb, '{}', now() - interval '1 hour'
           FROM generate_series(1, $2)
         RETURNING id)
       INSERT INTO webhook_deliveries (id, event_id, merchant_id, event_type, url, status, attempts, next_attempt_at, created_at, updated_at)
       SELECT gen_random_uuid(), e.id, $1, 'payment.failed', 'http://127.0.0.1:9/hooks', 'retrying', 1, now() + interval '1 hour',
              now() - interval '1 hour', now() - interval '1 hour' FROM e`,
      [m.merchantId, failed],
    );
    const attempted = async () =>
      (await w.sql<{ n: number }>(
        'SELECT count(*)::int AS n FROM delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.merchant_id = $1',
        [m.merchantId],
      ))[0]!.n;

    // The service's own recover, over the real queue; after the first batch it lets the woken worker
    // try (and fail) every delivery of that batch before the next is taken — what a slow recover over
    // a large window meets anyway, made certain.
    const { container } = w.service;
    let batches = 0;
    const queue: DeliveryQueue = {
      async enqueue(count) {
        await container.deliveryQueue.enqueue(count);
        batches += 1;
        // 1,000 attempts: 13 s alone, more than 60 s on a loaded CI host (twice on 2026-11-27).
        if (batches === 1) await eventually(async () => (await attempted()) >= count || null, 150_000, 'the first batch attempted');
      },
    };
    const deliveries = new DeliveryService(
      container.orm.em,
      container.services.merchants,
      {
        retryScheduleMs: container.config.webhookRetryScheduleMs,
        timeoutMs: container.config.webhookTimeoutMs,
        allowPrivateUrls: container.config.webhookAllowPrivateUrls,
        maxInFlightPerMerchant: container.config.webhookMaxInFlightPerMerchant,
      },
      queue,
      container.logger,
      container.metrics.webhookDeliveryAttempts,
      container.metrics.webhookSecretUnreadable,
      container.merchantHosts,
    );
    const since = new Date(Date.now() - 2 * 3_600_000).toISOString();
    const result = await w.inContext(() => deliveries.recover(m.merchantId, since));
    expect(batches).toBeGreaterThan(1);
    expect(result.queued).toBe(failed);

    // Each of them is tried once more, and only once: none is left queued, and none was tried twice.
    await eventually(async () => (await attempted()) >= failed || null, 150_000, 'every recovered delivery attempted');
    const tries = await w.sql<{ once: number; more: number; retrying: number }>(
      `SELECT count(*) FILTER (WHERE k = 1)::int AS once, count(*) FILTER (WHERE k > 1)::int AS more,
              (SELECT count(*)::int FROM webhook_deliveries WHERE merchant_id = $1 AND status = 'retrying') AS retrying
         FROM (SELECT a.delivery_id, count(*) AS k FROM delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
                WHERE d.merchant_id = $1 GROUP BY a.delivery_id) x`,
      [m.merchantId],
    );
    expect(tries).toEqual([{ once: failed, more: 0, retrying: failed }]);
    // 2,500 attempts in all: seconds on a quiet machine, far longer on a loaded CI host.
  }, 360_000);
});
