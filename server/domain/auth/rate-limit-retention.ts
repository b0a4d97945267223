import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteInBatches, PRUNE_BATCH } from '../../lib/batched-delete.js';

/**
 * How long a rate-limit window's row (`rate_limit_windows`, RateLimiter) is kept after the window
 * started: two minutes. A window is a second or a minute long, so its row is of no use once it has
 * ended; the extra minute leaves room for clocks that differ between the api hosts (which name the
 * window) and the database (whose now() sets the cutoff, as for every retention; never the worker's
 * clock), so a window still counting is never deleted.
 */
export const RATE_LIMIT_WINDOW_RETENTION_MS = 2 * 60_000;

/**
 * One batch of the prune (its parameter: the retention in milliseconds): the rows of windows that
 * started before the database's now() less the retention. The index on
 * window_start (Migration20261128002101_rate_limit_windows_by_start) makes it a range scan over the
 * old rows alone, however many windows are still counting; they are deleted by their ctid (the key has
 * two columns: deleteInBatches says why `= ANY(ARRAY(…))`).
 */
export const PRUNE_RATE_LIMIT_WINDOWS_SQL =
  'DELETE FROM rate_limit_windows WHERE ctid = ANY(ARRAY(' +
  `SELECT ctid FROM rate_limit_windows WHERE window_start < now() - (? * interval '1 millisecond') LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)) ` +
  'RETURNING window_start';

/**
 * Deletes ended rate-limit windows: a worker job (`rate-limit-windows.prune`, every
 * RATE_LIMIT_PRUNE_INTERVAL), never a request, so no merchant's request waits for it or pays for it.
 */
export class RateLimitRetention {
  constructor(private readonly em: EntityManager) {}

  /** Deletes the rows past retention, a batch per statement (each its own short transaction); returns how many. */
  async prune(): Promise<number> {
    // SKIP LOCKED: a row an upsert holds right now is left for the next run (it cannot be that old unless a clock is far off).
    return deleteInBatches(() => this.em.getConnection().execute<{ window_start: Date }[]>(PRUNE_RATE_LIMIT_WINDOWS_SQL, [RATE_LIMIT_WINDOW_RETENTION_MS]));
  }
}
