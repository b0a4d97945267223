import { Migration } from '@mikro-orm/migrations';

/**
 * A refund notification that names a payment only by a fact learned late (walletpay: the capture id) and
 * resolves to none is refused for a resend while a pending payment of the provider could own it
 * (InboundPipeline): the pending payments of one provider and currency, found without reading the table.
 * Only walletpay's notifications do so; an index of every pending payment would cost each card payment's
 * creation one more index entry (issue 11's hot path) for a lookup that never asks about cardpay.
 */
export class Migration20261128000401_pending_payments_by_provider extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX IF NOT EXISTS payments_pending_provider_idx ON payments (currency, amount_minor) WHERE status = 'pending' AND provider = 'walletpay';`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP INDEX IF EXISTS payments_pending_provider_idx;`);
  }
}
