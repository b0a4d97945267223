import { Migration } from '@mikro-orm/migrations';

/** The merchant's own key-value pairs on a refund (`metadata` of POST /v1/refunds). A constant default: no table rewrite. */
export class Migration20261127000502_refund_metadata extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE refunds ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb;`);
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE refunds DROP COLUMN metadata;');
  }
}
