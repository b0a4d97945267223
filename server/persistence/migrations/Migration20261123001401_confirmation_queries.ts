import { Migration } from '@mikro-orm/migrations';

/**
 * A status query the service sends itself to confirm an unverifiable notification (inbound pipeline):
 * `confirms` names what it confirms ('reversal', 'transaction-status'), `refund_id` the refund a
 * reversal confirmation is about. Its answer is applied; it is never itself confirmed again.
 */
export class Migration20261123001401_confirmation_queries extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE provider_status_queries ADD COLUMN refund_id uuid NULL REFERENCES refunds(id) ON DELETE SET NULL;`);
    this.addSql(`ALTER TABLE provider_status_queries ADD COLUMN confirms text NULL;`);
    this.addSql(`CREATE INDEX provider_status_queries_refund_idx ON provider_status_queries (refund_id) WHERE refund_id IS NOT NULL;`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX provider_status_queries_refund_idx;');
    this.addSql('ALTER TABLE provider_status_queries DROP COLUMN confirms;');
    this.addSql('ALTER TABLE provider_status_queries DROP COLUMN refund_id;');
  }
}
