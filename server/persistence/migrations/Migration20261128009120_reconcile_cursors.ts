import { Migration } from '@mikro-orm/migrations';

/**
 * reconcile_cursors: where each merchant's last successful automatic pull ended, per provider. The next
 * automatic pull starts from it (2 hours before it, at most 48 hours back), so a gap in the schedule —
 * workers down, the pull API failing — is pulled once it ends instead of being skipped for good.
 */
export class Migration20261128009120_reconcile_cursors extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE reconcile_cursors (
      merchant_id uuid NOT NULL REFERENCES merchants (id) ON DELETE CASCADE,
      provider text NOT NULL,
      pulled_until timestamptz NOT NULL,
      PRIMARY KEY (merchant_id, provider));`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE reconcile_cursors;');
  }
}
