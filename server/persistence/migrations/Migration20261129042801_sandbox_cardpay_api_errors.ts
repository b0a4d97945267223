import { Migration } from '@mikro-orm/migrations';

/**
 * The cardpay simulator's api-errors control (sandbox/cardpay/api-errors.ts): how many of an account's
 * next API requests that change something fail with Stripe's 500 api_error after they ran, the 500
 * stored under their idempotency key as Stripe stores it. Per account (the sha256 of the secret key, as
 * every cardpay simulator object), in the database like every simulator state.
 */
export class Migration20261129042801_sandbox_cardpay_api_errors extends Migration {
  override async up(): Promise<void> {
    this.addSql('CREATE TABLE sandbox_cardpay_api_errors (account text PRIMARY KEY, remaining integer NOT NULL CHECK (remaining >= 0));');
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE sandbox_cardpay_api_errors;');
  }
}
