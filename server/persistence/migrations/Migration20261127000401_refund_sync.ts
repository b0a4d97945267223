import { Migration } from '@mikro-orm/migrations';

/**
 * The refund sync (refund-sync.service.ts): when a pending refund is next re-checked with its provider,
 * and how many re-checks it has had. Constant defaults: no table rewrite. The partial index holds only
 * pending refunds that are still scheduled, so the job's claim never scans settled ones.
 */
export class Migration20261127000401_refund_sync extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE refunds ADD COLUMN next_sync_at timestamptz NULL, ADD COLUMN sync_attempts integer NOT NULL DEFAULT 0;');
    this.addSql(`CREATE INDEX refunds_next_sync_idx ON refunds (next_sync_at) WHERE status = 'pending' AND next_sync_at IS NOT NULL;`);
    // Refunds already pending when this version arrives are re-checked at once.
    this.addSql(`UPDATE refunds SET next_sync_at = now() WHERE status = 'pending';`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX refunds_next_sync_idx;');
    this.addSql('ALTER TABLE refunds DROP COLUMN next_sync_at, DROP COLUMN sync_attempts;');
  }
}
