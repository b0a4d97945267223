import { Migration } from '@mikro-orm/migrations';

/**
 * Indexes for GET /v1/payments at a million payments per merchant (measured with EXPLAIN ANALYZE by
 * `npm run bench`; README "Performance"). Each ends in (created_at DESC, id DESC), the list order, so a
 * page is read in index order and its count — and the deferred join's id sub-query — are index-only:
 * - provider, and provider + status: were a bitmap AND of two indexes plus heap reads for the count;
 * - currency, and currency + min/max amount: the count was a sequential scan of the table;
 * - status: the old (merchant_id, status, created_at) index lacked id, so deep status pages read the heap.
 * On a live database with many rows, create these CONCURRENTLY by hand first (this runs in a transaction).
 */
export class Migration20261122000501_payment_list_indexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX payments_merchant_provider_status_created_idx ON payments (merchant_id, provider, status, created_at DESC, id DESC);`);
    this.addSql(`CREATE INDEX payments_merchant_currency_amount_idx ON payments (merchant_id, currency, amount);`);
    this.addSql(`CREATE INDEX payments_merchant_status_created_id_idx ON payments (merchant_id, status, created_at DESC, id DESC);`);
    this.addSql(`DROP INDEX payments_merchant_status_created_idx;`);
  }

  override async down(): Promise<void> {
    this.addSql(`CREATE INDEX payments_merchant_status_created_idx ON payments (merchant_id, status, created_at DESC);`);
    this.addSql(`DROP INDEX payments_merchant_status_created_id_idx, payments_merchant_currency_amount_idx, payments_merchant_provider_status_created_idx;`);
  }
}
