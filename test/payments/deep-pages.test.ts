import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

// A page far into a merchant's payments (past DEEP_PAGE_OFFSET rows) is found through the week counts
// instead of an OFFSET over every newer row: it must be exactly the page an OFFSET returns — same rows,
// same order (ties on created_at broken by id) — after inserts, status changes and deletes.
let t: TestService;
let merchantId: string;
let key: string;
const ROWS = 60_000;

/** The page as `ORDER BY created_at DESC, id DESC OFFSET … LIMIT …` has it. */
async function offsetPage(page: number, pageSize: number, status?: string): Promise<string[]> {
  const rows = await t.sql<{ id: string }>(
    `SELECT id FROM payments WHERE merchant_id = $1 ${status ? 'AND status = $4' : ''}
      ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3`,
    [merchantId, (page - 1) * pageSize, pageSize, ...(status ? [status] : [])],
  );
  return rows.map((r) => r.id);
}

async function expectPagesLikeOffset(cases: { page: number; page_size: number; status?: string }[]): Promise<void> {
  for (const c of cases) {
    const res = await t.http.get('/v1/payments').query(c).set('X-API-Key', key);
    expect(res.status).toBe(200);
    const ids = (res.body.data as { id: string }[]).map((p) => p.id);
    expect({ ...c, ids }).toEqual({ ...c, ids: await offsetPage(c.page, c.page_size, c.status) });
  }
}

beforeAll(async () => {
  t = await startTestService();
  ({ merchantId, apiKey: key } = await t.createMerchant('Deep Pages Shop'));
  // 60,000 payments over 20 weeks; every tenth shares its created_at with the next (ties across pages).
  await t.sql(
    `INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash, created_at)
     SELECT gen_random_uuid(), $1, 'cardpay', CASE WHEN g % 4 = 0 THEN 'failed' ELSE 'completed' END, 100, 'USD', 1, 'deep-' || g, 'deep-' || g, 'seed',
            now() - interval '140 days' * ((g - g % 10 / 9) / ${ROWS}.0)
       FROM generate_series(1, ${ROWS}) g`,
    [merchantId],
  );
}, 120_000);
afterAll(async () => t.stop());

describe('deep pages of GET /v1/payments', () => {
  it('are exactly the pages an OFFSET gives, unfiltered and by status, to the last and past it', async () => {
    const cases = [
      { page: 201, page_size: 100 },
      { page: 150, page_size: 100 },
      { page: 450, page_size: 100 },
      { page: 3530, page_size: 17 },
      { page: 600, page_size: 100 },
      { page: 601, page_size: 100 },
      { page: 401, page_size: 50, status: 'completed' },
      { page: 900, page_size: 50, status: 'completed' },
      { page: 250, page_size: 50, status: 'failed' },
    ];
    await expectPagesLikeOffset(cases);
    const total = (await t.http.get('/v1/payments').set('X-API-Key', key)).body.meta.total;
    expect(total).toBe(ROWS);
  }, 60_000);

  it('stay exact after status changes, deletes and new payments', async () => {
    await t.sql(`UPDATE payments SET status = 'refunded' WHERE merchant_id = $1 AND reference LIKE 'deep-1%' AND status = 'completed'`, [merchantId]);
    await t.sql(`DELETE FROM payments WHERE merchant_id = $1 AND reference LIKE 'deep-22%'`, [merchantId]);
    await t.sql(
      `INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash)
       SELECT gen_random_uuid(), $1, 'cardpay', 'completed', 100, 'USD', 1, 'new-' || g, 'new-' || g, 'seed' FROM generate_series(1, 500) g`,
      [merchantId],
    );
    await expectPagesLikeOffset([
      { page: 201, page_size: 100 },
      { page: 500, page_size: 100 },
      { page: 401, page_size: 50, status: 'completed' },
      { page: 701, page_size: 50, status: 'completed' },
      { page: 61, page_size: 100, status: 'refunded' },
    ]);
  }, 60_000);

  it('a payment’s created_at cannot be rewritten (the week counts rely on it)', async () => {
    await expect(t.sql(`UPDATE payments SET created_at = now() WHERE merchant_id = $1 AND reference = 'deep-5'`, [merchantId])).rejects.toThrow(/never change/);
  });
});
