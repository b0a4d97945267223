import { Migration } from '@mikro-orm/migrations';

/**
 * The `webhook_deliveries{status="dead"}` gauge leaves out failed `webhook.test` events (a merchant
 * testing an endpoint not up yet is not an event lost): its partial index takes the same condition,
 * so the count still reads only this index, not every dead row's table page.
 * The new index is built first under another name, then the old one dropped and the new one renamed:
 * the DROP's ACCESS EXCLUSIVE lock on webhook_deliveries (every read, claim and payment's outbox insert
 * waits on it) is then taken after the build, not before it (it is held until the migrations' commit:
 * they run all or nothing in one transaction, so a migration after this one in the same run still runs
 * under it — 20261128002202's build, when both are applied together). The build itself
 * still holds writes (SHARE lock) while it runs: on a live database with many deliveries, create
 * webhook_deliveries_dead_new_idx CONCURRENTLY by hand first (this runs in a transaction), with the
 * definition below; the migration then only drops and renames.
 * A hand build that was cancelled or failed leaves an INVALID index of that name, which IF NOT EXISTS
 * would take for the built one (and rename into place, queries then reading the table instead): it is
 * dropped first and built again here (test/deploy/migration-prebuilt-indexes.test.ts).
 */
/** Drops `index` if a cancelled or failed `CREATE INDEX CONCURRENTLY` left it INVALID (a valid one is kept). */
export function dropInvalidIndexSql(index: string): string {
  return `DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('${index}') AND NOT indisvalid) THEN
      DROP INDEX ${index};
    END IF;
  END $$;`;
}

export class Migration20261128002201_dead_deliveries_index_without_tests extends Migration {
  override async up(): Promise<void> {
    this.addSql(dropInvalidIndexSql('webhook_deliveries_dead_new_idx'));
    this.addSql(`CREATE INDEX IF NOT EXISTS webhook_deliveries_dead_new_idx ON webhook_deliveries (created_at) WHERE status = 'dead' AND event_type <> 'webhook.test';`);
    this.addSql('DROP INDEX webhook_deliveries_dead_idx;');
    this.addSql('ALTER INDEX webhook_deliveries_dead_new_idx RENAME TO webhook_deliveries_dead_idx;');
  }

  override async down(): Promise<void> {
    this.addSql(`CREATE INDEX webhook_deliveries_dead_old_idx ON webhook_deliveries (created_at) WHERE status = 'dead';`);
    this.addSql('DROP INDEX webhook_deliveries_dead_idx;');
    this.addSql('ALTER INDEX webhook_deliveries_dead_old_idx RENAME TO webhook_deliveries_dead_idx;');
  }
}
