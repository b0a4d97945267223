import { Migration } from '@mikro-orm/migrations';

/**
 * cardpay simulator: an intent's `setup_future_usage`, and whether a PaymentMethod was set up for future
 * payments by one (then `pm_card_authenticationRequiredOnSetup` is charged off-session without
 * authentication, as at Stripe). A nullable column and a constant default: no table rewrite.
 */
export class Migration20261128000901_sandbox_cardpay_card_setup extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_cardpay_intents ADD COLUMN setup_future_usage text NULL;');
    this.addSql('ALTER TABLE sandbox_cardpay_payment_methods ADD COLUMN set_up boolean NOT NULL DEFAULT false;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_cardpay_intents DROP COLUMN setup_future_usage;');
    this.addSql('ALTER TABLE sandbox_cardpay_payment_methods DROP COLUMN set_up;');
  }
}
