import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MikroORM } from '@mikro-orm/postgresql';
import { migrate, revertMigrationsAfter } from '../../server/persistence/orm.js';
import { sql, type createTestDatabase } from '../support/database.js';
import { databaseAt } from '../support/database-at.js';

// A provider's message finds its payment by (provider, provider_ref): one payment per reference, held by
// the database. An upgrade meeting a database where two payments already share one says so and changes nothing.

const BEFORE = 'Migration20261128009130_payment_provider_account';
const UNIQUE = 'Migration20261128009140_payments_provider_ref_unique';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let orm: MikroORM;
const merchantId = randomUUID();

beforeAll(async () => {
  ({ db, orm } = await databaseAt(BEFORE));
  await sql(db.url, `INSERT INTO merchants (id, name) VALUES ($1, 'Shared Reference')`, [merchantId]);
});
afterAll(async () => {
  await orm?.close(true);
  await db?.drop();
});

const payment = (reference: string, providerRef: string | null) =>
  sql<{ id: string }>(db.url,
    `INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash, provider_ref)
     VALUES (gen_random_uuid(), $1, 'cardpay', 'pending', 1000, 'USD', '10.00', $2, $2, 'seed', $3) RETURNING id`,
    [merchantId, reference, providerRef]);

describe('one payment per provider reference', () => {
  it('an upgrade over two payments sharing a reference stops, naming the count, and changes nothing', async () => {
    await payment('first', 'pi_shared');
    await payment('second', 'pi_shared');
    await expect(migrate(orm)).rejects.toThrow('payments: 1 provider reference(s) are each held by more than one payment; resolve them before upgrading');
    const [applied] = await sql(db.url, 'SELECT 1 FROM mikro_orm_migrations WHERE name = $1', [UNIQUE]);
    expect(applied).toBeUndefined();
    expect(await sql(db.url, `SELECT indexdef FROM pg_indexes WHERE indexname = 'payments_provider_ref_idx'`)).toEqual([
      { indexdef: expect.not.stringContaining('UNIQUE') },
    ]);
  });

  it('once resolved, the upgrade applies, and a second payment can no longer take a reference one holds', async () => {
    await sql(db.url, `UPDATE payments SET provider_ref = 'pi_other' WHERE reference = 'second'`);
    expect(await migrate(orm)).toContain(UNIQUE);

    await payment('third', null);
    await payment('fourth', null); // no reference yet (the reservation): any number
    const [fourth] = await sql<{ id: string }>(db.url, `SELECT id FROM payments WHERE reference = 'fourth'`);
    await expect(sql(db.url, `UPDATE payments SET provider_ref = 'pi_shared' WHERE id = $1`, [fourth!.id])).rejects.toThrow(/payments_provider_ref_idx/);
    // The same reference at another provider is another reference.
    await sql(db.url, `UPDATE payments SET provider = 'walletpay', currency = 'USD', provider_ref = 'pi_shared' WHERE id = $1`, [fourth!.id]);
  });

  it('builds the index again when the one an operator built by hand beforehand is not unique', async () => {
    await revertMigrationsAfter(orm, BEFORE);
    // README's template is `CREATE INDEX CONCURRENTLY <name> <definition>`: without UNIQUE it builds a plain index.
    await sql(db.url, `CREATE INDEX CONCURRENTLY payments_provider_ref_new_idx ON payments (provider, provider_ref) WHERE provider_ref IS NOT NULL`);
    expect(await migrate(orm)).toContain(UNIQUE);
    const [index] = await sql<{ indexdef: string }>(db.url, `SELECT indexdef FROM pg_indexes WHERE indexname = 'payments_provider_ref_idx'`);
    expect(index!.indexdef).toContain('CREATE UNIQUE INDEX');
  });

  it('rolls back to the index it replaced', async () => {
    await revertMigrationsAfter(orm, BEFORE);
    const [index] = await sql<{ indexdef: string }>(db.url, `SELECT indexdef FROM pg_indexes WHERE indexname = 'payments_provider_ref_idx'`);
    expect(index!.indexdef).toBe('CREATE INDEX payments_provider_ref_idx ON public.payments USING btree (provider, provider_ref)');
  });
});
