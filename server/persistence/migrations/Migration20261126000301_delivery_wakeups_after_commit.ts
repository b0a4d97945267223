import { Migration } from '@mikro-orm/migrations';
import { Migration20261123001301_delivery_due_notify } from './Migration20261123001301_delivery_due_notify.js';

/**
 * Workers are woken by the writer after its commit (AgendaDeliveryQueue.enqueue, folded per process),
 * no longer by a NOTIFY inside the writer's transaction: PostgreSQL takes a cluster-wide lock for a
 * transaction's notifications at its commit and holds it until the commit has reached the disk, so
 * notifying commits could not share a flush. Replaces migration 20261123001301.
 */
export class Migration20261126000301_delivery_wakeups_after_commit extends Migration {
  override async up(): Promise<void> {
    this.addSql(`DROP TRIGGER webhook_deliveries_due_on_insert ON webhook_deliveries; DROP TRIGGER webhook_deliveries_due_on_requeue ON webhook_deliveries;`);
    this.addSql(`DROP FUNCTION webhook_deliveries_notify_due();`);
  }

  /** Back to what migration 20261123001301 created, exactly as it created it. */
  override async down(): Promise<void> {
    const earlier = new Migration20261123001301_delivery_due_notify(this.driver, this.config);
    await earlier.up();
    for (const sql of earlier.getQueries()) this.addSql(sql);
  }
}
