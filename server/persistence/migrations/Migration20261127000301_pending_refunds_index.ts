import { Migration } from '@mikro-orm/migrations';

/** Pending refunds, for the `refunds_pending_oldest_seconds` gauge at every scrape: a small partial index, not a scan of every refund. */
export class Migration20261127000301_pending_refunds_index extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX refunds_pending_idx ON refunds (created_at) WHERE status = 'pending';`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX refunds_pending_idx;');
  }
}
