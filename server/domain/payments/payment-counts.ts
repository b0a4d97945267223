import type { EntityManager } from '@mikro-orm/postgresql';

/** The filters the counters can answer; anything else (amounts, dates, search) is counted on the rows. */
export interface CountKey {
  merchantId: string;
  status?: string;
  provider?: string;
  currency?: string;
}

/**
 * The exact number of the merchant's payments matching the key, from `payment_counts` (kept by triggers
 * on payments in the writing transaction; see Migration20261123000902_payment_counts): a sum over at most
 * 5 statuses × 3 providers × currencies × 16 stripes rows, whatever the number of payments.
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
    `select coalesce(sum(n), 0)::text as total from payment_counts where ${conditions.join(' and ')}`,
    params,
  );
  return Number(rows[0]?.total ?? 0);
}
