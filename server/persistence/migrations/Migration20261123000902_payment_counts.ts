import { Migration } from '@mikro-orm/migrations';

/** Counter rows per key; a writer adds to the stripe of its own backend, so concurrent writers rarely share a row. */
export const PAYMENT_COUNT_STRIPES = 16;

/** The counting function and its four triggers (Migration20261126000101's down() restores them). */
export function paymentCountTriggerSql(): string[] {
  return [
    `
      CREATE FUNCTION payment_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        -- Sorted by key, so two statements touching several counter rows take their locks in one order.
        IF TG_OP = 'INSERT' THEN
          INSERT INTO payment_counts AS c (merchant_id, status, provider, currency, stripe, n)
          SELECT merchant_id, status, provider, currency, pg_backend_pid() % ${PAYMENT_COUNT_STRIPES}, count(*)
            FROM new_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
          ON CONFLICT (merchant_id, status, provider, currency, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO payment_counts AS c (merchant_id, status, provider, currency, stripe, n)
          SELECT merchant_id, status, provider, currency, pg_backend_pid() % ${PAYMENT_COUNT_STRIPES}, -count(*)
            FROM old_rows GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
          ON CONFLICT (merchant_id, status, provider, currency, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        ELSIF TG_OP = 'UPDATE' THEN
          -- Only rows whose key changed (a status change, mostly) move a count; other updates cancel out.
          INSERT INTO payment_counts AS c (merchant_id, status, provider, currency, stripe, n)
          SELECT merchant_id, status, provider, currency, pg_backend_pid() % ${PAYMENT_COUNT_STRIPES}, sum(d)
            FROM (SELECT o.merchant_id, o.status, o.provider, o.currency, -1 AS d
                    FROM old_rows o JOIN new_rows w ON w.id = o.id
                   WHERE (o.merchant_id, o.status, o.provider, o.currency) IS DISTINCT FROM (w.merchant_id, w.status, w.provider, w.currency)
                  UNION ALL
                  SELECT w.merchant_id, w.status, w.provider, w.currency, 1
                    FROM old_rows o JOIN new_rows w ON w.id = o.id
                   WHERE (o.merchant_id, o.status, o.provider, o.currency) IS DISTINCT FROM (w.merchant_id, w.status, w.provider, w.currency)) moved
           GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0 ORDER BY 1, 2, 3, 4
          ON CONFLICT (merchant_id, status, provider, currency, stripe) DO UPDATE SET n = c.n + EXCLUDED.n;
        ELSIF TG_OP = 'TRUNCATE' THEN
          DELETE FROM payment_counts;
        END IF;
        RETURN NULL;
      END
      $fn$;`,
    `CREATE TRIGGER payments_count_insert AFTER INSERT ON payments REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_counts_apply();`,
    `CREATE TRIGGER payments_count_update AFTER UPDATE ON payments REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_counts_apply();`,
    `CREATE TRIGGER payments_count_delete AFTER DELETE ON payments REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION payment_counts_apply();`,
    `CREATE TRIGGER payments_count_truncate AFTER TRUNCATE ON payments FOR EACH STATEMENT EXECUTE FUNCTION payment_counts_apply();`,
  ];
}

/**
 * Exact per-merchant payment totals without counting a million rows (GET /v1/payments `meta.total`).
 * `payment_counts` holds (merchant, status, provider, currency, stripe) → n, kept by statement-level
 * triggers on payments, so every writer — the ORM, raw SQL, a bulk INSERT … SELECT, a cascade delete —
 * changes the counters in the same transaction as the rows: a reader's snapshot sees both or neither.
 * The total for a key is the sum over its stripes (a stripe may go negative; only the sum means anything).
 * The stripe is the writing backend's pid modulo the stripe count: two concurrent transactions on
 * different connections add to different rows instead of queueing on one hot row.
 * No foreign key to merchants: a merchant's cascade delete removes payments and their counts together.
 */
export class Migration20261123000902_payment_counts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      CREATE TABLE payment_counts (
        merchant_id uuid NOT NULL,
        status text NOT NULL,
        provider text NOT NULL,
        currency char(3) NOT NULL,
        stripe smallint NOT NULL,
        n bigint NOT NULL,
        PRIMARY KEY (merchant_id, status, provider, currency, stripe)
      );`);
    for (const sql of paymentCountTriggerSql()) this.addSql(sql);
    // Existing payments: counted once while writers wait (SHARE blocks writes until this commits).
    this.addSql(`LOCK TABLE payments IN SHARE MODE;`);
    this.addSql(`
      INSERT INTO payment_counts (merchant_id, status, provider, currency, stripe, n)
      SELECT merchant_id, status, provider, currency, 0, count(*) FROM payments GROUP BY 1, 2, 3, 4;`);
  }

  override async down(): Promise<void> {
    this.addSql(`DROP TRIGGER payments_count_insert ON payments; DROP TRIGGER payments_count_update ON payments;`);
    this.addSql(`DROP TRIGGER payments_count_delete ON payments; DROP TRIGGER payments_count_truncate ON payments;`);
    this.addSql(`DROP FUNCTION payment_counts_apply(); DROP TABLE payment_counts;`);
  }
}
