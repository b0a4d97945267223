import { afterAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, callApi, freePort, migrateCli, runCli, startProcess, stopAllProcesses, type ServiceProcess } from '../support/processes.js';
import { TEST_ENCRYPTION_KEY } from '../support/test-key.js';
import { eventually } from '../support/webhook-receiver.js';

// An operator rolls a release back: stop the processes, `npm run migrate -- --down-to <the last
// migration the earlier release has>`, start the earlier release. Then forward again with `npm run migrate`.
const EARLIER_RELEASE = 'Migration20261123001601_payment_week_counts';
const FIRST = 'Migration20261122000001_foundation';

type Db = Awaited<ReturnType<typeof createTestDatabase>>;
const databases: Db[] = [];

/**
 * A migrated database and its applied migrations, oldest first: a copy of the run's template (which
 * `npm test` migrates with the migrate command), or with `fromScratch` an empty database migrated here
 * by the migrate command, `applied` being what it printed.
 */
async function migrated({ fromScratch = false } = {}): Promise<{ db: Db; applied: string[] }> {
  const db = await createTestDatabase({ empty: fromScratch });
  databases.push(db);
  if (!fromScratch) return { db, applied: (await sql<{ name: string }>(db.url, 'SELECT name FROM mikro_orm_migrations ORDER BY id')).map((r) => r.name) };
  const run = await migrateCli(db.url);
  expect(run.code).toBe(0);
  return { db, applied: (JSON.parse(run.stdout) as { applied: string[] }).applied };
}

/** A database as the release before `migration` left it (migrated, then rolled back to just before it), with a merchant. */
async function beforeMigration(migration: string, merchantName: string): Promise<{ db: Db; merchantId: string }> {
  const { db, applied } = await migrated();
  const { merchantId } = await adminMerchant(db.url, merchantName);
  expect((await migrateCli(db.url, ['--down-to', applied[applied.indexOf(migration) - 1]!])).code).toBe(0);
  return { db, merchantId };
}

async function startApp(dbUrl: string): Promise<ServiceProcess> {
  const port = await freePort();
  return startProcess('all', baseEnv(dbUrl, `http://127.0.0.1:${port}`, { PORT: String(port), MIGRATE_ON_BOOT: 'false' }));
}

const call = (app: ServiceProcess, method: string, path: string, apiKey: string, body?: unknown, headers: Record<string, string> = {}) => callApi(app.url!, method, path, apiKey, body, headers);

let n = 0;
const pay = (app: ServiceProcess, apiKey: string, paymentMethod: string) =>
  call(app, 'POST', '/v1/payments', apiKey, { provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: paymentMethod }, { 'Idempotency-Key': `rollback-${Date.now()}-${++n}` });

/** Per status, what the counters say and what count(*) says, for one merchant. */
async function countersAndRows(dbUrl: string, merchantId: string) {
  const counters = await sql<{ status: string; n: string }>(dbUrl, 'SELECT status, sum(n)::text AS n FROM payment_counts WHERE merchant_id = $1 GROUP BY status HAVING sum(n) <> 0 ORDER BY status', [merchantId]);
  const rows = await sql<{ status: string; n: string }>(dbUrl, 'SELECT status, count(*)::text AS n FROM payments WHERE merchant_id = $1 GROUP BY status ORDER BY status', [merchantId]);
  return { counters, rows };
}

/** What a schema is made of, in a form two databases can be compared by. */
async function schemaOf(dbUrl: string) {
  const q = (text: string) => sql<{ d: string }>(dbUrl, text).then((rows) => rows.map((r) => r.d));
  return {
    columns: await q(`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS d
                        FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'mikro_orm_migrations' ORDER BY 1`),
    indexes: await q(`SELECT indexdef AS d FROM pg_indexes WHERE schemaname = 'public' AND tablename <> 'mikro_orm_migrations' ORDER BY 1`),
    constraints: await q(`SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) AS d FROM pg_constraint
                           WHERE connamespace = 'public'::regnamespace AND conrelid <> 'mikro_orm_migrations'::regclass ORDER BY 1`),
    triggers: await q(`SELECT pg_get_triggerdef(oid) AS d FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1`),
    functions: await q(`SELECT pg_get_functiondef(p.oid) AS d FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1`),
    views: await q(`SELECT viewname || ' ' || definition AS d FROM pg_views WHERE schemaname = 'public' ORDER BY 1`),
  };
}

afterAll(async () => {
  await stopAllProcesses();
  for (const db of databases) await db.drop();
}, 60_000);

describe('npm run migrate -- --down-to (rolling the schema back to an earlier release)', () => {
  it('keeps every payment and exact totals through a rollback and forward again, with the service answering after', async () => {
    const { db, applied } = await migrated();
    let app = await startApp(db.url);
    const { merchantId, apiKey } = await adminMerchant(db.url, 'Rollback Shop');
    expect((await call(app, 'PUT', '/v1/merchant/credentials', apiKey, { provider: 'cardpay', cardpay: { secret_key: 'sk_test_rollback_0001' } })).status).toBe(200);
    const answers = await Promise.all([...Array(6).fill('pm_card_visa'), ...Array(2).fill('pm_card_chargeDeclined')].map((pm: string) => pay(app, apiKey, pm)));
    expect(answers.map((a) => [a.status, a.body.data?.status])).toEqual([...Array(6).fill([201, 'completed']), ...Array(2).fill([201, 'failed'])]);
    await app.stop();

    const rollback = await migrateCli(db.url, ['--down-to', EARLIER_RELEASE]);
    expect(rollback.code).toBe(0);
    const { reverted } = JSON.parse(rollback.stdout) as { reverted: string[] };
    const later = applied.slice(applied.indexOf(EARLIER_RELEASE) + 1);
    // Newest first, and nothing else.
    expect(reverted).toEqual([...later].reverse());
    const status = JSON.parse((await migrateCli(db.url, ['--status'])).stdout) as { applied: string[]; pending: string[] };
    expect(status.applied.at(-1)).toBe(EARLIER_RELEASE);
    expect(status.pending).toEqual(later);

    // The earlier schema: every payment is there, its counters are exact, and its own triggers keep them.
    expect(await countersAndRows(db.url, merchantId)).toEqual({ counters: [{ status: 'completed', n: '6' }, { status: 'failed', n: '2' }], rows: [{ status: 'completed', n: '6' }, { status: 'failed', n: '2' }] });
    await sql(db.url, `UPDATE payments SET status = 'refunded' WHERE id = (SELECT id FROM payments WHERE merchant_id = $1 AND status = 'completed' LIMIT 1)`, [merchantId]);
    expect(await countersAndRows(db.url, merchantId)).toEqual({
      counters: [{ status: 'completed', n: '5' }, { status: 'failed', n: '2' }, { status: 'refunded', n: '1' }],
      rows: [{ status: 'completed', n: '5' }, { status: 'failed', n: '2' }, { status: 'refunded', n: '1' }],
    });

    const forward = await migrateCli(db.url);
    expect(forward.code).toBe(0);
    expect((JSON.parse(forward.stdout) as { applied: string[] }).applied).toEqual(later);
    app = await startApp(db.url);
    expect((await pay(app, apiKey, 'pm_card_visa')).body.data?.status).toBe('completed');
    for (const [filter, total] of [['', 9], ['?status=completed', 6], ['?status=refunded', 1], ['?status=failed', 2]] as const) {
      const list = await call(app, 'GET', `/v1/payments${filter}`, apiKey);
      expect([filter, list.status, list.body.meta?.total]).toEqual([filter, 200, total]);
    }
    await app.stop();
  }, 180_000);

  it('takes away the recurring job a reverted migration came with, so the earlier release\'s job gauges do not page for it', async () => {
    const { db, applied } = await migrated();
    const app = await startApp(db.url);
    const jobs = () => sql<{ name: string }>(db.url, 'SELECT DISTINCT name FROM agenda_jobs ORDER BY name').then((rows) => rows.map((r) => r.name));
    // The worker schedules its recurring jobs once its boot is over, just after it answers.
    await eventually(async () => (await jobs()).includes('cards.detach-due') || null, 30_000, 'the worker to schedule cards.detach-due');
    await app.stop();
    const before = await jobs();
    const detachMigration = applied.find((name) => name.startsWith('Migration20261129004101'))!;
    expect((await migrateCli(db.url, ['--down-to', applied[applied.indexOf(detachMigration) - 1]!])).code).toBe(0);
    expect(await jobs()).toEqual(before.filter((name) => name !== 'cards.detach-due'));
  }, 120_000);

  it('reverts every migration down to the first, and migrating again rebuilds the same schema', async () => {
    const { db, applied } = await migrated({ fromScratch: true });
    const before = await schemaOf(db.url);
    const down = await migrateCli(db.url, ['--down-to', FIRST]);
    expect([down.code, down.stderr]).toEqual([0, '']);
    expect((JSON.parse(down.stdout) as { reverted: string[] }).reverted).toHaveLength(applied.length - 1);
    const left = await sql<{ t: string }>(db.url, `SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`);
    expect(left.map((r) => r.t)).toEqual(['agenda_jobs', 'api_keys', 'merchants', 'mikro_orm_migrations', 'provider_credentials']);
    expect((await migrateCli(db.url)).code).toBe(0);
    expect(await schemaOf(db.url)).toEqual(before);
  }, 180_000);

  it('leaves the reverted migrations pending when an admin command runs next, whatever its environment, and says why', async () => {
    const { db, applied } = await migrated();
    expect((await migrateCli(db.url, ['--down-to', EARLIER_RELEASE])).code).toBe(0);
    const later = applied.slice(applied.indexOf(EARLIER_RELEASE) + 1);
    // README, Production: NODE_ENV=production is exported for every command. The other: a bastion shell
    // with DATABASE_URL and the key exported and nothing else (it used to apply them all again, under the
    // earlier release still running).
    const production = { NODE_ENV: 'production', DATABASE_URL: db.url, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, PUBLIC_BASE_URL: 'https://pay.example.com' };
    const bastion = { DATABASE_URL: db.url, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY };
    for (const env of [production, bastion, { NODE_ENV: 'test', DATABASE_URL: db.url, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY }]) {
      for (const command of [['merchant', 'create', '--name', 'After Rollback'], ['payment', 'recheck', '--unresolved']]) {
        const admin = await runCli('server/admin/cli.ts', command, env);
        expect([admin.code, admin.stdout]).toEqual([1, '']);
        expect(admin.stderr).toContain(`the admin CLI never migrates (after migrate --down-to, use the earlier release's admin CLI) and ${later.length} migration(s) are pending`);
        expect(admin.stderr).toContain('run the migrate command first (npm run migrate, or npm run migrate:prod from the build)');
      }
    }
    const status = JSON.parse((await migrateCli(db.url, ['--status'])).stdout) as { pending: string[] };
    expect(status.pending).toEqual(later);
    expect(await sql(db.url, `SELECT 1 FROM merchants WHERE name = 'After Rollback'`)).toEqual([]);
  }, 120_000);

  it('schedules the lost mobilemoney pushes an earlier release left unjudged for their pull, and only those', async () => {
    const { db, merchantId } = await beforeMigration('Migration20261128004501_schedule_lost_push_checks', 'Lost Push Upgrade');
    // name, provider, provider_ref, age, next_sync_at (from now)
    const rows: [string, string, string | null, string, string | null][] = [
      ['unscheduled', 'mobilemoney', null, '10 hours', null],
      ['due-late', 'mobilemoney', null, '30 minutes', '5 days'],
      ['due-sooner', 'mobilemoney', null, '1 hour', '1 minute'],
      ['out-of-reach', 'mobilemoney', null, '48 hours', null],
      ['card', 'cardpay', null, '10 hours', null],
      ['answered', 'mobilemoney', 'ws_CO_1', '10 hours', null],
    ];
    for (const [name, provider, ref, age, next] of rows) {
      await sql(db.url,
        `INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash, provider_ref, created_at, updated_at, next_sync_at)
         VALUES (gen_random_uuid(), $1, $2, 'pending', 10000, $3, '100', $4, $4, 'seed', $5, now() - $6::interval, now(), now() + $7::interval)`,
        [merchantId, provider, provider === 'cardpay' ? 'USD' : 'KES', name, ref, age, next]);
    }
    expect((await migrateCli(db.url)).code).toBe(0);
    const due = await sql<{ reference: string; due: string | null }>(db.url,
      `SELECT reference, CASE WHEN next_sync_at IS NULL THEN NULL
                              WHEN next_sync_at <= now() THEN 'now'
                              WHEN abs(extract(epoch FROM next_sync_at - (created_at + interval '2 hours 1 minute'))) < 1 THEN 'at its check'
                              ELSE 'unchanged' END AS due
       FROM payments WHERE merchant_id = $1 ORDER BY reference`, [merchantId]);
    expect(Object.fromEntries(due.map((r) => [r.reference, r.due]))).toEqual({
      'unscheduled': 'now', 'due-late': 'at its check', 'due-sooner': 'unchanged', 'out-of-reach': null, 'card': null, 'answered': null,
    });
  }, 120_000);

  it('marks the captures an earlier release may have sent (a capture key without a final answer, or answered undecided) of pending payments, and only those', async () => {
    const { db, merchantId } = await beforeMigration('Migration20261128009102_payment_capture_sent_at', 'Capture Mark Upgrade');
    // name, payment status, the capture key's recovery point and answer (no key: null)
    const undecided = { status: 200, undecided: { code: 'PROVIDER_ERROR', message: 'walletpay capture failed: no answer in time' } };
    const rows: [string, string, [string, unknown] | null][] = [
      ['in-flight', 'pending', ['provider_call', null]],
      ['undecided', 'pending', ['finished', undecided]],
      ['answered', 'pending', ['finished', { error: { status: 409, code: 'CONFLICT', message: 'the buyer has not approved this payment yet' } }]],
      ['no-key', 'pending', null],
      ['settled', 'completed', ['finished', undecided]],
    ];
    for (const [name, status, key] of rows) {
      const [payment] = await sql<{ id: string }>(db.url,
        `INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash, provider_ref, created_at, updated_at)
         VALUES (gen_random_uuid(), $1, 'walletpay', $2, 1000, 'USD', '10.00', $3, $3, 'seed', $4, now(), now()) RETURNING id`,
        [merchantId, status, name, `ORDER-${name}`]);
      if (key) {
        await sql(db.url,
          `INSERT INTO idempotency_keys (scope, key, merchant_id, request_hash, recovery_point, resource_id, answer) VALUES ('payment.capture', $1, $2, 'seed', $3, $4, $5::jsonb)`,
          [`capture-${name}`, merchantId, key[0], payment!.id, key[1] === null ? null : JSON.stringify(key[1])]);
      }
    }
    expect((await migrateCli(db.url)).code).toBe(0);
    const marked = await sql<{ reference: string; marked: boolean }>(db.url,
      'SELECT reference, capture_sent_at IS NOT NULL AS marked FROM payments WHERE merchant_id = $1 ORDER BY reference', [merchantId]);
    expect(Object.fromEntries(marked.map((r) => [r.reference, r.marked]))).toEqual({
      'in-flight': true, 'undecided': true, 'answered': false, 'no-key': false, 'settled': false,
    });
  }, 120_000);

  it('a failure while migrating exits 1 as "migrate failed", not as a usage error, even when it is a TypeError; only the command line is a usage error', async () => {
    const { db } = await migrated();
    // A damaged migrations table (a row without a name): the ORM fails on it with a TypeError of Node's.
    await sql(db.url, 'INSERT INTO mikro_orm_migrations (name) VALUES (NULL)');
    const failed = await migrateCli(db.url);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^migrate failed: The "path" argument must be of type string/);
    expect(failed.stderr).not.toContain('usage: migrate');
    // The command line's own errors stay usage errors: exit 64 with the help.
    for (const args of [['--donw-to', FIRST], ['--status', '--down-to', FIRST], ['extra']]) {
      const refused = await migrateCli(db.url, args);
      expect([refused.code, refused.stderr]).toEqual([64, expect.stringContaining('usage: migrate')]);
    }
  }, 120_000);

  it('refuses a migration that is not applied, with a clear message, and reverts nothing', async () => {
    const { db, applied } = await migrated();
    const refused = await migrateCli(db.url, ['--down-to', 'Migration20990101000001_future']);
    expect(refused.code).toBe(64);
    expect(refused.stderr).toContain('--down-to: Migration20990101000001_future is not an applied migration');
    expect(refused.stdout).toBe('');
    expect((JSON.parse((await migrateCli(db.url, ['--status'])).stdout) as { applied: string[] }).applied).toEqual(applied);
  }, 120_000);
});
