import { Migration } from '@mikro-orm/migrations';

/**
 * cardpay simulator: a creation sequence so lists are newest-first exactly (`created` is in whole
 * seconds), and a refund's failure reason (refunds may fail after they were created).
 */
export class Migration20261123000701_sandbox_cardpay_fidelity extends Migration {
  override async up(): Promise<void> {
    for (const table of ['sandbox_cardpay_intents', 'sandbox_cardpay_refunds', 'sandbox_cardpay_payment_methods']) {
      this.addSql(`ALTER TABLE ${table} ADD COLUMN seq bigserial NOT NULL;`);
      this.addSql(`CREATE INDEX ${table}_list_idx ON ${table} (account, seq DESC);`);
    }
    this.addSql(`ALTER TABLE sandbox_cardpay_refunds ADD COLUMN failure_reason text NULL;`);
    this.addSql(`CREATE INDEX sandbox_cardpay_refunds_charge_idx ON sandbox_cardpay_refunds (charge);`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP INDEX sandbox_cardpay_refunds_charge_idx; ALTER TABLE sandbox_cardpay_refunds DROP COLUMN failure_reason;`);
    for (const table of ['sandbox_cardpay_intents', 'sandbox_cardpay_refunds', 'sandbox_cardpay_payment_methods']) {
      this.addSql(`DROP INDEX ${table}_list_idx; ALTER TABLE ${table} DROP COLUMN seq;`);
    }
  }
}
