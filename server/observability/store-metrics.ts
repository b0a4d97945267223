import { Gauge, type Registry } from 'prom-client';
import { PROVIDERS } from '../../contract/index.js';
import { DUE_MERCHANTS, inFlightOf } from '../domain/delivery/delivery-store.js';
import { UNRESOLVED } from '../domain/payments/sync-schedule.js';

/** Runs one read-only query; the container passes the ORM connection's `execute`. */
export type Query = (sql: string) => Promise<Record<string, unknown>[]>;

interface Snapshot {
  payments: { provider: string; status: string; n: number }[];
  /** By provider, every provider present (0 when it has none). */
  unresolved: Record<string, number>;
  /** By provider, every provider present (0 when it has none). */
  oldestPendingRefundSeconds: Record<string, number>;
  /** By provider, every provider present (0 when it has none). */
  cardDetachesDue: Record<string, number>;
  deliveries: { status: string; n: number }[];
  deliveryLagSeconds: number;
  merchantsHeldByShare: number;
  jobs: { name: string; depth: number; lag: number }[];
  secretKeys: Record<string, number>;
}

/** The statuses the `webhook_deliveries` gauge reports: every one but `delivered`. */
export const GAUGED_DELIVERY_STATUSES = ['pending', 'retrying', 'dead'] as const;

/**
 * The rows each status counts. A failed `webhook.test` (POST /v1/webhooks/test, dead at once, never
 * retried) is a merchant checking an endpoint, often one not up yet, not an event lost: it is not
 * counted as dead, so no API key can fire the operator's dead-deliveries alert by testing an endpoint.
 */
const GAUGED_DELIVERY_WHERE: Record<(typeof GAUGED_DELIVERY_STATUSES)[number], string> = {
  pending: `status = 'pending'`,
  retrying: `status = 'retrying'`,
  dead: `status = 'dead' AND event_type <> 'webhook.test'`,
};

/** How long one snapshot serves scrapes: several scrapers (or a fast one) cost one round of queries. */
const CACHE_MS = 5000;

/**
 * Agenda jobs waiting for a worker: due and unlocked, or locked longer ago than the lock lifetime (a
 * worker killed mid-job: Agenda gives the job to the next worker that polls, due or not). A stale one
 * waits since it was due or locked, whichever came first (a job run computes its next run, a one-shot's
 * to none, when it starts). `lockLifetimeMs` is a number, never text from outside.
 */
function waitingJobsSql(lockLifetimeMs: number): string {
  const stale = `locked_at <= now() - interval '${Math.floor(lockLifetimeMs)} milliseconds'`;
  return `SELECT name, count(*)::int AS depth,
                 coalesce(extract(epoch FROM now() - min(CASE WHEN locked_at IS NULL THEN next_run_at ELSE least(next_run_at, locked_at) END)), 0)::float8 AS lag
            FROM agenda_jobs
           WHERE ((next_run_at <= now() AND locked_at IS NULL) OR ${stale}) AND coalesce(disabled, false) = false
           GROUP BY name`;
}

/**
 * The webhook lag a worker could shorten, and what waits on its own merchant instead. Per merchant with a
 * due, unleased delivery (the lease claim's walk, leaseDueDeliveries): its attempts in flight, and its
 * oldest due one. A merchant whose in-flight share (WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT) is full — its
 * endpoint slow or hanging, or a recovered backlog draining — is waiting on that endpoint, not on the
 * workers, so it is left out of the lag (an operator's page) and counted in `held`.
 * `perMerchant` is a number from the configuration, never text from outside.
 */
function deliveryLagSql(perMerchant: number): string {
  const share = Math.floor(perMerchant);
  // Each class's oldest waiting delivery through its index (merchant, class, due): a held merchant's
  // backlog, however long, is never read.
  const oldest = (again: 0 | 1) => `(SELECT d.next_attempt_at FROM webhook_deliveries d
             WHERE d.merchant_id = m.merchant_id AND d.status IN ('pending', 'retrying') AND least(d.attempts, 1) = ${again}
               AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())
             ORDER BY d.next_attempt_at LIMIT 1)`;
  return `WITH RECURSIVE ${DUE_MERCHANTS},
          merchants AS (
            SELECT ${inFlightOf('m.merchant_id')} AS in_flight, least(${oldest(0)}, ${oldest(1)}) AS oldest
              FROM due_merchants m
             WHERE m.merchant_id IS NOT NULL)
          SELECT coalesce(extract(epoch FROM now() - min(oldest) FILTER (WHERE in_flight < ${share})), 0)::float8 AS lag,
                 (count(*) FILTER (WHERE in_flight >= ${share} AND oldest IS NOT NULL))::int AS held
            FROM merchants`;
}

async function takeSnapshot(query: Query, secretKeys: () => Promise<Record<string, number>>, options: StoreMetricsOptions): Promise<Snapshot> {
  const [payments, unresolved, pendingRefunds, detachesDue, deliveries, lag, jobs, keys] = await Promise.all([
    // The trigger-kept counters (the view payment_count_totals), not a count over every payment row.
    query('SELECT provider, status, sum(n)::int AS n FROM payment_count_totals GROUP BY provider, status HAVING sum(n) <> 0'),
    // Pending with no re-check ahead: the status sync's schedule ran out (and, for one awaiting its customer, its provider's expiry passed) (payments_unresolved_idx).
    query(`SELECT provider, count(*)::int AS n FROM payments WHERE ${UNRESOLVED.payments} GROUP BY provider`),
    // The oldest refund still waiting for its provider's outcome, by provider (refunds_pending_idx).
    query(`SELECT p.provider, extract(epoch FROM now() - min(r.created_at))::float8 AS age
             FROM (SELECT payment_id, created_at FROM refunds WHERE status = 'pending') r JOIN payments p ON p.id = r.payment_id
            GROUP BY p.provider`),
    // Deleted saved cards whose payment method is still to be detached at the provider (saved_cards_detach_due_idx).
    query(`SELECT provider, count(*)::int AS n FROM saved_cards WHERE detach_due_at IS NOT NULL GROUP BY provider`),
    // Not `delivered`: counting every delivery kept for EVENT_RETENTION would scan them all at every
    // scrape (webhook_delivery_attempts_total counts the successes). Each from a partial index; `dead`
    // leaves out failed test events (webhook_deliveries_dead_idx is partial on the same condition).
    query(`SELECT ${GAUGED_DELIVERY_STATUSES.map((status) => `(SELECT count(*) FROM webhook_deliveries WHERE ${GAUGED_DELIVERY_WHERE[status]})::int AS ${status}`).join(', ')}`),
    // Age of the oldest delivery that is due and waits for a worker (0 when none), and those waiting on their merchant's share.
    query(deliveryLagSql(options.webhookMaxInFlightPerMerchant)),
    // Jobs waiting for a worker (stale locks included): the queue, and how long its oldest has waited.
    query(waitingJobsSql(options.jobLockLifetimeMs)),
    secretKeys(),
  ]);
  return {
    payments: payments.map((r) => ({ provider: String(r.provider), status: String(r.status), n: Number(r.n) })),
    unresolved: perProvider(unresolved, 'n'),
    oldestPendingRefundSeconds: perProvider(pendingRefunds, 'age'),
    cardDetachesDue: perProvider(detachesDue, 'n'),
    deliveries: Object.entries(deliveries[0] ?? {}).map(([status, n]) => ({ status, n: Number(n) })),
    deliveryLagSeconds: Math.max(0, Number(lag[0]?.lag ?? 0)),
    merchantsHeldByShare: Number(lag[0]?.held ?? 0),
    jobs: jobs.map((r) => ({ name: String(r.name), depth: Number(r.depth), lag: Math.max(0, Number(r.lag)) })),
    secretKeys: keys,
  };
}

/** One number per provider from (provider, column) rows; a provider without a row is 0, so every provider is always reported. */
function perProvider(rows: Record<string, unknown>[], column: string): Record<string, number> {
  const values: Record<string, number> = Object.fromEntries(PROVIDERS.map((provider) => [provider, 0]));
  for (const row of rows) values[String(row.provider)] = Math.max(0, Number(row[column]));
  return values;
}

/**
 * Business gauges read from the database at scrape time (one aggregate query each, cached for 5 s):
 * every process reports the same numbers, whatever it has handled itself, so they survive restarts
 * and need no cross-process counting. In PromQL take `max` over instances.
 */
interface StoreMetricsOptions {
  jobLockLifetimeMs: number;
  /** WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: a merchant with this many attempts in flight waits on its own endpoint. */
  webhookMaxInFlightPerMerchant: number;
}

export function registerStoreMetrics(registry: Registry, query: Query, secretKeys: () => Promise<Record<string, number>>, options: StoreMetricsOptions): void {
  let cached: { at: number; value: Promise<Snapshot> } | null = null;
  const snapshot = () => {
    if (!cached || Date.now() - cached.at > CACHE_MS) {
      const value = takeSnapshot(query, secretKeys, options);
      cached = { at: Date.now(), value };
      // A failed round is not kept: the next scrape asks again.
      value.catch(() => (cached = null));
    }
    return cached.value;
  };
  // A scrape never fails because the database does: store_metrics_up says 0 and the store gauges are left
  // out, rather than reported as 0 (an unlabelled gauge's default) or as their last values, which would
  // read as "nothing waiting" and keep an alert on them from firing.
  const read = async (): Promise<Snapshot | null> => snapshot().catch(() => null);

  new Gauge({
    name: 'store_metrics_up',
    help: 'Whether the last read of the database-backed gauges succeeded (1) or failed (0: they are left out of this scrape)',
    registers: [registry],
    async collect() {
      this.set((await read()) ? 1 : 0);
    },
  });

  /** A gauge whose values are all replaced from each snapshot, and that reports no value when the read failed. */
  const snapshotGauge = <L extends string>(name: string, help: string, labelNames: readonly L[], rows: (s: Snapshot) => [Record<L, string>, number][]) =>
    new (class extends Gauge<L> {
      override async get() {
        const s = await read();
        this.reset();
        if (s) for (const [labels, value] of rows(s)) this.set(labels, value);
        const metric = await super.get();
        return s ? metric : { ...metric, values: [] };
      }
    })({ name, help, labelNames, registers: [registry] });

  snapshotGauge('payments', 'Payments stored, by provider and status', ['provider', 'status'], (s) =>
    s.payments.map((p) => [{ provider: p.provider, status: p.status }, p.n]));
  // Every provider, 0 included: an alert compares it with its value a day ago.
  snapshotGauge('payments_unresolved', 'Pending payments the status sync no longer re-checks (STATUS_SYNC_SCHEDULE ran out; for one awaiting its customer, also its provider\'s expiry passed), by provider', ['provider'], (s) =>
    Object.entries(s.unresolved).map(([provider, n]) => [{ provider }, n]));
  snapshotGauge('refunds_pending_oldest_seconds', "How long the oldest refund still waiting for its provider's outcome has waited, by provider (0 when none)", ['provider'], (s) =>
    Object.entries(s.oldestPendingRefundSeconds).map(([provider, seconds]) => [{ provider }, seconds]));
  snapshotGauge('saved_cards_detach_due', 'Deleted saved cards whose payment method is still to be detached at the provider (the worker retries; given up on, logged at error, 30 days after the deletion), by provider', ['provider'], (s) =>
    Object.entries(s.cardDetachesDue).map(([provider, n]) => [{ provider }, n]));
  snapshotGauge('webhook_deliveries', 'Merchant webhook deliveries not delivered (yet), by status: pending, retrying, dead (failed webhook.test events left out)', ['status'], (s) =>
    s.deliveries.map((d) => [{ status: d.status }, d.n]));
  snapshotGauge('webhook_delivery_lag_seconds', "How long the oldest due, unsent merchant webhook delivery a worker could send has waited (0 when none); deliveries waiting only for their merchant's in-flight share are left out (webhook_merchants_held_by_share)", [], (s) =>
    [[{}, s.deliveryLagSeconds]]);
  snapshotGauge('webhook_merchants_held_by_share', "Merchants whose due webhook deliveries wait for their own attempts in flight (WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT) to finish: a slow or hanging endpoint, or a recovered backlog draining", [], (s) =>
    [[{}, s.merchantsHeldByShare]]);
  // `job_name`, not `job`: Prometheus sets `job` on every scraped series (the scrape job) and would
  // rename ours to `exported_job`.
  snapshotGauge('job_queue_depth', 'Agenda jobs waiting for a worker, by job name: due and not picked up, or locked by a worker longer ago than the lock lifetime (killed mid-job)', ['job_name'], (s) =>
    s.jobs.map((j) => [{ job_name: j.name }, j.depth]));
  snapshotGauge('job_queue_lag_seconds', 'How long the oldest Agenda job waiting for a worker has waited (a stale-locked one: since it was due or locked), by job name', ['job_name'], (s) =>
    s.jobs.map((j) => [{ job_name: j.name }, j.lag]));
  snapshotGauge('stored_secrets', 'Stored secrets (provider credentials, webhook signing secrets) by the key of this process that opens them, those sealed before key ids included: current (ENCRYPTION_KEY), decryption (one of DECRYPTION_KEYS: reseal them), unknown (no key of this process opens them)', ['key'], (s) =>
    Object.entries(s.secretKeys).map(([key, n]) => [{ key }, n]));
}
