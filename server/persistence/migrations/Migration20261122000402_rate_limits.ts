import { Migration } from '@mikro-orm/migrations';

/** Per-key request counters in fixed one-minute windows, shared by every api process. */
export class Migration20261122000402_rate_limits extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE rate_limit_windows (
        key_id uuid NOT NULL,
        window_start timestamptz NOT NULL,
        count int NOT NULL,
        PRIMARY KEY (key_id, window_start)
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE rate_limit_windows;');
  }
}
