import { Migration } from '@mikro-orm/migrations';
import { paymentCountTriggerSql } from './Migration20261123000902_payment_counts.js';
import { weekCountTriggerSql } from './Migration20261123001601_payment_week_counts.js';

/** Stripes a session can claim; past this many concurrent writers, sessions share by pid. */
const STRIPES = 64;
/** First half of the two-int advisory lock keys (key space of their own) a session claims its stripe with. */
const STRIPE_LOCK_CLASS = 20261126;

/** The function that claims a session's stripe (0103 kept it; 0401's down() restores it). */
export function counterStripeFunctionSql(): string[] {
  return [
    `
      CREATE FUNCTION payment_counter_stripe() RETURNS smallint LANGUAGE plpgsql AS $fn$
      DECLARE
        claimed smallint;
      BEGIN
        SELECT objid::text::smallint INTO claimed FROM pg_locks
         WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND classid = ${STRIPE_LOCK_CLASS} AND objsubid = 2 LIMIT 1;
        IF claimed IS NULL THEN
          FOR s IN 0 .. ${STRIPES - 1} LOOP
            IF pg_try_advisory_lock(${STRIPE_LOCK_CLASS}, s) THEN claimed := s; EXIT; END IF;
          END LOOP;
        END IF;
        claimed := coalesce(claimed, pg_backend_pid() % ${STRIPES});
        PERFORM set_config('payments.counter_stripe', claimed::text, false);
        RETURN claimed;
      END
      $fn$;`,
  ];
}

/** The counter functions and triggers of this migration (0103's down() restores them). */
export function stripedCounterTriggerSql(): string[] {
  const stripe = `coalesce(nullif(current_setting('payments.counter_stripe', true), '')::smallint, payment_counter_stripe())`;
  return [
    `
      CREATE FUNCTION payment_counters_apply() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        my_stripe smallint := ${stripe};
        delta int := CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END;
      BEGIN
        IF TG_OP = 'TRUNCATE' THEN
          DELETE FROM payment_counts;
          DELETE FROM payment_week_counts;
          RETURN NULL;
        END IF;
        -- Sorted by key, so two statements touching several counter rows take their locks in one order.
        INSERT INTO payment_counts AS c (merchant_id, status, provider, currency, stripe, n)
        SELECT merchant_id, status, provider, currency, my_stripe, delta * count(*)
          FROM changed_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (merchant_id, status, provider, currency, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        INSERT INTO payment_week_counts AS c (merchant_id, status, week, stripe, n)
        SELECT merchant_id, status, payment_week(created_at), my_stripe, delta * count(*)
          FROM changed_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (merchant_id, status, week, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        RETURN NULL;
      END
      $fn$;`,
    `
      CREATE FUNCTION payment_counters_move() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        my_stripe smallint := ${stripe};
      BEGIN
        -- The trigger's WHEN guarantees the two keys differ (ON CONFLICT may touch a row only once).
        INSERT INTO payment_counts AS c (merchant_id, status, provider, currency, stripe, n)
        SELECT * FROM (VALUES (OLD.merchant_id, OLD.status, OLD.provider, OLD.currency, my_stripe, -1::bigint),
                              (NEW.merchant_id, NEW.status, NEW.provider, NEW.currency, my_stripe, 1::bigint)) moved
         ORDER BY 1, 2, 3, 4
        ON CONFLICT (merchant_id, status, provider, currency, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        -- merchant_id and created_at never change (payments_keep_merchant_and_created_at): only the status moves a week count.
        IF OLD.status IS DISTINCT FROM NEW.status THEN
          INSERT INTO payment_week_counts AS c (merchant_id, status, week, stripe, n)
          SELECT * FROM (VALUES (OLD.merchant_id, OLD.status, payment_week(OLD.created_at), my_stripe, -1::bigint),
                                (NEW.merchant_id, NEW.status, payment_week(NEW.created_at), my_stripe, 1::bigint)) moved
           ORDER BY 1, 2, 3
          ON CONFLICT (merchant_id, status, week, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        END IF;
        RETURN NULL;
      END
      $fn$;`,
    `CREATE TRIGGER payments_counters_insert AFTER INSERT ON payments REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_counters_apply();`,
    `CREATE TRIGGER payments_counters_delete AFTER DELETE ON payments REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_counters_apply();`,
    `CREATE TRIGGER payments_counters_truncate AFTER TRUNCATE ON payments FOR EACH STATEMENT EXECUTE FUNCTION payment_counters_apply();`,
    // No column list (UPDATE OF …): a BEFORE trigger may change a column the statement does not set.
    `
      CREATE TRIGGER payments_counters_move AFTER UPDATE ON payments FOR EACH ROW
      WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.provider IS DISTINCT FROM NEW.provider OR OLD.currency IS DISTINCT FROM NEW.currency)
      EXECUTE FUNCTION payment_counters_move();`,
  ];
}

/**
 * The same exact counters (payment_counts, payment_week_counts) for less work on the create path:
 *
 * - An UPDATE of payments no longer pays for the counters unless it changes a counted key. The
 *   statement-level UPDATE triggers copied every updated row, old and new (provider_response included),
 *   into transition tables and ran two GROUP BY queries on each, for a status change or not. A row-level
 *   AFTER UPDATE trigger whose WHEN (checked in C, without a tuplestore) asks for a change of status,
 *   provider or currency replaces both; it adds ±1 to each counter, sorted by key like the statements.
 * - INSERT, DELETE (cascades included) and TRUNCATE stay statement-level, for bulk writers (seeding,
 *   imports, a merchant's cascade delete), but one trigger function now keeps both tables.
 * - A session adds to a stripe it claims (a session advisory lock on the lowest free stripe, remembered
 *   in a session setting) instead of pg_backend_pid() % 16: with 20 pooled connections the pid stripes
 *   were shared, and a writer queued behind another's counter row until that one committed (most of a
 *   create's statement time at 50 concurrent requests). Claimed stripes stay dense, so a count still
 *   sums few rows. A stripe claimed in a transaction that rolled back (the setting reverts, the lock
 *   stays) is found again in pg_locks rather than leaked.
 */
export class Migration20261126000101_payment_counter_moves extends Migration {
  override async up(): Promise<void> {
    this.addSql(`DROP TRIGGER payments_count_insert ON payments; DROP TRIGGER payments_count_update ON payments;`);
    this.addSql(`DROP TRIGGER payments_count_delete ON payments; DROP TRIGGER payments_count_truncate ON payments;`);
    this.addSql(`DROP TRIGGER payments_week_count_insert ON payments; DROP TRIGGER payments_week_count_update ON payments;`);
    this.addSql(`DROP TRIGGER payments_week_count_delete ON payments; DROP TRIGGER payments_week_count_truncate ON payments;`);
    this.addSql(`DROP FUNCTION payment_counts_apply(); DROP FUNCTION payment_week_counts_apply();`);
    for (const sql of [...counterStripeFunctionSql(), ...stripedCounterTriggerSql()]) this.addSql(sql);
  }

  /**
   * Back to the per-table triggers of 20261123000902 and 20261123001601. The counter rows stay: a total
   * is the sum over its stripes, whichever stripes wrote them. Stripes still claimed by open sessions
   * are released when those sessions end.
   */
  override async down(): Promise<void> {
    this.addSql(`DROP TRIGGER payments_counters_move ON payments; DROP TRIGGER payments_counters_insert ON payments;`);
    this.addSql(`DROP TRIGGER payments_counters_delete ON payments; DROP TRIGGER payments_counters_truncate ON payments;`);
    this.addSql(`DROP FUNCTION payment_counters_move(); DROP FUNCTION payment_counters_apply(); DROP FUNCTION payment_counter_stripe();`);
    for (const sql of [...paymentCountTriggerSql(), ...weekCountTriggerSql()]) this.addSql(sql);
  }
}
