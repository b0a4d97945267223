import { Migration } from '@mikro-orm/migrations';

/**
 * GET /v1/events lists a merchant's events newest first; the prune job finds events past the
 * retention period by age; POST /v1/webhooks/recover and the dashboard's delivery log filter a
 * merchant's deliveries by status within a window.
 */
export class Migration20261123000601_events_api extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX IF NOT EXISTS events_merchant_created_idx ON events (merchant_id, created_at DESC, id DESC);`);
    this.addSql(`CREATE INDEX IF NOT EXISTS events_created_idx ON events (created_at);`);
    this.addSql(`CREATE INDEX IF NOT EXISTS webhook_deliveries_event_idx ON webhook_deliveries (event_id);`);
    this.addSql(`CREATE INDEX IF NOT EXISTS webhook_deliveries_merchant_status_created_idx ON webhook_deliveries (merchant_id, status, created_at);`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP INDEX IF EXISTS events_merchant_created_idx, events_created_idx, webhook_deliveries_event_idx, webhook_deliveries_merchant_status_created_idx;`);
  }
}
