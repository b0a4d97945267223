import { Migration } from '@mikro-orm/migrations';

/**
 * Pending payments the status sync has stopped re-checking (its schedule ran out, so `next_sync_at` is
 * NULL while the payment is still pending) and that wait for nothing from the customer (no redirect to
 * approve or authenticate): counted for the `payments_unresolved` gauge at every scrape, from this
 * small partial index rather than from all payments.
 */
export class Migration20261127000101_unresolved_payments_index extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX payments_unresolved_idx ON payments (provider) WHERE status = 'pending' AND next_sync_at IS NULL AND next_action IS NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX payments_unresolved_idx;');
  }
}
