import { Migration } from '@mikro-orm/migrations';

/**
 * Short leases for "one at a time across every process" around a call to another system (the
 * mobile-money OAuth token refresh): a row with an expiry, taken by one INSERT … ON CONFLICT, instead
 * of an advisory lock that would pin a pooled connection — for the holder and every waiter — while
 * the other system answers.
 */
export class Migration20261122000602_refresh_leases extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE refresh_leases (
        name text PRIMARY KEY,
        holder uuid NOT NULL,
        until timestamptz NOT NULL
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('DROP TABLE refresh_leases;');
  }
}
