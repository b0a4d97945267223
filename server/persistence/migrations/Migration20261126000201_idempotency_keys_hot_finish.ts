import { Migration } from '@mikro-orm/migrations';

/**
 * A key's finish (answer, recovery point, lease cleared, updated_at) — one per create, in the creation
 * answer's statement — becomes a heap-only-tuple update: no new entry in any of the table's indexes.
 * It could not be one while an index covered `updated_at` (idempotency_keys_prunable_idx): PostgreSQL
 * does a HOT update only when no indexed column changes, whatever a partial index's predicate says.
 * The retention job now finds its keys by `created_at` (which never changes; a key last changed before
 * the cutoff was created before it too) and checks `updated_at` on the rows the index gives it.
 * fillfactor 90 leaves room on a key's page for the finished version of the row next to the claimed one.
 * On a live database with many keys, create the index CONCURRENTLY by hand first (this runs in a transaction).
 */
export class Migration20261126000201_idempotency_keys_hot_finish extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX IF NOT EXISTS idempotency_keys_prunable_created_idx ON idempotency_keys (created_at) WHERE scope <> 'payment.create';`);
    this.addSql('DROP INDEX idempotency_keys_prunable_idx;');
    this.addSql('ALTER TABLE idempotency_keys SET (fillfactor = 90);');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE idempotency_keys RESET (fillfactor);');
    this.addSql(`CREATE INDEX idempotency_keys_prunable_idx ON idempotency_keys (updated_at) WHERE scope <> 'payment.create';`);
    this.addSql('DROP INDEX idempotency_keys_prunable_created_idx;');
  }
}
