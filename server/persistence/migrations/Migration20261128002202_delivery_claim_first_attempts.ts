import { Migration } from '@mikro-orm/migrations';
import { dropInvalidIndexSql } from './Migration20261128002201_dead_deliveries_index_without_tests.js';

/**
 * The fair claim (delivery-store.ts, leaseDueDeliveries) takes a merchant's first attempts and its
 * retried or recovered deliveries in turns, each oldest first: webhook_deliveries_merchant_due_idx gets
 * the class (least(attempts, 1)) between merchant and due time, so each class's oldest are read without
 * passing over the other's (a recovered backlog of thousands, due before a new event). Its leading
 * merchant_id still serves the skip through the merchants with something due.
 * The new index is built first under another name, then the old one dropped and the new one renamed:
 * the DROP's ACCESS EXCLUSIVE lock on webhook_deliveries (every read, claim and payment's outbox insert
 * waits on it) is then taken after the build, not before it (it is held until the migrations' commit:
 * they run all or nothing in one transaction, so a migration after this one in the same run still runs
 * under it). Likewise 20261128002201's DROP, when both are applied together, is held through this build:
 * building this index CONCURRENTLY by hand first (below) avoids that too. The build itself
 * still holds writes (SHARE lock) while it runs: on a live database with many deliveries, create
 * webhook_deliveries_merchant_due_new_idx CONCURRENTLY by hand first (this runs in a transaction), with
 * the definition below; the migration then only drops and renames. An INVALID one a cancelled hand
 * build left is dropped and built again (as in 20261128002201).
 */
export class Migration20261128002202_delivery_claim_first_attempts extends Migration {
  override async up(): Promise<void> {
    this.addSql(dropInvalidIndexSql('webhook_deliveries_merchant_due_new_idx'));
    this.addSql(`CREATE INDEX IF NOT EXISTS webhook_deliveries_merchant_due_new_idx ON webhook_deliveries (merchant_id, least(attempts, 1), next_attempt_at) WHERE status IN ('pending', 'retrying');`);
    this.addSql('DROP INDEX webhook_deliveries_merchant_due_idx;');
    this.addSql('ALTER INDEX webhook_deliveries_merchant_due_new_idx RENAME TO webhook_deliveries_merchant_due_idx;');
  }

  override async down(): Promise<void> {
    this.addSql(`CREATE INDEX webhook_deliveries_merchant_due_old_idx ON webhook_deliveries (merchant_id, next_attempt_at) WHERE status IN ('pending', 'retrying');`);
    this.addSql('DROP INDEX webhook_deliveries_merchant_due_idx;');
    this.addSql('ALTER INDEX webhook_deliveries_merchant_due_old_idx RENAME TO webhook_deliveries_merchant_due_idx;');
  }
}
