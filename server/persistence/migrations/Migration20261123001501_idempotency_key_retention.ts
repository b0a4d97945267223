import { Migration } from '@mikro-orm/migrations';

/**
 * The retention job (jobs/prune-idempotency-keys.job.ts) finds keys past IDEMPOTENCY_KEY_RETENTION by
 * their last change. Payment-creation keys are never pruned, so the index leaves them out: it stays as
 * small as the prunable keys. On a live database with many keys, create it CONCURRENTLY by hand first
 * (this runs in a transaction).
 */
export class Migration20261123001501_idempotency_key_retention extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX idempotency_keys_prunable_idx ON idempotency_keys (updated_at) WHERE scope <> 'payment.create';`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX idempotency_keys_prunable_idx;');
  }
}
