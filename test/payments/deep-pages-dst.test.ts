import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DEEP_PAGE_OFFSET } from '../../server/domain/payments/payment-pages.js';
import { startTestService, type TestService } from '../support/service.js';

// Weeks are absolute 168-hour bins (Monday 00:00 UTC), whatever the session's TimeZone. Nothing sets
// the service's TimeZone: it is the server's (an embedded cluster takes the host's). In a zone with
// daylight saving, a week's end computed as `week + interval '7 days'` is 169 hours on in the week of
// the autumn change and 167 in the spring one: a deep page starting in that week then repeats (or
// skips) an hour of the page before it. One payment a minute across each 2026–27 change in New York.
const PAGE_SIZE = 100;
let t: TestService;

/** A merchant with one payment a minute over [from, to). */
async function merchantWithPaymentEveryMinute(name: string, from: string, to: string): Promise<{ merchantId: string; key: string; rows: number }> {
  const { merchantId, apiKey } = await t.createMerchant(name);
  const [seeded] = await t.sql<{ n: string }>(
    `WITH ins AS (
       INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash, created_at)
       SELECT gen_random_uuid(), $1, 'cardpay', 'completed', 100, 'USD', 1, 'dst-' || k, 'dst-' || k, 'seed', m
         FROM (SELECT m, extract(epoch FROM m)::bigint AS k
                 FROM generate_series($2::timestamptz, $3::timestamptz - interval '1 minute', interval '1 minute') m) minutes
       RETURNING 1)
     SELECT count(*)::text AS n FROM ins`,
    [merchantId, from, to],
  );
  return { merchantId, key: apiKey, rows: Number(seeded?.n) };
}

/** The page as `ORDER BY created_at DESC, id DESC OFFSET … LIMIT …` has it. */
async function offsetPage(merchantId: string, page: number): Promise<string[]> {
  const rows = await t.sql<{ id: string }>(
    'SELECT id FROM payments WHERE merchant_id = $1 ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3',
    [merchantId, (page - 1) * PAGE_SIZE, PAGE_SIZE],
  );
  return rows.map((r) => r.id);
}

async function expectPagesLikeOffset(merchant: { merchantId: string; key: string }, pages: number[]): Promise<void> {
  for (const page of pages) {
    expect((page - 1) * PAGE_SIZE).toBeGreaterThanOrEqual(DEEP_PAGE_OFFSET);
    const res = await t.http.get('/v1/payments').query({ page, page_size: PAGE_SIZE }).set('X-API-Key', merchant.key);
    expect(res.status).toBe(200);
    const ids = (res.body.data as { id: string }[]).map((p) => p.id);
    expect({ page, ids }).toEqual({ page, ids: await offsetPage(merchant.merchantId, page) });
  }
}

beforeAll(async () => {
  t = await startTestService({}, { databaseSettings: { TimeZone: 'America/New_York' } });
}, 60_000);
afterAll(async () => t?.stop());

describe('deep pages of GET /v1/payments with a session TimeZone that has daylight saving', () => {
  it('the service’s sessions are in New York time', async () => {
    expect(await t.sql(`SELECT current_setting('TimeZone') AS tz`)).toEqual([{ tz: 'America/New_York' }]);
  });

  it('are exactly the OFFSET pages across the autumn change (2026-11-01 06:00 UTC, a 169-hour week)', async () => {
    // 16 days: the 14 newest (20,160 rows) are later weeks, so pages 203–230 start in the week of the change.
    const m = await merchantWithPaymentEveryMinute('Autumn Shop', '2026-10-31T00:00:00Z', '2026-11-16T00:00:00Z');
    expect(m.rows).toBe(16 * 1440);
    await expectPagesLikeOffset(m, [202, 203, 204, 215, 230]);
  }, 60_000);

  it('are exactly the OFFSET pages across the spring change (2027-03-14 07:00 UTC, a 167-hour week)', async () => {
    // The week of the change is 2027-03-08–15; the 14 days after it are later weeks.
    const m = await merchantWithPaymentEveryMinute('Spring Shop', '2027-03-13T00:00:00Z', '2027-03-29T00:00:00Z');
    expect(m.rows).toBe(16 * 1440);
    await expectPagesLikeOffset(m, [202, 203, 204, 215, 230]);
  }, 60_000);
});
