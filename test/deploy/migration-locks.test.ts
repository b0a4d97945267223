import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { MikroORM } from '@mikro-orm/postgresql';
import { migrate, openOrm, revertMigrationsAfter } from '../../server/persistence/orm.js';
import { createTestDatabase, sql } from '../support/database.js';

// Migrations run while the service is up (MIGRATE_ON_BOOT, or `npm run migrate` before a rollout). An
// ALTER TABLE that waits for its lock behind a long transaction (a report, a stuck session) would queue
// every later query on the table — reads too — behind itself: the service would stop answering until
// that transaction ended. The migration gives up waiting instead, changes nothing, and says why.

const BEFORE_PAYMENT_METADATA = 'Migration20261127000102_dead_deliveries_index';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let orm: MikroORM;

beforeAll(async () => {
  db = await createTestDatabase({ empty: true });
  orm = await openOrm(db.url, 2);
  await migrate(orm);
  // As before the release that added payments.metadata: the next `migrate` alters the payments table.
  await revertMigrationsAfter(orm, BEFORE_PAYMENT_METADATA);
});

afterAll(async () => {
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
