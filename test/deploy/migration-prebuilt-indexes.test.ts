import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { MikroORM } from '@mikro-orm/postgresql';
import { migrate, revertMigrationsAfter } from '../../server/persistence/orm.js';
import { sql, type createTestDatabase } from '../support/database.js';
import { databaseAt } from '../support/database-at.js';

// README "Upgrading": an operator may build a migration's `…_new_idx` CONCURRENTLY by hand before
// migrating, so the migration only drops and renames. A hand build that is cancelled (a timeout, a
// Ctrl-C) leaves an INVALID index of that name behind: the migration must not rename it into place.

const BEFORE_INDEX_SWAPS = 'Migration20261128002102_rate_limit_windows_unlogged';
const SWAPS = [
  { index: 'webhook_deliveries_dead_idx', definition: `ON webhook_deliveries (created_at) WHERE status = 'dead' AND event_type <> 'webhook.test'` },
  { index: 'webhook_deliveries_merchant_due_idx', definition: `ON webhook_deliveries (merchant_id, least(attempts, 1), next_attempt_at) WHERE status IN ('pending', 'retrying')` },
];

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let orm: MikroORM;

beforeAll(async () => {
  ({ db, orm } = await databaseAt(BEFORE_INDEX_SWAPS));
});

afterAll(async () => {
  await orm?.close(true);
  await db?.drop();
});

/** A hand-run CREATE INDEX CONCURRENTLY cancelled while it waits for a writer's transaction to end. */
async function cancelledConcurrentBuild(name: string, definition: string): Promise<void> {
  const writer = new pg.Client({ connectionString: db.url });
  const builder = new pg.Client({ connectionString: db.url });
  await Promise.all([writer.connect(), builder.connect()]);
  try {
    await writer.query('BEGIN');
    await writer.query('LOCK TABLE webhook_deliveries IN ROW EXCLUSIVE MODE'); // as an insert would
    await builder.query("SET statement_timeout = '300ms'");
    await expect(builder.query(`CREATE INDEX CONCURRENTLY ${name} ${definition}`)).rejects.toThrow(/statement timeout/);
  } finally {
    await writer.query('ROLLBACK').catch(() => undefined);
    await Promise.all([writer.end(), builder.end()]);
  }
}

const validity = (index: string) => sql<{ valid: boolean }>(db.url, `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1)`, [index]);

describe('an index an operator began building by hand and cancelled', () => {
  it('is built again by the migration: the index the deliveries are claimed and counted by ends valid', async () => {
    for (const { index, definition } of SWAPS) {
      await cancelledConcurrentBuild(index.replace(/_idx$/, '_new_idx'), definition);
      expect(await validity(index.replace(/_idx$/, '_new_idx'))).toEqual([{ valid: false }]);
    }

    expect(await migrate(orm)).toEqual(expect.arrayContaining(['Migration20261128002201_dead_deliveries_index_without_tests', 'Migration20261128002202_delivery_claim_first_attempts']));

    for (const { index } of SWAPS) {
      expect({ index, validity: await validity(index) }).toEqual({ index, validity: [{ valid: true }] });
      expect(await validity(index.replace(/_idx$/, '_new_idx'))).toEqual([]);
    }
    const [merchantDue] = await sql<{ def: string }>(db.url, `SELECT indexdef AS def FROM pg_indexes WHERE indexname = 'webhook_deliveries_merchant_due_idx'`);
    expect(merchantDue!.def).toMatch(/LEAST\(attempts, 1\)/);
  });

  it('a valid one built by hand is kept, not built again', async () => {
    await revertMigrationsAfter(orm, BEFORE_INDEX_SWAPS);
    await sql(db.url, `CREATE INDEX CONCURRENTLY webhook_deliveries_dead_new_idx ${SWAPS[0]!.definition}`);
    const [before] = await sql<{ oid: string }>(db.url, `SELECT to_regclass('webhook_deliveries_dead_new_idx')::oid::text AS oid`);
    await migrate(orm);
    const [after] = await sql<{ oid: string }>(db.url, `SELECT to_regclass('webhook_deliveries_dead_idx')::oid::text AS oid`);
    expect(after!.oid).toBe(before!.oid);
    expect(await validity('webhook_deliveries_dead_idx')).toEqual([{ valid: true }]);
  });
});
