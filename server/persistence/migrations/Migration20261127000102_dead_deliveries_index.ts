import { Migration } from '@mikro-orm/migrations';

/**
 * Dead deliveries, for the `webhook_deliveries{status="dead"}` gauge at every scrape: counted from this
 * partial index (a delivery enters it only when it dies) instead of by a scan of every delivery kept
 * for EVENT_RETENTION. Pending and retrying ones are counted from webhook_deliveries_due_idx.
 */
export class Migration20261127000102_dead_deliveries_index extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (created_at) WHERE status = 'dead';`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX webhook_deliveries_dead_idx;');
  }
}
