import { Migration } from '@mikro-orm/migrations';

/**
 * Rate-limit counters are written on every counted request and hold no money: UNLOGGED, an upsert
 * writes no WAL and its commit does not wait for a WAL flush (~1 ms instead of ~6 ms on a disk that
 * syncs; the counters are ephemeral anyway). What that gives up: after a PostgreSQL crash, or on a
 * standby promoted in a failover, the table starts empty, so each key gets at most one window's budget
 * more; nothing else reads the table. A short rewrite of a table that holds two minutes of windows.
 */
export class Migration20261128002102_rate_limit_windows_unlogged extends Migration {
  override async up(): Promise<void> {
    this.addSql('ALTER TABLE rate_limit_windows SET UNLOGGED;');
  }

  override async down(): Promise<void> {
    this.addSql('ALTER TABLE rate_limit_windows SET LOGGED;');
  }
}
