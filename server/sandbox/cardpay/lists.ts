import type { Db } from './db.js';
import { invalidRequest, noSuch } from './errors.js';
import type { StripeObject } from './objects.js';
import type { Params } from './params.js';
import { optInt, optString } from './params.js';

/** The tables the simulator lists from, with the kind used in "No such …" errors. */
type Listable = { table: 'sandbox_cardpay_intents' | 'sandbox_cardpay_refunds' | 'sandbox_cardpay_payment_methods'; kind: string };

export interface ListQuery<Row> {
  source: Listable;
  /** SQL conditions (ANDed) with their parameters, besides the account. */
  where: string[];
  args: unknown[];
  toObject: (row: Row) => StripeObject;
  url: string;
}

/**
 * Stripe's list protocol: newest first, `limit` 1–100 (default 10), `starting_after` / `ending_before`
 * cursors naming an object of the list, `has_more`. Order is the creation sequence, descending, so
 * it is exact even when several objects share a second.
 */
export async function listPage<Row extends { id: string }>(db: Db, account: string, params: Params, q: ListQuery<Row>) {
  const limit = Number(optInt(params, 'limit') ?? 10n);
  if (limit < 1 || limit > 100) throw invalidRequest('This value must be less than or equal to 100.', 'limit', 'parameter_invalid_integer');
  const after = optString(params, 'starting_after');
  const before = optString(params, 'ending_before');
  if (after && before) throw invalidRequest('You may only specify one of these parameters: ending_before, starting_after.', 'starting_after');
  const where = ['account = ?', ...q.where];
  const args: unknown[] = [account, ...q.args];
  const cursor = after ?? before;
  if (cursor) {
    const [row] = await db.query<{ seq: string }>(`SELECT seq FROM ${q.source.table} WHERE id = ? AND account = ?`, [cursor, account]);
    if (!row) throw noSuch(q.source.kind, cursor, after ? 'starting_after' : 'ending_before');
    where.push(after ? 'seq < ?' : 'seq > ?');
    args.push(row.seq);
  }
  // ending_before pages backwards: fetch ascending, then show newest first like every page.
  const order = before ? 'seq ASC' : 'seq DESC';
  const rows = await db.query<Row>(`SELECT * FROM ${q.source.table} WHERE ${where.join(' AND ')} ORDER BY ${order} LIMIT ?`, [...args, limit + 1]);
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  if (before) page.reverse();
  return { object: 'list', data: page.map(q.toObject), has_more: hasMore, url: q.url };
}
