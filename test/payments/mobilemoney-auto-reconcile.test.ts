import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from '../../server/config/config.js';
import { createLogger } from '../../server/observability/logger.js';
import { startService, type RunningService } from '../../server/service.js';
import { TEST_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { runJobOnce } from '../support/job-run.js';
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

describe('automatic reconciliation after a gap in its schedule', () => {
  let s: TestService;
  // Runs only when the test asks (runJobOnce): the schedule's own runs would race the backdating below.
  beforeAll(async () => { s = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h' }); });
  afterAll(async () => { await s.stop(); });

  it('pulls from 2 hours before the last successful pull ended, so a payment paid during 3 hours without a pull is settled', async () => {
    const m = await s.createMerchant('Reconciled After A Gap');
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'gap-key', consumer_secret: 's', passkey: 'p', shortcode: '888002' } }).expect(200);
    const silent = await s.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `gap-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '150', currency: 'KES', phone: '254700000003' }).expect(201);
    const reference = silent.body.data.reference as string;
    await eventually(async () => (await s.sql('SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE account_reference = $1 AND completes_at <= now()', [reference])).length === 1,
      10_000, 'the customer to pay at the operator');
    // The customer paid 3 hours ago, and the workers were down from before then until now: the last
    // successful automatic pull ended 3 h 10 min ago.
    await s.sql(`UPDATE sandbox_mobilemoney_stk_requests SET completes_at = now() - interval '3 hours' WHERE account_reference = $1`, [reference]);
    await s.sql(`INSERT INTO reconcile_cursors (merchant_id, provider, pulled_until) VALUES ($1, 'mobilemoney', now() - interval '3 hours 10 minutes')`, [m.merchantId]);

    await runJobOnce(s, 'mobilemoney.reconcile', { merchantId: m.merchantId });

    const [payment] = await s.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [silent.body.data.id]);
    expect(payment!.status).toBe('completed');
    expect(await s.sql(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed'`, [silent.body.data.id])).toEqual([{ trigger: 'reconciliation' }]);
    // The next run starts from this one's end.
    const [cursor] = await s.sql<{ recent: boolean }>(`SELECT pulled_until > now() - interval '1 minute' AS recent FROM reconcile_cursors WHERE merchant_id = $1`, [m.merchantId]);
    expect(cursor!.recent).toBe(true);
  }, 60_000);
});
