import { Migration } from '@mikro-orm/migrations';

/**
 * The fair claim (delivery-store.ts, leaseDueDeliveries) takes a merchant's first attempts and its
 * retried or recovered deliveries in turns, each oldest first: webhook_deliveries_merchant_due_idx gets
 * the class (least(attempts, 1)) between merchant and due time, so each class's oldest are read without
 * passing over the other's (a recovered backlog of thousands, due before a new event). Its leading
 * merchant_id still serves the skip through the merchants with something due.
 */
export class Migration20261128002202_delivery_claim_first_attempts extends Migration {
  override async up(): Promise<void> {
    this.addSql('DROP INDEX webhook_deliveries_merchant_due_idx;');
    this.addSql(`CREATE INDEX webhook_deliveries_merchant_due_idx ON webhook_deliveries (merchant_id, least(attempts, 1), next_attempt_at) WHERE status IN ('pending', 'retrying');`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX webhook_deliveries_merchant_due_idx;');
    this.addSql(`CREATE INDEX webhook_deliveries_merchant_due_idx ON webhook_deliveries (merchant_id, next_attempt_at) WHERE status IN ('pending', 'retrying');`);
  }
}
