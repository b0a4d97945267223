import { Migration } from '@mikro-orm/migrations';

/**
 * cardpay simulator: the intent a PaymentMethod not attached to a Customer was first confirmed with. Such a
 * PaymentMethod may not be used with another intent, nor attached, as at Stripe. Nullable, no default: no
 * table rewrite.
 */
export class Migration20261127000801_sandbox_cardpay_single_use_payment_methods extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_cardpay_payment_methods ADD COLUMN used_with_intent text NULL;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_cardpay_payment_methods DROP COLUMN used_with_intent;');
  }
}
