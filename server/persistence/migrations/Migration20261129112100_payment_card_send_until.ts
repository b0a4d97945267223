import { Migration } from '@mikro-orm/migrations';

/**
 * payments.card_send_until: set, only while its saved card is active, in the statement right before a
 * create that charges a saved card is sent to the provider (a lease: the longest the call can take),
 * cleared once it answered (domain/payments/saved-card-sends.ts). A DELETE of the card answers after the
 * marks of its creates are cleared or expired. A nullable column: no table rewrite; the partial index
 * holds only the creates being sent.
 */
export class Migration20261129112100_payment_card_send_until extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE payments ADD COLUMN card_send_until timestamptz NULL;');
    this.addSql(`CREATE INDEX IF NOT EXISTS payments_card_send_idx ON payments (merchant_id, (provider_data->>'saved_card_id')) WHERE card_send_until IS NOT NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX IF EXISTS payments_card_send_idx; ALTER TABLE payments DROP COLUMN card_send_until;');
  }
}
