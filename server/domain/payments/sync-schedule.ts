import type { EntityManager } from '@mikro-orm/postgresql';
import { forEachBounded } from '../../lib/for-each-bounded.js';
import type { ProviderError } from '../ports.js';

/** How long a claimed row is hidden from other workers while one re-checks it. */
const CLAIM_MS = 5 * 60_000;

/** The tables whose pending rows are re-checked with their provider (next_sync_at, sync_attempts). */
export type SyncedTable = 'payments' | 'refunds';

/** When a new pending payment or refund is first re-checked: the schedule's first interval. */
export const firstCheckAfterMs = (scheduleMs: readonly number[]): number => scheduleMs[0] ?? 60_000;

/**
 * Pending rows the re-checks gave up on (the schedule ran out: no next_sync_at). A payment waiting for its
 * customer (a `next_action` redirect) keeps a check due until its provider's expiry (nextExpiryCheck:
 * cardpay's 24 h, walletpay's 75 h at most), the one that ends an abandoned checkout; so one with no check
 * ahead is past that expiry and still pending, or was never asked (another account's: ProviderGateway),
 * and is counted like any other. The `payments_unresolved` gauge counts these payments and `admin …
 * recheck --unresolved` restarts them (from the partial indexes on pending rows: payments_unresolved_idx,
 * refunds_pending_idx).
 */
export const UNRESOLVED: Record<SyncedTable, string> = {
  payments: `status = 'pending' AND next_sync_at IS NULL`,
  refunds: `status = 'pending' AND next_sync_at IS NULL`,
};

/**
 * What a row's checks are serialised by: its payment. A provider may refuse a second request on a
 * payment while one is in progress (PayPal: 409 PREVIOUS_REQUEST_IN_PROGRESS on a capture being refunded),
 * so two refunds of one payment are never sent at once.
 */
const LANE: Record<SyncedTable, string> = { payments: 'id', refunds: 'payment_id' };

/** Re-checks of one claimed batch under way at once (each waits on its provider most of the time). */
export const CHECKS_AT_ONCE = 5;

/**
 * What one check of a claimed row met: its provider answered (whatever it said), could not be reached or
 * did not answer (`unavailable`), or said we are sending too much (`rate_limited`). The services catch a
 * provider's failure (the row waits for its next turn), so this, not a throw, tells the job that the
 * provider is down or limiting us.
 */
export type CheckOutcome = 'checked' | 'unavailable' | 'rate_limited';

/** The outcome of a check that ended in `err`: a timeout or 5xx is the provider unavailable; a refusal is an answer. */
export function outcomeOf(err: ProviderError): CheckOutcome {
  if (err.kind === 'rate_limited') return 'rate_limited';
  return err.kind === 'unavailable' || err.kind === 'indeterminate' ? 'unavailable' : 'checked';
}

/**
 * One claim of due rows: how many were due (claimed), how many checks were started (not those of an
 * account that rate-limited us or of a provider found unavailable in this run, nor any once the process
 * stops), and how many of those threw (an error of ours — the database, say —, not a provider's answer:
 * the services catch those). The job stops its run when nothing was due or every started check threw
 * (jobs/drain-due.ts).
 */
export interface ClaimedBatch {
  due: number;
  started: number;
  failed: number;
}

/**
 * What a job's run shares across its batches: whether the process is stopping (no further check starts);
 * the provider accounts (merchant and provider) that answered "too many requests" in this run; and the
 * providers every check of which in a batch met them unavailable (or threw). Their rows are not checked
 * again in the run: one merchant's limit, or one provider down, must not hold back every other merchant's
 * and provider's checks; the rows skipped keep their claim (CLAIM_MS: a back-off from the account
 * limiting us, or the provider that is down).
 */
export interface DrainRun {
  stopping: () => boolean;
  rateLimitedAccounts: Set<string>;
  unavailableProviders: Set<string>;
}
export const newDrainRun = (stopping: () => boolean = () => false): DrainRun => ({ stopping, rateLimitedAccounts: new Set(), unavailableProviders: new Set() });
export const oneBatchRun = (): DrainRun => newDrainRun();

/** The provider of an account as ACCOUNT spells it (`<merchant id>:<provider>`). */
const providerOfAccount = (account: string): string => account.slice(account.lastIndexOf(':') + 1);

/**
 * Checks the claimed `rows`, CHECKS_AT_ONCE at a time, and tells how the batch went (ClaimedBatch). A row
 * of an account that rate-limited us, or of a provider found unavailable, in this run is not checked; once
 * `run.stopping()`, no further check starts. Rows not checked keep their claim and come back when it runs
 * out, as after a crash. A provider is found unavailable when every check of its rows the batch started
 * met it unavailable or threw: as many calls as the whole run made before, and not one slow answer among
 * good ones.
 */
export async function checkClaimed<T>(
  rows: readonly T[],
  check: (row: T) => Promise<CheckOutcome>,
  onError: (row: T, err: Error) => void,
  { laneOf, accountOf, run }: { laneOf?: (row: T) => string; accountOf: (row: T) => string; run: DrainRun },
): Promise<ClaimedBatch> {
  let started = 0;
  const byProvider = new Map<string, { started: number; failed: number }>();
  const { failed: threw } = await forEachBounded(rows, CHECKS_AT_ONCE, async (row) => {
    const account = accountOf(row);
    const provider = providerOfAccount(account);
    if (run.rateLimitedAccounts.has(account) || run.unavailableProviders.has(provider)) return;
    started++;
    const tally = byProvider.get(provider) ?? { started: 0, failed: 0 };
    byProvider.set(provider, tally);
    tally.started++;
    let outcome: CheckOutcome;
    try {
      outcome = await check(row);
    } catch (err) {
      tally.failed++;
      throw err;
    }
    // A rate limit is one account's (skipped from now on), not the provider down.
    if (outcome === 'unavailable') tally.failed++;
    if (outcome === 'rate_limited') run.rateLimitedAccounts.add(account);
  }, onError, { laneOf, shouldStop: run.stopping });
  for (const [provider, tally] of byProvider) if (tally.failed === tally.started) run.unavailableProviders.add(provider);
  return { due: rows.length, started, failed: threw };
}

/** A row's provider account, as the claims return it (`account`): its merchant and provider. */
export const ACCOUNT: Record<SyncedTable, string> = {
  payments: `merchant_id || ':' || provider`,
  refunds: `merchant_id || ':' || (SELECT p.provider FROM payments p WHERE p.id = refunds.payment_id)`,
};

/**
 * Claims up to `limit` pending rows of `table` due a re-check (next_sync_at passed; SKIP LOCKED, so
 * workers running this at the same time take different rows), hides them from the others for CLAIM_MS,
 * and re-checks them with `check`, CHECKS_AT_ONCE at a time — the rows of one payment one after another
 * (LANE) — each outside any transaction, as `run` allows (DrainRun). A check that throws goes
 * to `onError`; the row waits for its next turn (CLAIM_MS). One batch: the worker's job claims batch after batch (jobs/drain-due.ts).
 */
export async function recheckDue(
  em: EntityManager,
  table: SyncedTable,
  limit: number,
  check: (id: string) => Promise<CheckOutcome>,
  onError: (id: string, err: Error) => void,
  run: DrainRun,
): Promise<ClaimedBatch> {
  const claimed = await em.getConnection().execute<{ id: string; lane: string; account: string }[]>(
    `UPDATE ${table} SET next_sync_at = now() + (? * interval '1 millisecond')
     WHERE id IN (SELECT id FROM ${table} WHERE status = 'pending' AND next_sync_at <= now()
                  ORDER BY next_sync_at LIMIT ? FOR UPDATE SKIP LOCKED)
     RETURNING id, ${LANE[table]} AS lane, ${ACCOUNT[table]} AS account`,
    [CLAIM_MS, limit],
  );
  return checkClaimed(claimed, (row) => check(row.id), (row, err) => onError(row.id, err), { laneOf: (row) => row.lane, accountOf: (row) => row.account, run });
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
 * counts them. Returns the ids restarted.
 */
export async function restartChecks(em: EntityManager, table: SyncedTable, target: RecheckTarget): Promise<string[]> {
  const which = target === 'unresolved' ? UNRESOLVED[table] : `status = 'pending' AND id = ?`;
  const rows = await em.getConnection().execute<{ id: string }[]>(
    `UPDATE ${table} SET next_sync_at = now(), sync_attempts = 0 WHERE ${which} RETURNING id`,
    target === 'unresolved' ? [] : [target.id],
  );
  return rows.map((r) => r.id);
}
