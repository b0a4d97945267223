import type { EntityManager } from '@mikro-orm/postgresql';
import { forEachBounded } from '../../lib/for-each-bounded.js';

/** How long a claimed row is hidden from other workers while one re-checks it. */
const CLAIM_MS = 5 * 60_000;

/** The tables whose pending rows are re-checked with their provider (next_sync_at, sync_attempts). */
export type SyncedTable = 'payments' | 'refunds';

/** When a new pending payment or refund is first re-checked: the schedule's first interval. */
export const firstCheckAfterMs = (scheduleMs: readonly number[]): number => scheduleMs[0] ?? 60_000;

/**
 * Pending rows the re-checks gave up on (the schedule ran out: no next_sync_at). A payment waiting for
 * its customer (a `next_action` redirect: an abandoned checkout) is not one. The `payments_unresolved`
 * gauge counts these payments and `admin … recheck --unresolved` restarts them (from the partial
 * indexes on pending rows: payments_unresolved_idx, refunds_pending_idx).
 */
export const UNRESOLVED: Record<SyncedTable, string> = {
  payments: `status = 'pending' AND next_sync_at IS NULL AND next_action IS NULL`,
  refunds: `status = 'pending' AND next_sync_at IS NULL`,
};

/** Re-checks of one claimed batch under way at once (each waits on its provider most of the time). */
export const CHECKS_AT_ONCE = 5;

/** One claim of due rows: how many were claimed, and how many of their checks threw. */
export interface ClaimedBatch {
  claimed: number;
  failed: number;
}

/**
 * Claims up to `limit` pending rows of `table` due a re-check (next_sync_at passed; SKIP LOCKED, so
 * workers running this at the same time take different rows), hides them from the others for CLAIM_MS,
 * and re-checks them with `check`, CHECKS_AT_ONCE at a time, each outside any transaction. A failed check
 * goes to `onError`; the row waits for its next turn (CLAIM_MS). One batch: the worker's job claims
 * batch after batch (jobs/drain-due.ts).
 */
export async function recheckDue(
  em: EntityManager,
  table: SyncedTable,
  limit: number,
  check: (id: string) => Promise<void>,
  onError: (id: string, err: Error) => void,
): Promise<ClaimedBatch> {
  const claimed = await em.getConnection().execute<{ id: string }[]>(
    `UPDATE ${table} SET next_sync_at = now() + (? * interval '1 millisecond')
     WHERE id IN (SELECT id FROM ${table} WHERE status = 'pending' AND next_sync_at <= now()
                  ORDER BY next_sync_at LIMIT ? FOR UPDATE SKIP LOCKED)
     RETURNING id`,
    [CLAIM_MS, limit],
  );
  const failed = await forEachBounded(claimed.map((r) => r.id), CHECKS_AT_ONCE, check, onError);
  return { claimed: claimed.length, failed };
}

/**
 * After a re-check that left the row pending: one more attempt counted, and the next re-check after
 * the schedule's interval for that many attempts — none once the schedule has run out.
 */
export async function scheduleNextCheck(em: EntityManager, table: SyncedTable, id: string, scheduleMs: readonly number[]): Promise<void> {
  await em.getConnection().execute(
    `UPDATE ${table} SET sync_attempts = sync_attempts + 1,
       next_sync_at = now() + ((?::jsonb ->> (sync_attempts + 1))::bigint * interval '1 millisecond')
     WHERE id = ? AND status = 'pending'`,
    [JSON.stringify(scheduleMs), id],
    'run',
  );
}

/** Which pending rows an operator restarts the re-checks of: one by id, or every one whose schedule ran out. */
export type RecheckTarget = { id: string } | 'unresolved';

/**
 * Starts the re-checks over (admin CLI `payment recheck`, `refund recheck`): the rows are due now (a
 * worker picks them within STATUS_SYNC_POLL_INTERVAL) and STATUS_SYNC_SCHEDULE runs again from its
 * start. Only pending rows; `unresolved` is every one no longer re-checked, as payments_unresolved
 * counts them (a payment waiting for its customer's approval is not). Returns the ids restarted.
 */
export async function restartChecks(em: EntityManager, table: SyncedTable, target: RecheckTarget): Promise<string[]> {
  const which = target === 'unresolved' ? UNRESOLVED[table] : `status = 'pending' AND id = ?`;
  const rows = await em.getConnection().execute<{ id: string }[]>(
    `UPDATE ${table} SET next_sync_at = now(), sync_attempts = 0 WHERE ${which} RETURNING id`,
    target === 'unresolved' ? [] : [target.id],
  );
  return rows.map((r) => r.id);
}
