import type { EntityManager } from '@mikro-orm/postgresql';

/** The filters the counters can answer; anything else (amounts, dates, search) is counted on the rows. */
export interface CountKey {
  merchantId: string;
  status?: string;
  provider?: string;
  currency?: string;
}

/**
 * The exact number of the merchant's payments matching the key, from the view `payment_count_totals`:
 * the folded counts (`payment_counts`) plus the changes not folded yet (`payment_count_changes`, appended
 * by triggers on payments in the writing transaction; Migration20261126000401_payment_count_changes), in
 * one snapshot. A sum over a few hundred rows and a few seconds of changes, whatever the number of payments.
 */
export async function countPayments(em: EntityManager, key: CountKey): Promise<number> {
  const conditions = ['merchant_id = ?'];
  const params: unknown[] = [key.merchantId];
  for (const [column, value] of [['status', key.status], ['provider', key.provider], ['currency', key.currency]] as const) {
    if (value === undefined) continue;
    conditions.push(`${column} = ?`);
    params.push(value);
  }
  const rows = await em.execute<{ total: string }[]>(
    `select coalesce(sum(n), 0)::text as total from payment_count_totals where ${conditions.join(' and ')}`,
    params,
  );
  return Number(rows[0]?.total ?? 0);
}

/**
 * Moves the appended count changes into the folded counts (one statement; folds run one at a time) and
 * returns how many changes it moved. Totals read the same before and after: it only keeps the changes few.
 * Then vacuums the changes: readers scan that table whole, dead rows included, and a fold leaves every row
 * it moved dead (a million of them, after a bulk import, made each total 35 ms until autovacuum came).
 * Every time, not only after moving rows: rows a transaction older than the fold could still see are not
 * removable yet, and a later vacuum (an empty table's costs next to nothing) removes them.
 */
export async function foldPaymentCountChanges(em: EntityManager): Promise<number> {
  const rows = await em.execute<{ moved: string }[]>('select fold_payment_count_changes()::text as moved');
  await em.execute('vacuum payment_count_changes');
  return Number(rows[0]?.moved ?? 0);
}
