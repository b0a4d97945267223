import { Migration } from '@mikro-orm/migrations';

/**
 * cardpay simulator: a webhook endpoint's `api_version` (the version its events are rendered in; null
 * means the account's default), stored and echoed as Stripe does. A nullable column: no table rewrite.
 */
export class Migration20261128009001_sandbox_cardpay_endpoint_api_version extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_cardpay_webhook_endpoints ADD COLUMN api_version text NULL;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE sandbox_cardpay_webhook_endpoints DROP COLUMN api_version;');
  }
}
