import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Below this many rows to skip, a plain OFFSET on the list index is as fast as the week counts (a few
 * ms); above it the week counts find the page.
 */
export const DEEP_PAGE_OFFSET = 20_000;

/**
 * The ids of one page of a merchant's payments (newest first: created_at DESC, id DESC), optionally of
 * one status, `offset` rows in — without skipping `offset` index entries. The week counts (the view
 * payment_week_totals: kept in the writing transaction by triggers, folded or not yet) say which week
 * holds row `offset` and how many newer rows come before that week; the page is read from that week's end,
 * skipping fewer than one week's rows. One statement, so the counts and the rows are one snapshot: the
 * page is exactly what `ORDER BY … OFFSET offset LIMIT limit` returns. A week is 168 hours (payment_week's
 * bins): '7 days' added to a timestamptz is 7 calendar days in the session's TimeZone, 167 or 169 hours
 * across a daylight-saving change, and the page would start an hour off.
 */
export async function deepPageIds(em: EntityManager, merchantId: string, status: string | undefined, offset: number, limit: number): Promise<string[]> {
  const statusFilter = status === undefined ? '' : 'AND status = ?';
  const params = (extra: unknown[]) => (status === undefined ? [merchantId, ...extra] : [merchantId, status, ...extra]);
  const rows = await em.execute<{ id: string }[]>(
    `WITH weeks AS (
       SELECT week, sum(n) AS n FROM payment_week_totals WHERE merchant_id = ? ${statusFilter} GROUP BY week),
     running AS (
       SELECT week, n, coalesce(sum(n) OVER (ORDER BY week DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS newer FROM weeks),
     start AS (
       SELECT week + interval '168 hours' AS week_end, ?::bigint - newer AS skip FROM running
        WHERE newer <= ?::bigint AND newer + n > ?::bigint)
     SELECT page.id FROM start, LATERAL (
       SELECT id, created_at FROM payments
        WHERE merchant_id = ? ${statusFilter} AND created_at < start.week_end
        ORDER BY created_at DESC, id DESC OFFSET start.skip LIMIT ?) page
     ORDER BY page.created_at DESC, page.id DESC`,
    [...params([]), offset, offset, offset, ...params([limit])],
  );
  return rows.map((r) => r.id);
}
