import { Migration } from '@mikro-orm/migrations';

/**
 * `payments_unresolved` counts a pending payment with no re-check ahead whether or not it carries a
 * `next_action`: one awaiting its customer keeps a check due until its provider's expiry (cardpay's
 * abandoned 3-D Secure is cancelled then), so with none ahead it is past that expiry and nothing of the
 * service will settle it (UNRESOLVED in sync-schedule.ts). The gauge's partial index follows the predicate.
 */
export class Migration20261129161000_unresolved_payments_with_next_action extends Migration {
  override async up(): Promise<void> {
    this.addSql('DROP INDEX payments_unresolved_idx;');
    this.addSql(`CREATE INDEX payments_unresolved_idx ON payments (provider) WHERE status = 'pending' AND next_sync_at IS NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX payments_unresolved_idx;');
    this.addSql(`CREATE INDEX payments_unresolved_idx ON payments (provider) WHERE status = 'pending' AND next_sync_at IS NULL AND next_action IS NULL;`);
  }
}
