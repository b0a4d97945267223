import type { EntityManager } from '@mikro-orm/postgresql';
import type { DeliveryStatus } from '../../persistence/entities/index.js';
import type { Timestamptz } from '../created-window.js';

export type AttemptTrigger = 'scheduled' | 'manual';

/** A delivery this worker holds the lease on, with what it needs to send it. */
export interface LeasedDelivery {
  id: string;
  merchantId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  /** The URL recorded on the delivery (where the previous attempt went). */
  url: string;
  /** The merchant's current registration, which every attempt uses. */
  merchantUrl: string | null;
  /** The merchant's current signing secret, sealed (read in the same statement as the URL). */
  sealedSecret: string | null;
  body: string;
  /**
   * This lease's own token: the attempt's result is recorded only while the row still carries it. A
   * worker whose lease expired and was taken over by another cannot overwrite that worker's lease or result.
   */
  leaseToken: string;
  /**
   * The database's clock minus this process's, measured as the lease was taken: deliveries are signed
   * with the database's time, as every lease and due time is judged, so a host whose clock drifted does
   * not sign timestamps that receivers refuse as too old or in the future.
   */
  databaseClockOffsetMs: number;
}

/** How the delivery row moves after an attempt. */
export type NextState =
  | { kind: 'retry'; delayMs: number }
  | { kind: 'dead' }
  /** A failed manual retry: the status and schedule stay as they were. */
  | { kind: 'unchanged' };

export interface LeaseRow {
  id: string;
  merchant_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  url: string;
  webhook_url: string | null;
  webhook_secret_enc: string | null;
  body: string;
  lease_token: string;
  database_now_ms: number;
}

const ms = `?::double precision * interval '1 millisecond'`;
/** The database's clock in epoch milliseconds (a float8, which node-postgres reads as a number). */
export const DATABASE_NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)::float8';

const LEASED_COLUMNS = `d.id, d.merchant_id, d.event_type, d.status, d.attempts, d.url, m.webhook_url, m.webhook_secret_enc, e.body, d.lease_token,
  ${DATABASE_NOW_MS} AS database_now_ms`;

/**
 * Takes a retrying or dead delivery for a manual attempt now, atomically: only when no other worker
 * holds an unexpired lease. The lease outlives the request timeout, so it cannot expire while the
 * attempt is still under way. (Scheduled attempts are taken by leaseDueDeliveries, within the
 * merchant's in-flight share.)
 */
export async function leaseDelivery(em: EntityManager, id: string, leaseMs: number): Promise<LeasedDelivery | null> {
  const rows = await em.execute<LeaseRow[]>(
    `UPDATE webhook_deliveries d
        SET lease_until = now() + ${ms}, lease_token = gen_random_uuid()
       FROM events e, merchants m
      WHERE d.id = ? AND e.id = d.event_id AND m.id = d.merchant_id
        AND d.status IN ('retrying', 'dead')
        AND (d.lease_until IS NULL OR d.lease_until < now())
  RETURNING ${LEASED_COLUMNS}`,
    [leaseMs, id],
  );
  const row = rows[0];
  return row ? toLeased(row) : null;
}

/**
 * `due_merchants`: each merchant with a due, unsent delivery, one index probe per merchant (a loose index
 * scan: a recursive CTE, for WITH RECURSIVE), ending in a null row. Shared by the lease claim and the
 * delivery lag gauge (store-metrics), which must judge the same merchants.
 */
export const DUE_MERCHANTS = `due_merchants AS (
       (SELECT merchant_id FROM webhook_deliveries
         WHERE status IN ('pending', 'retrying') AND next_attempt_at <= now()
         ORDER BY merchant_id LIMIT 1)
       UNION ALL
       SELECT (SELECT d.merchant_id FROM webhook_deliveries d
                WHERE d.status IN ('pending', 'retrying') AND d.next_attempt_at <= now() AND d.merchant_id > due_merchants.merchant_id
                ORDER BY d.merchant_id LIMIT 1)
         FROM due_merchants WHERE due_merchants.merchant_id IS NOT NULL)`;

/** The attempts in flight (leased, across every worker) of the merchant `merchantColumn` names, from the leased index. */
export const inFlightOf = (merchantColumn: string) => `(SELECT count(*)::int FROM webhook_deliveries l
        WHERE l.merchant_id = ${merchantColumn} AND l.status IN ('pending', 'retrying') AND l.lease_until IS NOT NULL AND l.lease_until >= now())`;

/**
 * Takes up to `limit` due deliveries (pending or retrying, due, not leased) for one scheduled attempt
 * each, in ONE statement, fairly between merchants: no merchant gets more than `perMerchant` attempts in
 * flight (leased, across every worker), and the claim goes round the merchants with something due —
 * each one's first pick, then each one's second… A merchant whose endpoint hangs (or who queued
 * thousands of events) so holds at most `perMerchant` of the workers' slots, and the others' deliveries
 * still go out at once. The merchants with something due are found by skipping through an index, so
 * a claim costs per merchant, not per queued delivery. `FOR UPDATE SKIP LOCKED`: workers claiming at
 * the same time take disjoint rows without waiting on each other, and a row being leased elsewhere right
 * now (a manual retry, another worker's claim) is skipped, not sent twice.
 *
 * Within a merchant, first attempts (`attempts = 0`: new events) and the others (retries, and what
 * POST /v1/webhooks/recover queued again, all due at once) take turns, each oldest first: a class's
 * n-th pick ranks after its attempts in flight plus n, ties going to the one due first (then to first
 * attempts). So a recovered backlog of thousands does not delay a new payment's event behind all of it
 * (it goes out as soon as a slot frees), and neither class is starved by a stream of the other: while
 * both wait, each gets about half of the merchant's share. With a share of 1 every claim is such a tie,
 * so the merchant's deliveries go one at a time in the order they fell due (a tie going to first
 * attempts would starve a due retry for as long as new events keep coming).
 * (merchant_id, least(attempts, 1), next_attempt_at) finds each class's oldest without reading the other.
 */
export async function leaseDueDeliveries(em: EntityManager, limit: number, leaseMs: number, perMerchant: number): Promise<LeasedDelivery[]> {
  const rows = await em.execute<LeaseRow[]>(
    `WITH RECURSIVE ${DUE_MERCHANTS},
     picks AS (
       SELECT m.merchant_id, busy.n AS busy, c.id, c.next_attempt_at, c.again,
              CASE WHEN c.again = 0 THEN busy.first ELSE busy.again END
                + row_number() OVER (PARTITION BY m.merchant_id, c.again ORDER BY c.next_attempt_at) AS turn
         FROM due_merchants m
        CROSS JOIN LATERAL (
              SELECT count(*)::int AS n, (count(*) FILTER (WHERE l.attempts = 0))::int AS first, (count(*) FILTER (WHERE l.attempts > 0))::int AS again
                FROM webhook_deliveries l
               WHERE l.merchant_id = m.merchant_id AND l.status IN ('pending', 'retrying')
                 AND l.lease_until IS NOT NULL AND l.lease_until >= now()) busy
        CROSS JOIN LATERAL (
              (SELECT d.id, d.next_attempt_at, 0 AS again
                 FROM webhook_deliveries d
                WHERE d.merchant_id = m.merchant_id AND d.status IN ('pending', 'retrying') AND least(d.attempts, 1) = 0
                  AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())
                ORDER BY d.next_attempt_at
                LIMIT greatest(?::int - busy.n, 0))
              UNION ALL
              (SELECT d.id, d.next_attempt_at, 1 AS again
                 FROM webhook_deliveries d
                WHERE d.merchant_id = m.merchant_id AND d.status IN ('pending', 'retrying') AND least(d.attempts, 1) = 1
                  AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())
                ORDER BY d.next_attempt_at
                LIMIT greatest(?::int - busy.n, 0))) c
        WHERE m.merchant_id IS NOT NULL),
     candidates AS (
       SELECT id, next_attempt_at, busy + row_number() OVER (PARTITION BY merchant_id ORDER BY turn, next_attempt_at, again) AS place
         FROM picks),
     due AS (
       SELECT w.id FROM webhook_deliveries w
        WHERE w.id IN (SELECT id FROM candidates WHERE place <= ?::int ORDER BY place, next_attempt_at LIMIT ?)
          AND w.status IN ('pending', 'retrying') AND w.next_attempt_at <= now()
          AND (w.lease_until IS NULL OR w.lease_until < now())
        FOR UPDATE SKIP LOCKED)
     UPDATE webhook_deliveries d
        SET lease_until = now() + ${ms}, lease_token = gen_random_uuid()
       FROM due, events e, merchants m
      WHERE d.id = due.id AND e.id = d.event_id AND m.id = d.merchant_id
  RETURNING ${LEASED_COLUMNS}`,
    [perMerchant, perMerchant, perMerchant, limit, leaseMs],
  );
  return rows.map(toLeased);
}

export function toLeased(row: LeaseRow): LeasedDelivery {
  return {
    id: row.id,
    merchantId: row.merchant_id,
    eventType: row.event_type,
    status: row.status,
    attempts: row.attempts,
    url: row.url,
    merchantUrl: row.webhook_url,
    sealedSecret: row.webhook_secret_enc,
    body: row.body,
    leaseToken: row.lease_token,
    databaseClockOffsetMs: row.database_now_ms - Date.now(),
  };
}

export interface AttemptRecord { deliveryId: string; attemptNumber: number; trigger: AttemptTrigger; responseStatus: number | null; error: string | null; durationMs: number }

const attemptParams = (a: AttemptRecord): unknown[] => [a.deliveryId, a.attemptNumber, a.trigger, a.responseStatus, a.error, a.durationMs];

/** A successful attempt to record, with the lease it was made under. */
export type DeliveredAttempt = AttemptRecord & { url: string; leaseToken: string };

/**
 * Records successful attempts, many in ONE statement: each one's delivery `delivered` with the lease
 * released, and its history row. Only where the delivery still carries the attempt's lease token: a
 * result that arrives after its lease was taken over changes nothing (not even the history, whose
 * scheduled attempts decide when a delivery dies). Returns the ones recorded as `id:token`. The rows
 * travel as one JSON parameter, whatever their number.
 */
export async function recordDeliveredAttempts(em: EntityManager, delivered: readonly DeliveredAttempt[]): Promise<Set<string>> {
  const rows = delivered.map((a) => ({
    delivery_id: a.deliveryId, attempt_number: a.attemptNumber, trigger: a.trigger, response_status: a.responseStatus, duration_ms: a.durationMs, url: a.url,
    lease_token: a.leaseToken,
  }));
  const updated = await em.execute<{ id: string; lease_token: string }[]>(
    `WITH r AS (
       SELECT * FROM jsonb_to_recordset(?::jsonb)
           AS r(delivery_id uuid, attempt_number int, trigger text, response_status int, duration_ms int, url text, lease_token uuid)),
     u AS (
       UPDATE webhook_deliveries d
          SET url = r.url, last_response_status = r.response_status, last_error = NULL, attempts = d.attempts + 1,
              lease_until = NULL, lease_token = NULL, unsent_releases = 0, updated_at = now(), status = 'delivered', delivered_at = now(), next_attempt_at = NULL
         FROM r
        WHERE d.id = r.delivery_id AND d.lease_token = r.lease_token
    RETURNING d.id, r.lease_token),
     recorded AS (
       INSERT INTO delivery_attempts (delivery_id, attempt_number, trigger, response_status, error, duration_ms)
       SELECT r.delivery_id, r.attempt_number, r.trigger, r.response_status, NULL, r.duration_ms
         FROM r JOIN u ON u.id = r.delivery_id AND u.lease_token = r.lease_token)
     SELECT id, lease_token FROM u`,
    [JSON.stringify(rows)],
  );
  return new Set(updated.map((r) => leaseKey(r.id, r.lease_token)));
}

/** How recordDeliveredAttempts names an attempt it recorded. */
export const leaseKey = (deliveryId: string, leaseToken: string): string => `${deliveryId}:${leaseToken}`;

export async function countScheduledAttempts(em: EntityManager, deliveryId: string): Promise<number> {
  const rows = await em.execute<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM delivery_attempts WHERE delivery_id = ? AND trigger = 'scheduled'`,
    [deliveryId],
  );
  return rows[0]?.n ?? 0;
}

/** last_error of a delivery ended because its merchant removed the webhook URL (DELETE /v1/merchant/webhook). */
export const NO_WEBHOOK_URL = 'no webhook URL registered';

/** What ends a delivery for want of a registration: dead, not sent again, `last_error` NO_WEBHOOK_URL (its one parameter). */
const END_UNREGISTERED = `status = 'dead', next_attempt_at = NULL, last_response_status = NULL, last_error = ?,
              lease_until = NULL, lease_token = NULL, unsent_releases = 0, updated_at = now()`;

/** The deliveries (`d`) a removal of their merchant's URL ends: those still waiting to be sent. */
const ENDED_BY_REMOVAL = `d.status IN ('pending', 'retrying')`;

/** A failed attempt as finishAttempt recorded it. */
export interface FinishedAttempt {
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
  /** Ended as the removal of the merchant's URL ends a delivery (END_UNREGISTERED), not moved by `next`. */
  endedUnregistered: boolean;
}

/**
 * Records a failed attempt's result on the delivery and releases the lease, with the attempt's history
 * row, in one statement; returns the new status and due time. Null when the delivery no longer carries
 * `leaseToken` (the lease expired and another worker took it, or it is gone): then nothing is written.
 * Successes are recorded in groups (recordDeliveredAttempts).
 * When the merchant has no webhook URL by then (removed while this attempt was under way: the removal leaves a
 * leased delivery to its attempt) a pending or retrying delivery is ended as the removal ends it, not moved
 * by `next`: dead, not retried. The same statement reads the registration, locked (FOR SHARE) until
 * this one commits: a DELETE or PUT under way is waited for and seen, and a DELETE
 * after it sees this row released (see removeRegistration).
 */
export async function finishAttempt(
  em: EntityManager,
  deliveryId: string,
  leaseToken: string,
  update: { url: string; responseStatus: number | null; error: string | null; next: NextState },
  attempt: AttemptRecord,
): Promise<FinishedAttempt | null> {
  const moved: unknown[] = [update.url, update.responseStatus, update.error];
  let transition: string;
  switch (update.next.kind) {
    case 'retry':
      transition = `status = 'retrying', next_attempt_at = now() + ${ms}`;
      moved.push(update.next.delayMs);
      break;
    case 'dead':
      transition = `status = 'dead', next_attempt_at = NULL`;
      break;
    case 'unchanged':
      transition = `status = status`;
      break;
  }
  // `ended` and `moved` take the row on exclusive conditions, so exactly one of them writes it.
  const rows = await em.execute<{ status: DeliveryStatus; next_attempt_at: string | Date | null; ended_unregistered: boolean }[]>(
    `WITH registration AS MATERIALIZED (
       SELECT m.webhook_url IS NULL AS removed
         FROM webhook_deliveries w JOIN merchants m ON m.id = w.merchant_id
        WHERE w.id = ?
          FOR SHARE OF m),
     ended AS (
       UPDATE webhook_deliveries d
          SET url = ?, attempts = attempts + 1, ${END_UNREGISTERED}
         FROM registration r
        WHERE d.id = ? AND d.lease_token = ?::uuid AND r.removed AND ${ENDED_BY_REMOVAL}
    RETURNING d.status, d.next_attempt_at, true AS ended_unregistered),
     moved AS (
       UPDATE webhook_deliveries d
          SET url = ?, last_response_status = ?, last_error = ?, attempts = attempts + 1,
              lease_until = NULL, lease_token = NULL, unsent_releases = 0, updated_at = now(), ${transition}
         FROM registration r
        WHERE d.id = ? AND d.lease_token = ?::uuid AND NOT (r.removed AND ${ENDED_BY_REMOVAL})
    RETURNING d.status, d.next_attempt_at, false AS ended_unregistered),
     u AS (SELECT * FROM ended UNION ALL SELECT * FROM moved),
     recorded AS (
       INSERT INTO delivery_attempts (delivery_id, attempt_number, trigger, response_status, error, duration_ms)
       SELECT ?::uuid, ?::int, ?::text, ?::int, ?::text, ?::int WHERE EXISTS (SELECT 1 FROM u))
     SELECT status, next_attempt_at, ended_unregistered FROM u`,
    [deliveryId, update.url, NO_WEBHOOK_URL, deliveryId, leaseToken, ...moved, deliveryId, leaseToken, ...attemptParams(attempt)],
  );
  const row = rows[0];
  if (!row) return null;
  return { status: row.status, nextAttemptAt: row.next_attempt_at ? new Date(row.next_attempt_at) : null, endedUnregistered: row.ended_unregistered };
}

/**
 * Ends a leased delivery whose merchant has no webhook URL any more (see NO_WEBHOOK_URL), while it still
 * carries `leaseToken`. No attempt row: nothing was sent, so the retry schedule is not used up by it and a
 * delivery recovered after a new registration resumes where it stood. Whether it was ended.
 */
export async function endUnregistered(em: EntityManager, deliveryId: string, leaseToken: string): Promise<boolean> {
  const rows = await em.execute<{ id: string }[]>(
    `UPDATE webhook_deliveries SET ${END_UNREGISTERED} WHERE id = ? AND lease_token = ?::uuid RETURNING id`,
    [NO_WEBHOOK_URL, deliveryId, leaseToken],
  );
  return rows.length > 0;
}

/**
 * DELETE /v1/merchant/webhook: clears the merchant's URL and sealed secret (one statement), then ends its
 * pending and retrying deliveries nobody holds (as endUnregistered), so its delivery log says so at once;
 * one transaction. One being sent right now (leased) is left to its attempt, whose recording ends it
 * (finishAttempt) — or, failing that, its next attempt finds no URL and ends it.
 * The deliveries are ended by a statement of their own, after the merchant's row is locked by the first:
 * an attempt recorded meanwhile (it holds that row FOR SHARE while it records) is committed by then and
 * seen released, so it is ended here; one recorded after this commits sees no URL and ends itself.
 * With nothing registered it writes nothing (a repeat is a no-op). Whether the merchant exists.
 */
export async function removeRegistration(em: EntityManager, merchantId: string): Promise<boolean> {
  return em.transactional(async (tx) => {
    const removed = await tx.execute<{ id: string }[]>(
      `UPDATE merchants SET webhook_url = NULL, webhook_secret_enc = NULL, updated_at = now()
        WHERE id = ? AND (webhook_url IS NOT NULL OR webhook_secret_enc IS NOT NULL) RETURNING id`,
      [merchantId],
    );
    if (removed.length === 0) return (await tx.execute(`SELECT 1 FROM merchants WHERE id = ?`, [merchantId])).length > 0;
    await tx.execute(
      `UPDATE webhook_deliveries d SET ${END_UNREGISTERED}
        WHERE d.merchant_id = ? AND ${ENDED_BY_REMOVAL} AND d.lease_until IS NULL`,
      [NO_WEBHOOK_URL, merchantId],
    );
    return true;
  });
}

/**
 * Gives a leased delivery back without an attempt: no history row, `attempts` unchanged, due again after
 * `firstDelayMs` doubled for each give-back in a row before this one (`unsent_releases`, reset by an
 * attempt), at most `maxDelayMs`. Only while it still carries `leaseToken`: the delay it is due again in,
 * or null (nothing written).
 */
export async function releaseUnattempted(
  em: EntityManager, deliveryId: string, leaseToken: string, firstDelayMs: number, maxDelayMs: number,
): Promise<number | null> {
  const rows = await em.execute<{ delay_ms: string | number }[]>(
    `UPDATE webhook_deliveries
        SET lease_until = NULL, lease_token = NULL, unsent_releases = unsent_releases + 1, updated_at = now(),
            next_attempt_at = now() + least(?::double precision * power(2, least(unsent_releases, 30)), ?::double precision) * interval '1 millisecond'
      WHERE id = ? AND lease_token = ?::uuid
  RETURNING round(extract(epoch FROM next_attempt_at - now()) * 1000) AS delay_ms`,
    [firstDelayMs, maxDelayMs, deliveryId, leaseToken],
  );
  return rows[0] ? Number(rows[0].delay_ms) : null;
}

/**
 * How long, by the database's clock, until a delivery that a scheduled attempt may not take yet is
 * due: pending or retrying, not leased, due later — and, given `dueAt`, still due at that time (within
 * a millisecond), not rescheduled since. Null otherwise.
 */
export async function msUntilDue(em: EntityManager, deliveryId: string, dueAt: Date | null): Promise<{ waitMs: number; dueAt: Date } | null> {
  const rows = await em.execute<{ ms: string | number; next_attempt_at: string | Date }[]>(
    `SELECT ceil(extract(epoch FROM next_attempt_at - now()) * 1000) AS ms, next_attempt_at FROM webhook_deliveries
      WHERE id = ? AND status IN ('pending', 'retrying') AND next_attempt_at > now()
        AND (lease_until IS NULL OR lease_until < now())
        AND (?::timestamptz IS NULL OR abs(extract(epoch FROM next_attempt_at - ?::timestamptz)) < 0.001)`,
    [deliveryId, dueAt, dueAt],
  );
  const row = rows[0];
  return row ? { waitMs: Number(row.ms), dueAt: new Date(row.next_attempt_at) } : null;
}

/**
 * Deliveries due for longer than `graceMs` and not leased: no worker was listening when they became
 * due, a retry's job was lost (the process died before booking it), or an attempt died mid-way (its
 * lease expired). Not those of a merchant whose in-flight share is full: they wait on its endpoint, and
 * the worker whose attempt ends takes the next (the drainer's own wake-up), so they are not stranded.
 */
export async function findStrandedDeliveryIds(em: EntityManager, graceMs: number, limit: number, perMerchant: number): Promise<string[]> {
  // Per merchant whose share has room (DUE_MERCHANTS' walk, the in-flight count from the leased index), each
  // class's oldest through its index: a held merchant's backlog, however long, is never read.
  const oldest = (again: 0 | 1) => `(SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
        WHERE d.merchant_id = open.merchant_id AND d.status IN ('pending', 'retrying') AND least(d.attempts, 1) = ${again}
          AND d.next_attempt_at <= now() - ${ms} AND (d.lease_until IS NULL OR d.lease_until < now())
        ORDER BY d.next_attempt_at LIMIT ?)`;
  const rows = await em.execute<{ id: string }[]>(
    `WITH RECURSIVE ${DUE_MERCHANTS},
     open AS (
       SELECT m.merchant_id FROM due_merchants m
        WHERE m.merchant_id IS NOT NULL AND ${inFlightOf('m.merchant_id')} < ?)
     SELECT s.id FROM open CROSS JOIN LATERAL (${oldest(0)} UNION ALL ${oldest(1)}) s
      ORDER BY s.next_attempt_at
      LIMIT ?`,
    [perMerchant, graceMs, limit, graceMs, limit, limit],
  );
  return rows.map((r) => r.id);
}

export interface AttemptRow {
  attempt_number: number;
  trigger: AttemptTrigger;
  response_status: number | null;
  error: string | null;
  duration_ms: number;
  created_at: string;
}

export async function listAttempts(em: EntityManager, deliveryId: string): Promise<AttemptRow[]> {
  return em.execute<AttemptRow[]>(
    `SELECT attempt_number, trigger, response_status, error, duration_ms, created_at
       FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt_number, id`,
    [deliveryId],
  );
}

/**
 * One batch of requeueFailedDeliveries (its parameters, in order: merchant twice, since, until, afterId twice,
 * startedAt, limit, startedAt). Only while the merchant has a webhook URL: its row is held FOR SHARE (see
 * requeueFailedDeliveries). The batch's ids, an array, are updated through the primary key: joined
 * (`FROM batch`), PostgreSQL may hash the batch against a scan of every delivery (deleteInBatches says why).
 */
export const REQUEUE_BATCH_SQL = `WITH registration AS MATERIALIZED (
   SELECT id FROM merchants WHERE id = ? AND webhook_url IS NOT NULL FOR SHARE),
 batch AS (
   SELECT id FROM webhook_deliveries
    WHERE merchant_id = ? AND EXISTS (SELECT 1 FROM registration) AND status IN ('retrying', 'dead')
      AND created_at > ?::timestamptz AND created_at < ?::timestamptz
      AND (?::uuid IS NULL OR id > ?::uuid)
      AND updated_at < coalesce(?::timestamptz, now())
      AND (lease_until IS NULL OR lease_until < now())
    ORDER BY id
    LIMIT ?
    FOR UPDATE),
 requeued AS (
   UPDATE webhook_deliveries d
      SET status = 'pending', next_attempt_at = now(), updated_at = now()
    WHERE d.id = ANY(ARRAY(SELECT id FROM batch))
RETURNING d.id)
 SELECT EXISTS (SELECT 1 FROM registration) AS registered, count(*)::int AS n, max(id::text) AS last_id,
        coalesce(?::timestamptz, now())::text AS started_at FROM requeued`;

/** Where a recover call has got to: the last delivery id it queued, and the time (database's clock, as text) it started. */
export interface RequeuePosition { afterId: string | null; startedAt: string | null }

/**
 * Puts up to `limit` of the merchant's retrying and dead deliveries created after since and before until
 * (both exclusive, as a list's window) back in the queue, due now, and returns how many, with where the
 * next batch starts. One statement: two concurrent calls never take the same delivery, and one already
 * queued again (pending) or being sent (leased) is left alone. Fewer than `limit` means none is left (rows another call took meanwhile are
 * passed over, and the next ones locked instead).
 * A call's batches walk the ids upwards from `afterId`, and take only rows last changed before the
 * call's first statement (`startedAt`, null on the first batch): a delivery this call — or a concurrent
 * one — queued, that the workers then tried and failed again while the call was still going, is not
 * queued a second time by a later batch.
 * Only while the merchant has a webhook URL (`registered` says whether it had): the statement holds its
 * row FOR SHARE, as finishAttempt does, so a removal (removeRegistration) either committed first — nothing
 * queued — or waits for this one and then ends what it queued. A check before the statement would leave
 * a gap in which a removal commits and rows are then queued to no URL.
 */
export async function requeueFailedDeliveries(
  em: EntityManager,
  merchantId: string,
  window: { since: Timestamptz; until: Timestamptz },
  position: RequeuePosition,
  limit: number,
): Promise<{ registered: boolean; count: number; position: RequeuePosition }> {
  const rows = await em.execute<{ registered: boolean; n: number; last_id: string | null; started_at: string }[]>(
    REQUEUE_BATCH_SQL,
    [merchantId, merchantId, window.since, window.until, position.afterId, position.afterId, position.startedAt, limit, position.startedAt],
  );
  const row = rows[0]!;
  return { registered: row.registered, count: row.n, position: { afterId: row.last_id ?? position.afterId, startedAt: row.started_at } };
}
