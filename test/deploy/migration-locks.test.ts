import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { getCreateIndexesSQL, getCreateTableSQL, getUpdateTimestampTriggerSQL } from '@agendajs/postgres-backend';
import type { MikroORM } from '@mikro-orm/postgresql';
import { migrate } from '../../server/persistence/orm.js';
import { createTestDatabase, sql } from '../support/database.js';
import { databaseAt } from '../support/database-at.js';
import { baseEnv, freePort, startProcess, stopAllProcesses } from '../support/processes.js';

// Migrations run while the service is up (MIGRATE_ON_BOOT, or `npm run migrate` before a rollout). An
// ALTER TABLE that waits for its lock behind a long transaction (a report, a stuck session) would queue
// every later query on the table — reads too — behind itself: the service would stop answering until
// that transaction ended. The migration gives up waiting instead, changes nothing, and says why.

const BEFORE_PAYMENT_METADATA = 'Migration20261127000102_dead_deliveries_index';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let orm: MikroORM;

beforeAll(async () => {
  // As before the release that added payments.metadata: the next `migrate` alters the payments table.
  ({ db, orm } = await databaseAt(BEFORE_PAYMENT_METADATA));
});

afterAll(async () => {
  await stopAllProcesses();
  await orm?.close(true);
  await db?.drop();
});

describe('a migration that cannot get its lock', () => {
  it('gives up rather than blocking the table, changes nothing, and applies once the long transaction is over', async () => {
    const longTransaction = new pg.Client({ connectionString: db.url });
    const reader = new pg.Client({ connectionString: db.url });
    await Promise.all([longTransaction.connect(), reader.connect()]);
    try {
      await longTransaction.query('BEGIN');
      await longTransaction.query('SELECT count(*) FROM payments'); // holds a lock on payments until it ends
      const migrating = migrate(orm, { lockTimeoutMs: 500, attempts: 2, retryDelayMs: 100 });
      const outcome = migrating.then(() => 'applied', (err: Error) => err.message);

      // A query of the service's meanwhile is answered, although the long transaction is still open. Its
      // own bound (5 s) only turns a block into a failure here: without the lock timeout it waits for ever.
      await reader.query("SET statement_timeout = '5s'");
      for (let i = 0; i < 5; i++) {
        await expect(reader.query('SELECT count(*) FROM payments')).resolves.toBeDefined();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }

      expect(await outcome).toMatch(/stayed locked by another transaction \(2 attempts, 500 ms each\); nothing was changed/);
      expect(await sql(db.url, `SELECT 1 FROM information_schema.columns WHERE table_name = 'payments' AND column_name = 'metadata'`)).toEqual([]);
    } finally {
      await longTransaction.query('ROLLBACK').catch(() => undefined);
      await Promise.all([longTransaction.end(), reader.end()]);
    }
    // The transaction is over: the same migrations apply.
    expect(await migrate(orm, { lockTimeoutMs: 500 })).toContain('Migration20261127000201_payment_metadata');
    expect(await sql(db.url, `SELECT 1 FROM information_schema.columns WHERE table_name = 'payments' AND column_name = 'metadata'`)).toHaveLength(1);
  });
});

describe('a process booting while a long transaction reads agenda_jobs (pg_dump, a report)', () => {
  it('boots without waiting for it, and a running worker keeps answering /readyz', async () => {
    const jobsDb = await createTestDatabase();
    const longTransaction = new pg.Client({ connectionString: jobsDb.url });
    try {
      const workerPort = await freePort();
      await startProcess('worker', baseEnv(jobsDb.url, 'http://127.0.0.1:1', { MIGRATE_ON_BOOT: 'false', WORKER_PORT: String(workerPort) }));
      await longTransaction.connect();
      await longTransaction.query('BEGIN');
      await longTransaction.query('SELECT count(*) FROM agenda_jobs'); // holds a read lock on agenda_jobs until it ends

      const apiPort = await freePort();
      let booted = false;
      const booting = startProcess('api', baseEnv(jobsDb.url, `http://127.0.0.1:${apiPort}`, { PORT: String(apiPort), MIGRATE_ON_BOOT: 'false' }), { readyTimeoutMs: 20_000 })
        .then(() => 'ready', (err: Error) => err.message.split('\n')[0]!)
        .finally(() => (booted = true));
      // Meanwhile the running worker's readiness probe answers as usual, within its probe's timeout.
      const probes: Array<number | string> = [];
      do {
        probes.push(await fetch(`http://127.0.0.1:${workerPort}/readyz`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.status, (err: Error) => err.name));
        await new Promise((resolve) => setTimeout(resolve, 250));
      } while (!booted);
      expect(await booting).toBe('ready');
      expect(probes.filter((p) => p !== 200)).toEqual([]);
    } finally {
      await longTransaction.query('ROLLBACK').catch(() => undefined);
      await longTransaction.end().catch(() => undefined);
      await stopAllProcesses();
      await jobsDb.drop();
    }
  }, 90_000);
});

describe('agenda_jobs, made by a migration', () => {
  it('is the table the installed Agenda backend expects (a backend upgrade that changes it needs a migration)', async () => {
    const jobsDb = await createTestDatabase();
    try {
      await sql(jobsDb.url, getCreateTableSQL('expected_jobs'));
      for (const statement of getCreateIndexesSQL('expected_jobs')) await sql(jobsDb.url, statement);
      await sql(jobsDb.url, getUpdateTimestampTriggerSQL('expected_jobs'));
      const shape = async (table: string) => ({
        columns: (await sql<{ d: string }>(jobsDb.url, `SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS d
                                                         FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`, [table])).map((r) => r.d),
        indexes: (await sql<{ d: string }>(jobsDb.url, `SELECT replace(indexdef, $1, 'T') AS d FROM pg_indexes WHERE tablename = $1 ORDER BY 1`, [table])).map((r) => r.d),
        triggers: (await sql<{ d: string }>(jobsDb.url, `SELECT replace(pg_get_triggerdef(oid), $1, 'T') AS d FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal`, [table])).map((r) => r.d),
      });
      const made = await shape('agenda_jobs');
      expect(made.columns).toContain('skip_days jsonb YES ');
      expect(made).toEqual(await shape('expected_jobs'));
    } finally {
      await jobsDb.drop();
    }
  });
});
