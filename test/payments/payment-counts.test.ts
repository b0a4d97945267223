import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

// GET /v1/payments takes `meta.total` from counters kept by triggers on payments (not from count(*)
// when the filter allows): they must equal count(*) whatever wrote the rows, however concurrently, and
// whether or not the worker's fold (every 300 ms here) has moved the appended changes into the counts.
let t: TestService;
let merchantId: string;
let key: string;
let n = 0;

const create = (paymentMethod: string, amount = '20.00') =>
  t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `pc-${Date.now()}-${++n}`)
    .send({ provider: 'cardpay', amount, currency: 'USD', payment_method: paymentMethod });

/** A payment written straight to the table, as another writer (an import, an operator) would. */
const insertRaw = (status: string, provider: string, currency: string) =>
  t.sql(
    `INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash)
     VALUES ($1, $2, $3, $4, 500, $5, 5, $6, $7, 'seed')`,
    [randomUUID(), merchantId, provider, status, currency, randomUUID(), randomUUID()],
  );

const FILTERS: Record<string, string>[] = [
  {},
  ...['pending', 'completed', 'failed', 'refunded', 'reversed'].map((status) => ({ status })),
  ...['cardpay', 'mobilemoney', 'walletpay'].map((provider) => ({ provider })),
  { currency: 'usd' }, { currency: 'KES' }, { currency: 'EUR' },
  { status: 'completed', provider: 'cardpay' }, { status: 'pending', provider: 'walletpay', currency: 'EUR' }, { status: 'refunded', currency: 'USD' },
];

async function expectTotalsEqualCounts(): Promise<void> {
  for (const filter of FILTERS) {
    const res = await t.http.get('/v1/payments').query({ ...filter, page_size: 1 }).set('X-API-Key', key);
    expect(res.status).toBe(200);
    const conditions = ['merchant_id = $1'];
    const params: unknown[] = [merchantId];
    for (const [column, value] of Object.entries(filter)) {
      params.push(column === 'currency' ? value.toUpperCase() : value);
      conditions.push(`${column} = $${params.length}`);
    }
    const [row] = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM payments WHERE ${conditions.join(' AND ')}`, params);
    expect({ filter, total: res.body.meta.total }).toEqual({ filter, total: row!.n });
  }
}

beforeAll(async () => {
  t = await startTestService({ PAYMENT_COUNT_FOLD_INTERVAL: '300ms' });
  ({ merchantId, apiKey: key } = await t.createMerchant('Counted Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_counts_0001' } }).expect(200);
});
afterAll(async () => t.stop());

describe('exact payment totals from the counters', () => {
  it('equal count(*) for every countable filter after concurrent creates, status changes, refunds and deletes', async () => {
    // Concurrent creates through the API (completed and declined) and straight inserts on other connections.
    const created = await Promise.all([
      ...Array.from({ length: 12 }, () => create('pm_card_visa')),
      ...Array.from({ length: 4 }, () => create('pm_card_chargeDeclined')),
      ...Array.from({ length: 6 }, (_, i) => insertRaw('pending', i % 2 ? 'walletpay' : 'mobilemoney', i % 2 ? 'EUR' : 'KES')),
    ]);
    const completed = created.filter((r) => 'body' in r && r.status === 201 && r.body.data?.status === 'completed').map((r) => (r as { body: { data: { id: string } } }).body.data.id);
    expect(completed.length).toBe(12);
    await expectTotalsEqualCounts();

    // Concurrently: full and partial refunds through the API, status changes and deletes straight in SQL,
    // one bulk update of several rows, and a transaction that is rolled back (it must count for nothing).
    await Promise.all([
      ...completed.slice(0, 6).map((id) => t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id }).expect(201)),
      ...completed.slice(6, 8).map((id) => t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id, amount: '5.00' }).expect(201)),
      t.sql(`UPDATE payments SET status = 'completed', updated_at = now() WHERE merchant_id = $1 AND provider = 'mobilemoney' AND status = 'pending'`, [merchantId]),
      t.sql(`UPDATE payments SET status = 'reversed' WHERE id = $1`, [completed[8]]),
      t.sql(`DELETE FROM payments WHERE id = $1`, [completed[9]]),
      // Cardpay rows only: two multi-row updates of the same rows, each in its own scan order, may deadlock
      // (PostgreSQL then refuses one); the other multi-row updates here touch mobilemoney and walletpay rows.
      t.sql(`UPDATE payments SET provider_data = '{"touched":true}' WHERE merchant_id = $1 AND provider = 'cardpay'`, [merchantId]),
      t.sql(`UPDATE payments SET provider = 'walletpay', currency = 'EUR' WHERE id = $1`, [completed[10]]),
      t.sql(`UPDATE payments SET currency = 'KES' WHERE id = $1`, [completed[11]]),
      t.sql(`BEGIN; UPDATE payments SET status = 'failed' WHERE merchant_id = $1 AND provider = 'walletpay'; ROLLBACK;`.replace('$1', `'${merchantId}'`)),
      ...Array.from({ length: 4 }, () => create('pm_card_visa')),
    ]);
    const [refunded] = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM payments WHERE merchant_id = $1 AND status = 'refunded'`, [merchantId]);
    expect(refunded!.n).toBe(6);
    await expectTotalsEqualCounts();
    const all = await t.http.get('/v1/payments').set('X-API-Key', key);
    expect(all.body.meta.total).toBe(12 + 4 + 6 + 4 - 1);
  }, 90_000); // concurrent creates, refunds and deletes through the API: a loaded CI host took more than 30 s

  it('count a bulk INSERT … SELECT and drop a deleted merchant’s payments', async () => {
    const other = await t.createMerchant('Bulk Shop');
    await t.sql(
      `INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash)
       SELECT gen_random_uuid(), $1, 'cardpay', CASE WHEN g % 3 = 0 THEN 'failed' ELSE 'completed' END, 100, 'USD', 1, 'bulk-' || g, 'bulk-' || g, 'seed'
         FROM generate_series(1, 300) g`,
      [other.merchantId],
    );
    const failed = await t.http.get('/v1/payments').query({ status: 'failed' }).set('X-API-Key', other.apiKey);
    const all = await t.http.get('/v1/payments').set('X-API-Key', other.apiKey);
    expect([failed.body.meta.total, all.body.meta.total]).toEqual([100, 300]);

    await t.sql(`DELETE FROM merchants WHERE id = $1`, [other.merchantId]);
    const [left] = await t.sql<{ n: string | null }>(`SELECT sum(n)::text AS n FROM payment_count_totals WHERE merchant_id = $1`, [other.merchantId]);
    expect(Number(left!.n ?? 0)).toBe(0);
  });

  it('are folded and vacuumed by the worker: the appended changes end in the counts, and the totals do not move', async () => {
    await Promise.all(Array.from({ length: 5 }, () => create('pm_card_visa')));
    await t.sql(`UPDATE payments SET status = 'failed' WHERE id = (SELECT id FROM payments WHERE merchant_id = $1 AND status = 'completed' LIMIT 1)`, [merchantId]);
    // Folded, then vacuumed: totals scan the changes whole, so the rows a fold moved must not stay behind
    // as dead ones (the table's pages are gone, not just its live rows).
    const changesBytes = async () => Number((await t.sql<{ bytes: string }>(`SELECT pg_relation_size('payment_count_changes')::text AS bytes`))[0]!.bytes);
    const deadline = Date.now() + 10_000;
    while ((await changesBytes()) > 0) {
      if (Date.now() > deadline) throw new Error('the fold job left count changes (or their dead rows) behind for 10 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    // Folded: the counts alone now equal count(*) for every key.
    const [unequal] = await t.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM (
         SELECT merchant_id, status, provider, currency, sum(n) AS n FROM payment_counts GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0) counted
       FULL JOIN (SELECT merchant_id, status, provider, currency, count(*) AS n FROM payments GROUP BY 1, 2, 3, 4) actual
         USING (merchant_id, status, provider, currency)
       WHERE counted.n IS DISTINCT FROM actual.n`,
    );
    expect(unequal!.n).toBe(0);
    await expectTotalsEqualCounts();
  });

  it('start again from zero after the payments are truncated', async () => {
    await t.sql('TRUNCATE payments CASCADE');
    const emptied = await t.http.get('/v1/payments').set('X-API-Key', key);
    expect(emptied.body.meta.total).toBe(0);
    expect((await create('pm_card_visa')).status).toBe(201);
    await expectTotalsEqualCounts();
  });
});
