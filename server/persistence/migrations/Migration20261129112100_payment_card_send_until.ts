import { Migration } from '@mikro-orm/migrations';
import { dropInvalidIndexSql } from './Migration20261128002201_dead_deliveries_index_without_tests.js';

/**
 * payments.card_send_until: set, only while its saved card is active, in the statement right before a
 * create that charges a saved card is sent to the provider (a lease: the longest the call can take), and
 * ended (set to the time of the answer, never back to NULL) once the provider's answer says what it did
 * (domain/payments/saved-card-sends.ts). A DELETE of the card answers after the marks of its creates ended or
 * expired; NULL means no create of the payment was ever sent (a deleted card's payment then fails at once).
 *
 * The DELETE finds its card's payments through payments_saved_card_idx, an index of an existing column's
 * expression, partial (a payment without a saved card adds no entry: the create's hot path does not pay
 * for it). It is built first — a nullable column's ADD COLUMN is then the ACCESS EXCLUSIVE lock of an
 * instant, held to the commit, not a whole index build — and may be built CONCURRENTLY by hand before
 * `migrate` (README "Upgrading"); an INVALID one a cancelled hand build left is dropped and built again.
 *
 * Pending saved-card payments created before this migration have no marks though their create may have
 * been sent (no provider reference: its answer was lost): they are marked as sent (card_send_until =
 * created_at, in the past: no DELETE waits for it), so a deletion of their card never fails them as
 * "nothing was charged" unproven.
 */
export class Migration20261129112100_payment_card_send_until extends Migration {
  override async up(): Promise<void> {
    this.addSql(dropInvalidIndexSql('payments_saved_card_idx'));
    this.addSql(`CREATE INDEX IF NOT EXISTS payments_saved_card_idx ON payments ((provider_data->>'saved_card_id')) WHERE provider_data ? 'saved_card_id';`);
    this.addSql('ALTER TABLE payments ADD COLUMN card_send_until timestamptz NULL;');
    this.addSql(`UPDATE payments SET card_send_until = created_at WHERE status = 'pending' AND provider_data ? 'saved_card_id' AND provider_ref IS NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX IF EXISTS payments_saved_card_idx; ALTER TABLE payments DROP COLUMN card_send_until;');
  }
}
