import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from '../../server/config/config.js';
import { createLogger } from '../../server/observability/logger.js';
import { startService, type RunningService } from '../../server/service.js';
import { TEST_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

let t: TestService;
let secondWorker: RunningService;

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1s' });
  // A second worker process on the same database (its own Agenda, its own pools).
  const config = loadConfig({
    NODE_ENV: 'test', ROLE: 'worker', WORKER_PORT: '0', DATABASE_URL: t.databaseUrl, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, LOG_LEVEL: 'silent',
    PUBLIC_BASE_URL: t.baseUrl, MOBILEMONEY_RECONCILE_INTERVAL: '1s', SANDBOX_CALLBACK_DELAY_MS: '50',
  });
  secondWorker = await startService(config, { logger: createLogger('silent'), agendaProcessEveryMs: 200, agendaLockLifetimeMs: 5000 });
});
afterAll(async () => {
  await secondWorker.stop();
  await t.stop();
});

describe('automatic mobile-money reconciliation', () => {
  it('is one job per merchant however many workers and stores, and it recovers a silent payment', async () => {
    const m = await t.createMerchant('Auto Reconciled');
    const creds = { env: 'sandbox', consumer_key: 'auto-key', consumer_secret: 's', passkey: 'p', shortcode: '888001' };
    for (let i = 0; i < 3; i += 1) {
      await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'mobilemoney', mobilemoney: creds }).expect(200);
    }
    const jobs = await t.sql(`SELECT id FROM agenda_jobs WHERE name = 'mobilemoney.reconcile' AND data->>'merchantId' = $1`, [m.merchantId]);
    expect(jobs).toHaveLength(1);

    const silent = await t.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `auto-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '150', currency: 'KES', phone: '254700000003' });
    expect(silent.body.data.status).toBe('pending');
    await eventually(async () => {
      const rows = await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [silent.body.data.id]);
      return rows[0]!.status === 'completed';
    }, 20_000, 'the automatic job to settle the silent payment');
    const transitions = await t.sql(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed'`, [silent.body.data.id]);
    expect(transitions).toEqual([{ trigger: 'reconciliation' }]);

    await t.http.delete('/v1/merchant/credentials/mobilemoney').set('X-API-Key', m.apiKey).expect(200);
    expect(await t.sql(`SELECT id FROM agenda_jobs WHERE name = 'mobilemoney.reconcile' AND data->>'merchantId' = $1`, [m.merchantId])).toHaveLength(0);
  });
});
