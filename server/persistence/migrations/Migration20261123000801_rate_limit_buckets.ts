import { Migration } from '@mikro-orm/migrations';

/**
 * Rate-limit counters keyed by any bucket, not only an API key id: provider callbacks are counted per
 * source address (`callback:<address>`). Windows may be a second or a minute long.
 */
export class Migration20261123000801_rate_limit_buckets extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE rate_limit_windows RENAME COLUMN key_id TO bucket;');
    this.addSql('ALTER TABLE rate_limit_windows ALTER COLUMN bucket TYPE text;');
  }

  override async down(): Promise<void> {
    this.addSql(`DELETE FROM rate_limit_windows WHERE bucket !~ '^[0-9a-f-]{36}$';`);
    this.addSql('ALTER TABLE rate_limit_windows ALTER COLUMN bucket TYPE uuid USING bucket::uuid;');
    this.addSql('ALTER TABLE rate_limit_windows RENAME COLUMN bucket TO key_id;');
  }
}
