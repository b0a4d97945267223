import { Migration } from '@mikro-orm/migrations';

/**
 * The cardpay simulator drops an account's idempotency keys older than 24 hours with every keyed
 * request: by (account, created_at), that is an index range, not a walk over all the account's keys.
 */
export class Migration20261123001201_sandbox_cardpay_idempotency_expiry extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX sandbox_cardpay_idempotency_expiry_idx ON sandbox_cardpay_idempotency (account, created_at);`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP INDEX sandbox_cardpay_idempotency_expiry_idx;`);
  }
}
