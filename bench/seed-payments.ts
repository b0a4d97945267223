/**
 * Seeds COUNT payments for one merchant with a single INSERT … SELECT generate_series statement: a
 * realistic mix of providers, statuses, currencies and (log-uniform) amounts, created over the last
 * year with more volume recently. Deterministic for a given count (setseed), so runs are comparable.
 *
 *   npx tsx bench/seed-payments.ts --database-url postgres://… --merchant <uuid> [--count 1000000]
 *
 * The schema must exist (start the service once against the database, or run the benchmark).
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

/** Every row's idempotency key is `seed-<n>` (n from 1): the benchmark searches for one. */
export const seededIdempotencyKey = (n: number) => `seed-${n}`;

const SEED_SQL = `
INSERT INTO payments (
  id, merchant_id, provider, status, amount_minor, currency, amount, amount_refunded_minor, reference,
  idempotency_key, request_hash, provider_ref, receipt_number, failure_reason, provider_response,
  provider_data, sync_attempts, next_sync_at, created_at, updated_at)
SELECT
  gen_random_uuid(), $1::uuid, provider, status, amount_minor, currency,
  round(amount_minor / CASE currency WHEN 'JPY' THEN 1 ELSE 100 END::numeric, 4),
  CASE WHEN status = 'refunded' THEN amount_minor ELSE 0 END,
  'seed-' || n,
  'seed-' || n,
  'seed',
  provider_ref,
  CASE WHEN provider = 'mobilemoney' AND status IN ('completed', 'refunded', 'reversed') THEN 'R' || upper(substr(md5(n::text), 1, 9)) END,
  CASE WHEN status = 'failed' THEN CASE WHEN provider = 'cardpay' THEN 'Your card was declined.' ELSE 'The payer cancelled the request' END END,
  jsonb_build_object('id', provider_ref, 'object', provider || '_payment', 'status', status, 'amount', amount_minor,
    'currency', lower(currency), 'created', extract(epoch FROM created_at)::bigint, 'livemode', false,
    'metadata', jsonb_build_object('reference', 'seed-' || n)),
  CASE WHEN provider = 'cardpay' THEN '{"payment_method": "pm_card_visa"}'::jsonb ELSE '{}'::jsonb END,
  0, NULL, created_at, created_at + interval '2 seconds'
FROM (
  SELECT n, provider, currency, amount_minor, created_at,
    CASE
      WHEN rs < 0.78 THEN 'completed'
      WHEN rs < 0.90 THEN 'failed'
      WHEN rs < 0.93 THEN 'pending'
      WHEN rs < 0.98 OR provider <> 'mobilemoney' THEN 'refunded'
      ELSE 'reversed'
    END AS status,
    -- Unique per merchant too (one payment per provider reference): another merchant's seed in the same database.
    CASE provider WHEN 'cardpay' THEN 'pi_seed_' ELSE 'ref_seed_' END || left(replace($1::uuid::text, '-', ''), 12) || '_' || n AS provider_ref
  FROM (
    SELECT n, rs, created_at,
      CASE WHEN rp < 0.60 THEN 'cardpay' WHEN rp < 0.85 THEN 'mobilemoney' ELSE 'walletpay' END AS provider,
      CASE
        WHEN rp >= 0.60 AND rp < 0.85 THEN 'KES'
        WHEN rc < 0.55 THEN 'USD' WHEN rc < 0.80 THEN 'EUR' WHEN rc < 0.92 THEN 'GBP' ELSE 'JPY'
      END AS currency,
      -- 1.00 … 5,000.00 (100 … 500,000 minor units), log-uniform
      floor(100 * exp(ra * ln(5000)))::bigint AS amount_minor
    FROM (
      SELECT n, random() AS rp, random() AS rs, random() AS rc, random() AS ra,
        -- density rising towards now: more recent payments than old ones
        now() - interval '365 days' * (1 - sqrt(random())) AS created_at
      FROM generate_series(1, $2::int) AS n
    ) r
  ) p
) s`;

/** Inserts `count` payments for the merchant; returns how long the statement took. */
export async function seedPayments(databaseUrl: string, merchantId: string, count: number): Promise<{ ms: number }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const start = Date.now();
    await client.query('SELECT setseed(0.42)');
    await client.query(SEED_SQL, [merchantId, count]);
    // As the worker's job does (foldPaymentCountChanges): the totals then read folded counts, not a
    // million appended changes, nor the million dead rows the fold leaves.
    await client.query('SELECT fold_payment_count_changes()');
    await client.query('VACUUM payment_count_changes');
    return { ms: Date.now() - start };
  } finally {
    await client.end();
  }
}

async function main() {
  const { values } = parseArgs({ options: { 'database-url': { type: 'string' }, merchant: { type: 'string' }, count: { type: 'string', default: '1000000' } } });
  const url = values['database-url'] ?? process.env.DATABASE_URL;
  if (!url || !values.merchant) {
    process.stderr.write('usage: tsx bench/seed-payments.ts --database-url URL --merchant MERCHANT_ID [--count N]\n');
    process.exit(2);
  }
  const { ms } = await seedPayments(url, values.merchant, Number(values.count));
  process.stdout.write(`${JSON.stringify({ inserted: Number(values.count), ms })}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: Error) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  });
}
