import { Migration } from '@mikro-orm/migrations';

/** The merchant's own key-value pairs on a payment (`metadata` of the create request). A constant default: no table rewrite. */
export class Migration20261127000201_payment_metadata extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE payments ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb;`);
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE payments DROP COLUMN metadata;');
  }
}
