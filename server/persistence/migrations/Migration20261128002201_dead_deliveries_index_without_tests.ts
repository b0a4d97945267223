import { Migration } from '@mikro-orm/migrations';

/**
 * The `webhook_deliveries{status="dead"}` gauge leaves out failed `webhook.test` events (a merchant
 * testing an endpoint not up yet is not an event lost): its partial index takes the same condition,
 * so the count still reads only this index, not every dead row's table page.
 */
export class Migration20261128002201_dead_deliveries_index_without_tests extends Migration {
  override async up(): Promise<void> {
    this.addSql('DROP INDEX webhook_deliveries_dead_idx;');
    this.addSql(`CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (created_at) WHERE status = 'dead' AND event_type <> 'webhook.test';`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX webhook_deliveries_dead_idx;');
    this.addSql(`CREATE INDEX webhook_deliveries_dead_idx ON webhook_deliveries (created_at) WHERE status = 'dead';`);
  }
}
