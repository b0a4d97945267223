import { Migration } from '@mikro-orm/migrations';

/**
 * payments.provider_account: the provider account (cardpay: the Stripe account's id) of the credentials a
 * payment was created under. A provider's idempotency keys and objects are per account: a payment is never
 * created again, looked up or judged absent through credentials of another account (ProviderGateway).
 * Null for payments created before (and under credentials whose account is not known): they behave as
 * before. A nullable column without a default: no table rewrite.
 */
export class Migration20261128009130_payment_provider_account extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE payments ADD COLUMN provider_account text NULL;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE payments DROP COLUMN provider_account;');
  }
}
