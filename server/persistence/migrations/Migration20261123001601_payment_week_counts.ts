import { Migration } from '@mikro-orm/migrations';

/** Counter rows per key; a writer adds to the stripe of its own backend (as payment_counts does). */
const STRIPES = 16;

/** The week-counting function and its four triggers (Migration20261126000101's down() restores them). */
export function weekCountTriggerSql(): string[] {
  return [
    `
      CREATE FUNCTION payment_week_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        -- Sorted by key, so two statements touching several counter rows take their locks in one order.
        IF TG_OP = 'INSERT' THEN
          INSERT INTO payment_week_counts AS c (merchant_id, status, week, stripe, n)
          SELECT merchant_id, status, payment_week(created_at), pg_backend_pid() % ${STRIPES}, count(*)
            FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
          ON CONFLICT (merchant_id, status, week, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO payment_week_counts AS c (merchant_id, status, week, stripe, n)
          SELECT merchant_id, status, payment_week(created_at), pg_backend_pid() % ${STRIPES}, -count(*)
            FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
          ON CONFLICT (merchant_id, status, week, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        ELSIF TG_OP = 'UPDATE' THEN
          -- Only a status change moves a count (merchant_id and created_at cannot change).
          INSERT INTO payment_week_counts AS c (merchant_id, status, week, stripe, n)
          SELECT merchant_id, status, week, pg_backend_pid() % ${STRIPES}, sum(d)
            FROM (SELECT o.merchant_id, o.status, payment_week(o.created_at) AS week, -1 AS d
                    FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE o.status IS DISTINCT FROM w.status
                  UNION ALL
                  SELECT w.merchant_id, w.status, payment_week(w.created_at), 1
                    FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE o.status IS DISTINCT FROM w.status) moved
           GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
          ON CONFLICT (merchant_id, status, week, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        ELSIF TG_OP = 'TRUNCATE' THEN
          DELETE FROM payment_week_counts;
        END IF;
        RETURN NULL;
      END
      $fn$;`,
    `CREATE TRIGGER payments_week_count_insert AFTER INSERT ON payments REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_week_counts_apply();`,
    `CREATE TRIGGER payments_week_count_update AFTER UPDATE ON payments REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_week_counts_apply();`,
    `CREATE TRIGGER payments_week_count_delete AFTER DELETE ON payments REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_week_counts_apply();`,
    `CREATE TRIGGER payments_week_count_truncate AFTER TRUNCATE ON payments FOR EACH STATEMENT EXECUTE FUNCTION payment_week_counts_apply();`,
  ];
}

/**
 * `payment_week(created_at)`, the week (Monday 00:00 UTC, a 168-hour bin) a payment is counted in. As
 * shipped it is `date_bin`, which PostgreSQL has only from 14: on 13, the oldest the service supports
 * (spec/decisions.md), the same weeks come from `date_trunc` of the UTC wall clock, so a fresh install
 * there migrates. On 14 and newer this makes byte for byte the function this migration always made;
 * Migration20261128009103_payment_week_without_date_bin then makes the date_trunc one the definition
 * everywhere, and its down() runs this again (`CREATE OR REPLACE`).
 */
export function paymentWeekFunctionSql(create: 'CREATE' | 'CREATE OR REPLACE'): string {
  return `
    DO $do$
    BEGIN
      IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE $sql$
      ${create} FUNCTION payment_week(created_at timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
      AS $fn$ SELECT date_bin('7 days', created_at, timestamptz '2000-01-03 00:00:00+00') $fn$;$sql$;
      ELSE
        EXECUTE $sql$
      ${create} FUNCTION payment_week(created_at timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE
      AS $fn$ ${PAYMENT_WEEK_BY_DATE_TRUNC} $fn$;$sql$;
      END IF;
    END
    $do$;`;
}

/**
 * The same weeks without date_bin: 2000-01-03 is a Monday and UTC has no daylight saving, so the ISO
 * week of the UTC wall clock is the 168-hour bin from it; the session's TimeZone plays no part.
 */
export const PAYMENT_WEEK_BY_DATE_TRUNC = `SELECT date_trunc('week', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`;

/**
 * Where a deep page of GET /v1/payments starts, without skipping a million index entries:
 * `payment_week_counts` holds (merchant, status, week of created_at, stripe) → n, kept like
 * payment_counts by statement-level triggers on payments in the writing transaction. Summing the weeks
 * from the newest tells which week holds the page's first row and how many rows come before that week;
 * the page is then read from that week's end with a small OFFSET (see domain/payments/payment-pages.ts).
 * Weeks are `date_bin('7 days', created_at, 2000-01-03 UTC)` (see paymentWeekFunctionSql): the same
 * whatever the session time zone.
 * created_at and merchant_id never change (a trigger refuses it), so only inserts, deletes and status
 * changes move a count.
 */
export class Migration20261123001601_payment_week_counts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE payment_week_counts (
        merchant_id uuid NOT NULL,
        status text NOT NULL,
        week timestamptz NOT NULL,
        stripe smallint NOT NULL,
        n bigint NOT NULL,
        PRIMARY KEY (merchant_id, status, week, stripe)
      );`);
    this.addSql(paymentWeekFunctionSql('CREATE'));
    for (const sql of weekCountTriggerSql()) this.addSql(sql);
    this.addSql(`
      CREATE FUNCTION payments_keep_merchant_and_created_at() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        RAISE EXCEPTION 'a payment''s merchant_id and created_at never change' USING ERRCODE = 'check_violation';
      END
      $fn$;`);
    this.addSql(`
      CREATE TRIGGER payments_keep_merchant_and_created_at BEFORE UPDATE OF merchant_id, created_at ON payments FOR EACH ROW
      WHEN (OLD.merchant_id IS DISTINCT FROM NEW.merchant_id OR OLD.created_at IS DISTINCT FROM NEW.created_at)
      EXECUTE FUNCTION payments_keep_merchant_and_created_at();`);
    // Existing payments: counted once while writers wait (SHARE blocks writes until this commits).
    this.addSql(`LOCK TABLE payments IN SHARE MODE;`);
    this.addSql(`
      INSERT INTO payment_week_counts (merchant_id, status, week, stripe, n)
      SELECT merchant_id, status, payment_week(created_at), 0, count(*) FROM payments GROUP BY 1, 2, 3;`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TRIGGER payments_week_count_insert ON payments; DROP TRIGGER payments_week_count_update ON payments;`);
    this.addSql(`DROP TRIGGER payments_week_count_delete ON payments; DROP TRIGGER payments_week_count_truncate ON payments;`);
    this.addSql(`DROP TRIGGER payments_keep_merchant_and_created_at ON payments; DROP FUNCTION payments_keep_merchant_and_created_at();`);
    this.addSql(`DROP FUNCTION payment_week_counts_apply(); DROP FUNCTION payment_week(timestamptz); DROP TABLE payment_week_counts;`);
  }
}
