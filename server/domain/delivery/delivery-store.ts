import type { EntityManager } from '@mikro-orm/postgresql';
import type { DeliveryStatus } from '../../persistence/entities/index.js';

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
  body: string;
}

/** How the delivery row moves after an attempt. */
export type NextState =
  | { kind: 'delivered' }
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
  body: string;
}

const ms = `?::double precision * interval '1 millisecond'`;

/**
 * Takes the delivery for one attempt, atomically: only a sendable status, only when no other worker
 * holds an unexpired lease, and for scheduled attempts only once due. The lease outlives the request
 * timeout, so it cannot expire while the attempt is still under way.
 */
export async function leaseDelivery(
  em: EntityManager,
  id: string,
  options: { leaseMs: number; trigger: AttemptTrigger },
): Promise<LeasedDelivery | null> {
  // Constant SQL per trigger (no user input): scheduled attempts send pending/retrying rows when due,
  // manual ones re-send retrying/dead rows now.
  const condition =
    options.trigger === 'scheduled'
      ? `d.status IN ('pending', 'retrying') AND d.next_attempt_at <= now()`
      : `d.status IN ('retrying', 'dead')`;
  const rows = await em.execute<LeaseRow[]>(
    `UPDATE webhook_deliveries d
        SET lease_until = now() + ${ms}
       FROM events e, merchants m
      WHERE d.id = ? AND e.id = d.event_id AND m.id = d.merchant_id
        AND ${condition}
        AND (d.lease_until IS NULL OR d.lease_until < now())
  RETURNING d.id, d.merchant_id, d.event_type, d.status, d.attempts, d.url, m.webhook_url, e.body`,
    [options.leaseMs, id],
  );
  const row = rows[0];
  return row ? toLeased(row) : null;
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
    body: row.body,
  };
}

/** Appends one row to the attempt history (call inside the outcome transaction). */
export async function insertAttempt(
  em: EntityManager,
  attempt: { deliveryId: string; attemptNumber: number; trigger: AttemptTrigger; responseStatus: number | null; error: string | null; durationMs: number },
): Promise<void> {
  await em.execute(
    `INSERT INTO delivery_attempts (delivery_id, attempt_number, trigger, response_status, error, duration_ms) VALUES (?, ?, ?, ?, ?, ?)`,
    [attempt.deliveryId, attempt.attemptNumber, attempt.trigger, attempt.responseStatus, attempt.error, attempt.durationMs],
    'run',
  );
}

export async function countScheduledAttempts(em: EntityManager, deliveryId: string): Promise<number> {
  const rows = await em.execute<{ n: number }[]>(
    `SELECT count(*)::int AS n FROM delivery_attempts WHERE delivery_id = ? AND trigger = 'scheduled'`,
    [deliveryId],
  );
  return rows[0]?.n ?? 0;
}

/** Records the attempt's result on the delivery and releases the lease; returns the new status and due time. */
export async function finishAttempt(
  em: EntityManager,
  deliveryId: string,
  update: { url: string; responseStatus: number | null; error: string | null; next: NextState },
): Promise<{ status: DeliveryStatus; nextAttemptAt: Date | null }> {
  const params: unknown[] = [update.url, update.responseStatus, update.error];
  let transition: string;
  switch (update.next.kind) {
    case 'delivered':
      transition = `status = 'delivered', delivered_at = now(), next_attempt_at = NULL`;
      break;
    case 'retry':
      transition = `status = 'retrying', next_attempt_at = now() + ${ms}`;
      params.push(update.next.delayMs);
      break;
    case 'dead':
      transition = `status = 'dead', next_attempt_at = NULL`;
      break;
    case 'unchanged':
      transition = `status = status`;
      break;
  }
  params.push(deliveryId);
  const rows = await em.execute<{ status: DeliveryStatus; next_attempt_at: string | Date | null }[]>(
    `UPDATE webhook_deliveries
        SET url = ?, last_response_status = ?, last_error = ?, attempts = attempts + 1,
            lease_until = NULL, updated_at = now(), ${transition}
      WHERE id = ?
  RETURNING status, next_attempt_at`,
    params,
  );
  const row = rows[0];
  if (!row) throw new Error('delivery vanished during an attempt');
  return { status: row.status, nextAttemptAt: row.next_attempt_at ? new Date(row.next_attempt_at) : null };
}

/**
 * Deliveries that are due but whose job is gone (the process died between commit and enqueue, or
 * mid-attempt): due for longer than `graceMs` and not leased.
 */
export async function findStrandedDeliveryIds(em: EntityManager, graceMs: number, limit: number): Promise<string[]> {
  const rows = await em.execute<{ id: string }[]>(
    `SELECT id FROM webhook_deliveries
      WHERE status IN ('pending', 'retrying')
        AND next_attempt_at <= now() - ${ms}
        AND (lease_until IS NULL OR lease_until < now())
      ORDER BY next_attempt_at
      LIMIT ?`,
    [graceMs, limit],
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
 * Puts the merchant's retrying and dead deliveries created in [since, until) back in the queue, due now,
 * and returns their ids. One statement: two concurrent calls never take the same delivery, and one
 * already queued again (pending) or being sent (leased) is left alone.
 */
export async function requeueFailedDeliveries(em: EntityManager, merchantId: string, since: Date, until: Date): Promise<string[]> {
  const rows = await em.execute<{ id: string }[]>(
    `UPDATE webhook_deliveries
        SET status = 'pending', next_attempt_at = now(), updated_at = now()
      WHERE merchant_id = ? AND status IN ('retrying', 'dead')
        AND created_at >= ? AND created_at < ?
        AND (lease_until IS NULL OR lease_until < now())
  RETURNING id`,
    [merchantId, since, until],
  );
  return rows.map((r) => r.id);
}
