import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RATE_LIMIT_WINDOW_RETENTION_MS, PRUNE_RATE_LIMIT_WINDOWS_SQL } from '../../server/domain/auth/rate-limit-retention.js';
import { REQUEUE_BATCH_SQL } from '../../server/domain/delivery/delivery-store.js';
import { PRUNE_EVENTS_SQL } from '../../server/domain/events/event-log.js';
import { OPEN_CONFIRMATION_SQL } from '../../server/domain/inbound/confirmation-queries.js';
import { PRUNE_INBOX_SQL } from '../../server/domain/inbound/inbox-retention.js';
import { PRUNE_STATUS_QUERIES_SQL } from '../../server/domain/inbound/status-query-retention.js';
import { PRUNE_IDEMPOTENCY_KEYS_SQL } from '../../server/domain/payments/idempotency-key-retention.js';
import { FAILED_JOB_RETENTION_MS, oneOffJobNames, PRUNE_FAILED_JOBS_SQL } from '../../server/jobs/failed-job-retention.js';
import { REVERSAL_BY_ORIGINATOR_SQL } from '../../server/sandbox/mobilemoney/store.js';
import { startTestService, type TestService } from '../support/service.js';

// Lookups of tables that grow with traffic, each read through an index, never the whole table
// (Migration20261129160000; before it each was a sequential scan):
// - a confirmation of an unverifiable notification looks for one still open, under an advisory lock;
// - the status queries' and the failed one-off jobs' retention prunes pick the old rows;
// - a refused refund move is audited once: looked up by refund in payment_transitions (the largest table,
//   never pruned) while the payment's and the refund's rows are locked FOR UPDATE;
// - the mobile-money simulator answers a status query about a reversal by its OriginatorConversationID.
// - every prune's batch, and a recover's, is deleted (updated) through the key of the rows it picked
//   (`= ANY(ARRAY(…))`, server/lib/batched-delete.ts), never by hashing it against a scan of the table.
// Each table is seeded with many rows (generate_series) and ANALYZEd, then the statement is EXPLAINed.

let t: TestService;
let merchantId: string;
let paymentId: string;
let refundId: string;

/** The plan of `sql` with its `?` placeholders as $1, $2, … (what node-postgres sends). */
async function planOf(sql: string, params: unknown[]): Promise<string> {
  let n = 0;
  const numbered = sql.replace(/\?/g, () => `$${++n}`);
  return (await t.sql<{ 'QUERY PLAN': string }>(`EXPLAIN ${numbered}`, params)).map((r) => r['QUERY PLAN']).join('\n');
}

beforeAll(async () => {
  t = await startTestService();
  let apiKey: string;
  ({ merchantId, apiKey } = await t.createMerchant('Lookup Indexes Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_lookup_indexes' } }).expect(200);
  const payment = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', 'lookup-indexes-1')
    .send({ provider: 'cardpay', amount: '50.00', currency: 'USD', payment_method: 'pm_card_visa', return_url: 'https://shop.example.com/return' }).expect(201);
  paymentId = payment.body.data.id;
  refundId = (await t.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: paymentId, amount: '1.00' }).expect(201)).body.data.id;
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe('provider status queries', () => {
  beforeAll(async () => {
    // 50,000 queries sent over a month, nearly all answered; 20 confirmations still open.
    await t.sql(
      `INSERT INTO provider_status_queries (id, provider, merchant_id, code, confirms, created_at, completed_at, result_code)
       SELECT gen_random_uuid(), 'mobilemoney', $1, 'RCPT' || i, CASE WHEN i % 3 = 0 THEN 'transaction-status' END,
              now() - (i % 30) * interval '1 day' - i * interval '1 second',
              CASE WHEN i > 20 THEN now() - (i % 30) * interval '1 day' END, CASE WHEN i > 20 THEN '0' END
       FROM generate_series(1, 50000) AS i`,
      [merchantId],
    );
    await t.sql('ANALYZE provider_status_queries');
  });

  it('a confirmation looks for an open one about the same transaction through the partial index', async () => {
    const plan = await planOf(OPEN_CONFIRMATION_SQL, [
      '00000000-0000-4000-8000-000000000001', 'mobilemoney', merchantId, null, null, 'RCPT42', 'transaction-status',
      'mobilemoney', merchantId, 'RCPT42', 600_000,
    ]);
    expect(plan).toContain('provider_status_queries_open_confirmation_idx');
    expect(plan).not.toMatch(/Seq Scan on provider_status_queries/);
  });

  it('the retention prune reads the old queries through the index on their creation time', async () => {
    const plan = await planOf(PRUNE_STATUS_QUERIES_SQL, [29.5 * 86_400_000]);
    expect(plan).toContain('provider_status_queries_created_idx');
    expect(plan).not.toMatch(/Seq Scan on provider_status_queries/);
  });
});

describe('payment_transitions, looked up by refund', () => {
  it('a refused refund move is looked up by its refund through an index', async () => {
    // 100,000 audit rows: the payment's own moves, a few of them about the refund.
    await t.sql(
      `INSERT INTO payment_transitions (payment_id, refund_id, subject, from_status, to_status, trigger, accepted)
       SELECT $1, CASE WHEN i % 10000 = 0 THEN $2::uuid END, CASE WHEN i % 10000 = 0 THEN 'refund' ELSE 'payment' END,
              'pending', 'completed', 'seed', i % 2 = 0
       FROM generate_series(1, 100000) AS i`,
      [paymentId, refundId],
    );
    await t.sql('ANALYZE payment_transitions');
    // status-writer.ts: refuseCompletionThatDoesNotFit's and auditRefusalOnce's lookups (column refund_id).
    const lookups = [
      "SELECT 1 FROM payment_transitions WHERE refund_id = ? AND subject = 'refund' AND from_status = 'pending' AND to_status = 'completed' AND NOT accepted AND starts_with(note, ?) LIMIT 1",
      'SELECT 1 FROM payment_transitions WHERE refund_id = ? AND subject = ? AND from_status IS NOT DISTINCT FROM ? AND to_status = ? AND NOT accepted AND trigger = ? LIMIT 1',
    ];
    for (const [sql, params] of [[lookups[0]!, [refundId, 'refund_does_not_fit']], [lookups[1]!, [refundId, 'refund', 'completed', 'failed', 'sync']]] as const) {
      const plan = await planOf(sql, [...params]);
      expect(plan).toContain('payment_transitions_refund_idx');
      expect(plan).not.toMatch(/Seq Scan on payment_transitions/);
    }
  });
});

describe('the mobile-money simulator', () => {
  it('finds a reversal by its OriginatorConversationID through an index', async () => {
    await t.sql(
      `INSERT INTO sandbox_mobilemoney_reversals (conversation_id, originator_conversation_id, transaction_id, result_code, amount)
       SELECT 'AG_seed_' || i, 'seed-' || i, 'SEED' || i, '0', 100 FROM generate_series(1, 50000) AS i`,
    );
    await t.sql('ANALYZE sandbox_mobilemoney_reversals');
    const plan = await planOf(REVERSAL_BY_ORIGINATOR_SQL, ['seed-4242']);
    expect(plan).toContain('sandbox_mobilemoney_reversals_originator_idx');
    expect(plan).not.toMatch(/Seq Scan on sandbox_mobilemoney_reversals/);
  });
});

describe('agenda_jobs, failed one-off jobs', () => {
  it('the prune reads them through Agenda\'s index on job name and next run', async () => {
    // 20,000 webhook retries due over the next day, 20 one-off jobs that failed 8 days ago.
    await t.sql(
      `INSERT INTO agenda_jobs (name, next_run_at, data)
       SELECT 'webhook.deliver', now() + interval '1 day' + i * interval '1 second', jsonb_build_object('deliveryId', 'seed-' || i)
       FROM generate_series(1, 20000) AS i`,
    );
    await t.sql(
      `INSERT INTO agenda_jobs (name, next_run_at, failed_at, fail_reason, last_finished_at)
       SELECT 'webhook.deliver', NULL, now() - interval '8 days', 'seed', now() - interval '8 days' FROM generate_series(1, 20) AS i`,
    );
    await t.sql('ANALYZE agenda_jobs');
    // The statement exactly as it runs: the platform inlines the job names' list.
    const agenda = t.service.container.agenda;
    const names = oneOffJobNames(agenda);
    expect(names).toEqual(expect.arrayContaining(['webhook.deliver', 'sandbox.mobilemoney.callback']));
    const sql = t.service.container.orm.em.getPlatform().formatQuery(PRUNE_FAILED_JOBS_SQL, [names, FAILED_JOB_RETENTION_MS]);
    const plan = (await t.sql<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`)).map((r) => r['QUERY PLAN']).join('\n');
    expect(plan).toContain('agenda_jobs_find_and_lock_idx');
    expect(plan).not.toMatch(/Seq Scan on agenda_jobs/);
    await t.sql(`DELETE FROM agenda_jobs WHERE data->>'deliveryId' LIKE 'seed-%' OR fail_reason = 'seed'`);
  });
});

describe('a prune\'s batch, deleted by key', () => {
  // Each table holds a backlog past retention (a worker that was down, a first prune after an upgrade):
  // more than a batch. Before, PostgreSQL hashed the batch against a sequential scan of the whole table.
  const DAY_MS = 86_400_000;

  it('the inbox prune deletes its batch by ctid, not by a scan of every notification', async () => {
    // 100,000 notifications within the 30 days, 2,000 older.
    await t.sql(
      `INSERT INTO provider_events (provider, event_id, outcome, received_at)
       SELECT 'cardpay', 'evt_keep_' || i, 'applied', now() - (i % 29) * interval '1 day' - i * interval '1 ms' FROM generate_series(1, 100000) AS i
       UNION ALL
       SELECT 'walletpay', 'evt_old_' || i, 'applied', now() - interval '31 days' FROM generate_series(1, 2000) AS i`,
    );
    await t.sql('ANALYZE provider_events');
    const plan = await planOf(PRUNE_INBOX_SQL, [30 * DAY_MS]);
    expect(plan).toContain('provider_events_received_idx');
    expect(plan).toMatch(/Tid Scan on provider_events/);
    expect(plan).not.toMatch(/Seq Scan on provider_events/);
  });

  it('the rate-limit windows\' prune deletes its batch by ctid, not by a scan of every window', async () => {
    // 1,000 keys counting per second for the last 100 seconds, 5,000 ended windows (minutes without a prune).
    await t.sql(
      `INSERT INTO rate_limit_windows (bucket, window_start, count)
       SELECT 'live-' || k || '/1s', date_trunc('second', now()) - s * interval '1 second', 1 FROM generate_series(1, 1000) AS k, generate_series(0, 99) AS s
       UNION ALL
       SELECT 'ended-' || k || '/1s', now() - interval '5 minutes', 1 FROM generate_series(1, 5000) AS k`,
    );
    await t.sql('ANALYZE rate_limit_windows');
    const plan = await planOf(PRUNE_RATE_LIMIT_WINDOWS_SQL, [RATE_LIMIT_WINDOW_RETENTION_MS]);
    expect(plan).toContain('rate_limit_windows_start_idx');
    expect(plan).toMatch(/Tid Scan on rate_limit_windows/);
    expect(plan).not.toMatch(/Seq Scan on rate_limit_windows/);
  });

  it('a recover queues its batch again through the primary key, not by a scan of every delivery', async () => {
    // 100,000 delivered deliveries of the merchant's, 5,000 dead ones in the window recovered.
    const [event] = await t.sql<{ id: string }>(
      `INSERT INTO events (id, merchant_id, type, payload, body) VALUES (gen_random_uuid(), $1, 'payment.completed', '{}'::jsonb, '{}') RETURNING id`,
      [merchantId],
    );
    await t.sql(
      `INSERT INTO webhook_deliveries (id, event_id, merchant_id, event_type, url, status, attempts, created_at)
       SELECT gen_random_uuid(), $1, $2, 'payment.completed', 'http://127.0.0.1:9/hooks', CASE WHEN i <= 5000 THEN 'dead' ELSE 'delivered' END, 1,
              now() - interval '1 hour' - i * interval '1 second'
       FROM generate_series(1, 105000) AS i`,
      [event!.id, merchantId],
    );
    await t.sql('ANALYZE webhook_deliveries');
    const since = new Date(Date.now() - 3 * DAY_MS).toISOString();
    const plan = await planOf(REQUEUE_BATCH_SQL, [merchantId, merchantId, since, new Date().toISOString(), null, null, null, 1000, null]);
    expect(plan).toContain('webhook_deliveries_pkey');
    expect(plan).not.toMatch(/Seq Scan on webhook_deliveries/);
  });

  // At 100,000 rows PostgreSQL already probed these two tables' keys; at 30,000 with a backlog it scanned them.
  it('the events prune deletes its batch through the primary key, not by a scan of every event', async () => {
    await t.sql(
      `INSERT INTO events (id, merchant_id, type, payload, body, created_at)
       SELECT gen_random_uuid(), $1, 'payment.completed', '{}'::jsonb, '{}',
              CASE WHEN i <= 3000 THEN now() - interval '40 days' - i * interval '1 second' ELSE now() - (i % 29) * interval '1 day' END
       FROM generate_series(1, 30000) AS i`,
      [merchantId],
    );
    await t.sql('ANALYZE events');
    const plan = await planOf(PRUNE_EVENTS_SQL, [30 * DAY_MS, null, null, null, 7 * DAY_MS]);
    expect(plan).toContain('events_created_idx');
    expect(plan).toContain('events_pkey');
    expect(plan).not.toMatch(/Seq Scan on events/);
  });

  it('the idempotency keys\' prune deletes its batch through the primary key, not by a scan of every key', async () => {
    await t.sql(
      `INSERT INTO idempotency_keys (scope, key, merchant_id, request_hash, recovery_point, resource_id, created_at, updated_at)
       SELECT 'refund.create', 'prune-plan-' || i, $1, 'h', 'finished', gen_random_uuid(), at, at
       FROM generate_series(1, 30000) AS i, LATERAL (SELECT CASE WHEN i <= 3000 THEN now() - interval '2 days' ELSE now() - i * interval '1 second' END AS at) a`,
      [merchantId],
    );
    await t.sql('ANALYZE idempotency_keys');
    const plan = await planOf(PRUNE_IDEMPOTENCY_KEYS_SQL, [DAY_MS, DAY_MS]);
    expect(plan).toContain('idempotency_keys_prunable_created_idx');
    expect(plan).toContain('idempotency_keys_pkey');
    expect(plan).not.toMatch(/Seq Scan on idempotency_keys/);
  });
});
