import { Migration } from '@mikro-orm/migrations';

/**
 * The cardpay simulator's 3-D Secure page is a capability URL, as Stripe's (`…?client_secret=src_client_secret_…`):
 * `authentication_secret` is the secret of the intent's last confirmation that asked for 3-D Secure, which
 * the page and its complete/fail require besides the public `pi_…` id. Intents awaiting 3-D Secure before
 * this migration have none: their pages answer 404 (confirm them again for a new page).
 */
export class Migration20261129151000_sandbox_cardpay_authentication_secret extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_cardpay_intents ADD COLUMN authentication_secret text NULL;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_cardpay_intents DROP COLUMN authentication_secret;');
  }
}
