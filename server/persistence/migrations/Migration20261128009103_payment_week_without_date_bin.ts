import { Migration } from '@mikro-orm/migrations';
import { PAYMENT_WEEK_BY_DATE_TRUNC, paymentWeekFunctionSql } from './Migration20261123001601_payment_week_counts.js';

/**
 * payment_week without date_bin (PostgreSQL 14+), so one definition serves every supported PostgreSQL
 * (13 or newer): the ISO week of the UTC wall clock, which is the same Monday-00:00-UTC 168-hour bin for
 * every instant (test/deploy/oldest-postgres.test.ts compares it with date_bin). The week counts already
 * stored stay right; the function stays IMMUTABLE (date_trunc of a timestamp and AT TIME ZONE with a
 * constant zone are) and no index is built on it. On a database migrated on 13 it is already this.
 */
export class Migration20261128009103_payment_week_without_date_bin extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE OR REPLACE FUNCTION payment_week(created_at timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
      AS $fn$ ${PAYMENT_WEEK_BY_DATE_TRUNC} $fn$;`);
  }

  override async down(): Promise<void> {
    this.addSql(paymentWeekFunctionSql('CREATE OR REPLACE'));
  }
}
