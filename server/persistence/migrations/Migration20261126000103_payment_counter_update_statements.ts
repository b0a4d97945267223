import { Migration } from '@mikro-orm/migrations';
import { stripedCounterTriggerSql } from './Migration20261126000101_payment_counter_moves.js';

/** This migration's counter function and its three triggers (0401's down() restores them). */
export function statementCounterTriggerSql(): string[] {
  const stripe = `coalesce(nullif(current_setting('payments.counter_stripe', true), '')::smallint, payment_counter_stripe())`;
  return [
    `
      CREATE OR REPLACE FUNCTION payment_counters_apply() RETURNS trigger LANGUAGE plpgsql AS $fn$
      DECLARE
        my_stripe smallint := ${stripe};
      BEGIN
        -- Sorted by key, so two statements touching several counter rows take their locks in one order.
        IF TG_OP = 'TRUNCATE' THEN
          DELETE FROM payment_counts;
          DELETE FROM payment_week_counts;
        ELSIF TG_OP = 'INSERT' THEN
          INSERT INTO payment_counts AS c (merchant_id, status, provider, currency, stripe, n)
          SELECT merchant_id, status, provider, currency, my_stripe, count(*)
            FROM new_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
          ON CONFLICT (merchant_id, status, provider, currency, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
          INSERT INTO payment_week_counts AS c (merchant_id, status, week, stripe, n)
          SELECT merchant_id, status, payment_week(created_at), my_stripe, count(*)
            FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
          ON CONFLICT (merchant_id, status, week, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO payment_counts AS c (merchant_id, status, provider, currency, stripe, n)
          SELECT merchant_id, status, provider, currency, my_stripe, -count(*)
            FROM old_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
          ON CONFLICT (merchant_id, status, provider, currency, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
          INSERT INTO payment_week_counts AS c (merchant_id, status, week, stripe, n)
          SELECT merchant_id, status, payment_week(created_at), my_stripe, -count(*)
            FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
          ON CONFLICT (merchant_id, status, week, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        ELSE
          -- Only rows whose key changed move a count (merchant_id and created_at cannot change).
          INSERT INTO payment_counts AS c (merchant_id, status, provider, currency, stripe, n)
          SELECT merchant_id, status, provider, currency, my_stripe, sum(d)
            FROM (SELECT o.merchant_id, o.status, o.provider, o.currency, -1 AS d
                    FROM old_rows o JOIN new_rows w ON w.id = o.id
                   WHERE (o.status, o.provider, o.currency) IS DISTINCT FROM (w.status, w.provider, w.currency)
                  UNION ALL
                  SELECT w.merchant_id, w.status, w.provider, w.currency, 1
                    FROM old_rows o JOIN new_rows w ON w.id = o.id
                   WHERE (o.status, o.provider, o.currency) IS DISTINCT FROM (w.status, w.provider, w.currency)) moved
           GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0 ORDER BY 1, 2, 3, 4
          ON CONFLICT (merchant_id, status, provider, currency, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
          INSERT INTO payment_week_counts AS c (merchant_id, status, week, stripe, n)
          SELECT merchant_id, status, week, my_stripe, sum(d)
            FROM (SELECT o.merchant_id, o.status, payment_week(o.created_at) AS week, -1 AS d
                    FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE o.status IS DISTINCT FROM w.status
                  UNION ALL
                  SELECT w.merchant_id, w.status, payment_week(w.created_at), 1
                    FROM old_rows o JOIN new_rows w ON w.id = o.id WHERE o.status IS DISTINCT FROM w.status) moved
           GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
          ON CONFLICT (merchant_id, status, week, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        END IF;
        RETURN NULL;
      END
      $fn$;`,
    `CREATE TRIGGER payments_counters_insert AFTER INSERT ON payments REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_counters_apply();`,
    `CREATE TRIGGER payments_counters_update AFTER UPDATE ON payments REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_counters_apply();`,
    `CREATE TRIGGER payments_counters_delete AFTER DELETE ON payments REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_counters_apply();`,
  ];
}

/**
 * Status changes are counted per statement again (Migration20261126000101 counted them per row).
 * A row-level trigger adds ±1 to the same counter rows once per moved payment; inside one transaction
 * every add leaves one more row version that the next add walks past, so a transaction moving N payments
 * cost O(N²): 11,000 status changes took 7 s instead of 1.2 s, and 11,000 more in the same transaction
 * 24 s. The row trigger saved ~0.08 ms per create (a tenth of the creation answer's execution), not
 * worth that. Kept from 0101: one function for both counter tables and the stripe each session claims.
 * Transition tables are named by what they hold, old_rows and new_rows, in every trigger.
 */
export class Migration20261126000103_payment_counter_update_statements extends Migration {
  override async up(): Promise<void> {
    this.addSql(`DROP TRIGGER payments_counters_move ON payments; DROP FUNCTION payment_counters_move();`);
    this.addSql(`DROP TRIGGER payments_counters_insert ON payments; DROP TRIGGER payments_counters_delete ON payments;`);
    for (const sql of statementCounterTriggerSql()) this.addSql(sql);
  }

  /** Back to 20261126000101's row-level move trigger (the stripe function and the TRUNCATE trigger stayed). */
  override async down(): Promise<void> {
    this.addSql(`DROP TRIGGER payments_counters_insert ON payments; DROP TRIGGER payments_counters_update ON payments;`);
    this.addSql(`DROP TRIGGER payments_counters_delete ON payments; DROP TRIGGER payments_counters_truncate ON payments;`);
    this.addSql(`DROP FUNCTION payment_counters_apply();`);
    for (const sql of stripedCounterTriggerSql()) this.addSql(sql);
  }
}
