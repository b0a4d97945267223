import { Migration } from '@mikro-orm/migrations';

/**
 * The status writer's audit (issue 10): a transition row may concern a refund (subject, refund_id), and a provider report
 * refused by the integrity check keeps both amounts. The payment keeps its refused reports so the
 * merchant sees them on GET /v1/payments/{id} (`integrity`).
 */
export class Migration20261123000101_integrity_audit extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      ALTER TABLE payment_transitions
        ADD COLUMN subject text NOT NULL DEFAULT 'payment' CHECK (subject IN ('payment', 'refund')),
        ADD COLUMN refund_id uuid NULL REFERENCES refunds(id) ON DELETE CASCADE,
        ADD COLUMN expected_amount_minor bigint NULL,
        ADD COLUMN expected_currency char(3) NULL,
        ADD COLUMN reported_amount_minor bigint NULL,
        ADD COLUMN reported_currency text NULL;`);
    this.addSql(`ALTER TABLE payments ADD COLUMN integrity_mismatches jsonb NOT NULL DEFAULT '[]'::jsonb;`);
  }

  override async down(): Promise<void> {
    this.addSql(`ALTER TABLE payments DROP COLUMN integrity_mismatches;`);
    this.addSql(`
      ALTER TABLE payment_transitions DROP COLUMN subject, DROP COLUMN refund_id, DROP COLUMN expected_amount_minor, DROP COLUMN expected_currency,
        DROP COLUMN reported_amount_minor, DROP COLUMN reported_currency;`);
  }
}
