import { Migration } from '@mikro-orm/migrations';

/**
 * A failed payment whose intent may still be confirmable at the provider (cardpay: a declined intent
 * waits in requires_payment_method) is cancelled there by the worker (payments.abandon-due): when it is
 * due, or NULL once done or not needed. Nullable, no default: no table rewrite; a partial index holds
 * only the due rows.
 */
export class Migration20261127000802_abandon_failed_intents extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE payments ADD COLUMN abandon_due_at timestamptz NULL;');
    this.addSql('CREATE INDEX payments_abandon_due_idx ON payments (abandon_due_at) WHERE abandon_due_at IS NOT NULL;');
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX payments_abandon_due_idx; ALTER TABLE payments DROP COLUMN abandon_due_at;');
  }
}
