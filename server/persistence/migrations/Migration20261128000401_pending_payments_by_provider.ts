import { Migration } from '@mikro-orm/migrations';

/**
 * A refund notification that names a payment only by a fact learned late (walletpay: the capture id) and
 * resolves to none is refused for a resend while a pending payment of the provider could own it
 * (InboundPipeline): the pending payments of one provider and currency, found without reading the table.
 */
export class Migration20261128000401_pending_payments_by_provider extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX IF NOT EXISTS payments_pending_provider_idx ON payments (provider, currency, amount_minor) WHERE status = 'pending';`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP INDEX IF EXISTS payments_pending_provider_idx;`);
  }
}
