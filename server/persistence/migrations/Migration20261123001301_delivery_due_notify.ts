import { Migration } from '@mikro-orm/migrations';

/** The channel workers LISTEN on (DELIVERIES_DUE_CHANNEL of server/jobs/delivery-queue.ts; a migration keeps its own copy). */
const DELIVERIES_DUE_CHANNEL = 'webhook_deliveries_due';

/**
 * A delivery that becomes sendable now wakes the workers at the commit that makes it so, with no
 * extra round trip for the writer: PostgreSQL sends a NOTIFY raised inside a transaction only when
 * it commits (never on rollback), and folds identical ones of a transaction into one.
 * - a new outbox row (payment change + event + delivery, or a test event): one NOTIFY per INSERT
 *   statement, whatever the number of rows;
 * - a delivery put back in the queue (POST /v1/webhooks/recover sets it `pending`): the row trigger's
 *   WHEN is checked in C, so other updates (an attempt's result) call no function.
 * The payload is empty: a worker claims whatever is due, so the message only says "look now".
 */
export class Migration20261123001301_delivery_due_notify extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE FUNCTION webhook_deliveries_notify_due() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        PERFORM pg_notify('${DELIVERIES_DUE_CHANNEL}', '');
        RETURN NULL;
      END
      $fn$;`);
    this.addSql(`CREATE TRIGGER webhook_deliveries_due_on_insert AFTER INSERT ON webhook_deliveries FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_notify_due();`);
    this.addSql(`
      CREATE TRIGGER webhook_deliveries_due_on_requeue AFTER UPDATE OF status ON webhook_deliveries FOR EACH ROW
        WHEN (NEW.status = 'pending' AND OLD.status IS DISTINCT FROM 'pending')
        EXECUTE FUNCTION webhook_deliveries_notify_due();`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TRIGGER webhook_deliveries_due_on_insert ON webhook_deliveries; DROP TRIGGER webhook_deliveries_due_on_requeue ON webhook_deliveries;`);
    this.addSql(`DROP FUNCTION webhook_deliveries_notify_due();`);
  }
}
