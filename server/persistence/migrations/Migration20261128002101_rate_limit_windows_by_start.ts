import { Migration } from '@mikro-orm/migrations';

/**
 * The rate-limit windows' retention job (RateLimitRetention) deletes rows by age: without this index
 * every prune read the whole table (with per-second windows, hundreds of rows per active API key).
 */
export class Migration20261128002101_rate_limit_windows_by_start extends Migration {
  override async up(): Promise<void> {
    this.addSql('CREATE INDEX rate_limit_windows_start_idx ON rate_limit_windows (window_start);');
  }

  override async down(): Promise<void> {
    this.addSql('DROP INDEX rate_limit_windows_start_idx;');
  }
}
