import { Migration } from '@mikro-orm/migrations';
import { dropInvalidIndexSql } from './Migration20261128002201_dead_deliveries_index_without_tests.js';

/**
 * `payments_unresolved` counts a pending payment with no re-check ahead whether or not it carries a
 * `next_action`: one awaiting its customer keeps a check due until its provider's expiry (cardpay's
 * abandoned 3-D Secure is cancelled then), so with none ahead it is past that expiry and nothing of the
 * service will settle it (UNRESOLVED in sync-schedule.ts). The gauge's partial index follows the predicate.
 * As 20261128002201: the new index is built under another name first (pre-buildable CONCURRENTLY by hand on
 * a large `payments`, README "Upgrading"), then the old one dropped and the new one renamed.
 */
export class Migration20261129161000_unresolved_payments_with_next_action extends Migration {
  override async up(): Promise<void> {
    this.addSql(dropInvalidIndexSql('payments_unresolved_new_idx'));
    this.addSql(`CREATE INDEX IF NOT EXISTS payments_unresolved_new_idx ON payments (provider) WHERE status = 'pending' AND next_sync_at IS NULL;`);
    this.addSql('DROP INDEX payments_unresolved_idx;');
    this.addSql('ALTER INDEX payments_unresolved_new_idx RENAME TO payments_unresolved_idx;');
  }

  override async down(): Promise<void> {
    this.addSql(`CREATE INDEX payments_unresolved_old_idx ON payments (provider) WHERE status = 'pending' AND next_sync_at IS NULL AND next_action IS NULL;`);
    this.addSql('DROP INDEX payments_unresolved_idx;');
    this.addSql('ALTER INDEX payments_unresolved_old_idx RENAME TO payments_unresolved_idx;');
  }
}
