import { Migration } from '@mikro-orm/migrations';

/** GET /v1/refunds without payment_id: a merchant's refunds newest first, by creation time. */
export class Migration20261127000501_refund_list_index extends Migration {
  override async up(): Promise<void> {
    this.addSql('CREATE INDEX refunds_merchant_created_idx ON refunds (merchant_id, created_at, id);');
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX refunds_merchant_created_idx;');
  }
}
