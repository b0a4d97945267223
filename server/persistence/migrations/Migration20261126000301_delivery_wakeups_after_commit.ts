import { Migration } from '@mikro-orm/migrations';

/**
 * Workers are woken by the writer after its commit (AgendaDeliveryQueue.enqueue, folded per process),
 * no longer by a NOTIFY inside the writer's transaction: PostgreSQL takes a cluster-wide lock for a
 * transaction's notifications at its commit and holds it until the commit has reached the disk, so every
 * payment creation's commit waited for the previous one's flush. Replaces migration 20261123001301.
 */
export class Migration20261126000301_delivery_wakeups_after_commit extends Migration {
  override async up(): Promise<void> {
    this.addSql(`DROP TRIGGER webhook_deliveries_due_on_insert ON webhook_deliveries; DROP TRIGGER webhook_deliveries_due_on_requeue ON webhook_deliveries;`);
    this.addSql(`DROP FUNCTION webhook_deliveries_notify_due();`);
  }

  override async down(): Promise<void> {
    this.addSql(`
      CREATE FUNCTION webhook_deliveries_notify_due() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        PERFORM pg_notify('webhook_deliveries_due', '');
        RETURN NULL;
      END
      $fn$;`);
    this.addSql(`CREATE TRIGGER webhook_deliveries_due_on_insert AFTER INSERT ON webhook_deliveries FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_notify_due();`);
    this.addSql(`
      CREATE TRIGGER webhook_deliveries_due_on_requeue AFTER UPDATE OF status ON webhook_deliveries FOR EACH ROW
        WHEN (NEW.status = 'pending' AND OLD.status IS DISTINCT FROM 'pending')
        EXECUTE FUNCTION webhook_deliveries_notify_due();`);
  }
}
