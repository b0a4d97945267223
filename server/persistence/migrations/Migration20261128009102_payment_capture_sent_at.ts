import { Migration } from '@mikro-orm/migrations';

/**
 * payments.capture_sent_at: set before a capture request may go to the provider, cleared again by an
 * attempt that is known to have sent nothing. While set, a later capture that cannot reach the provider
 * does not answer "nothing captured": an earlier request may have captured. A nullable column: no table rewrite.
 */
export class Migration20261128009102_payment_capture_sent_at extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE payments ADD COLUMN capture_sent_at timestamptz NULL;');
    // Pending payments whose capture an earlier release may have sent: a capture key still without a final
    // answer (released after an unknown or not-sent outcome, or in progress) or answered `undecided`.
    this.addSql(`UPDATE payments SET capture_sent_at = now()
      WHERE status = 'pending' AND id IN (
        SELECT resource_id FROM idempotency_keys
         WHERE scope = 'payment.capture' AND (recovery_point = 'provider_call' OR answer->'undecided' IS NOT NULL));`);
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE payments DROP COLUMN capture_sent_at;');
  }
}
