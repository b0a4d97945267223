import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
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
