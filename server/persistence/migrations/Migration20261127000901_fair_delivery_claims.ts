import { Migration } from '@mikro-orm/migrations';

/**
 * The fair claim of due deliveries (delivery-store.ts, leaseDueDeliveries): the merchants with something
 * due, found by skipping through (merchant_id, next_attempt_at), each one's oldest due rows from the same
 * index, and each one's attempts in flight counted from the small set of leased rows.
 */
export class Migration20261127000901_fair_delivery_claims extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX webhook_deliveries_merchant_due_idx ON webhook_deliveries (merchant_id, next_attempt_at) WHERE status IN ('pending', 'retrying');`);
    this.addSql(`CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (merchant_id) WHERE status IN ('pending', 'retrying') AND lease_until IS NOT NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX webhook_deliveries_merchant_due_idx, webhook_deliveries_leased_idx;');
  }
}
