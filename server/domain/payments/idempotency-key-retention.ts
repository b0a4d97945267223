import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteInBatches, PRUNE_BATCH } from '../../lib/batched-delete.js';

/**
 * One batch of the prune (its parameters: the retention in milliseconds, twice). `scope <> 'payment.create'`
 * and `created_at` match the partial index idempotency_keys_prunable_created_idx (a key changed last before
 * the cutoff was created before it; `updated_at` is left out of every index so that a key's finish is a HOT
 * update); the batch's ids are deleted through the primary key (deleteInBatches says why `= ANY(ARRAY(…))`).
 */
export const PRUNE_IDEMPOTENCY_KEYS_SQL = `DELETE FROM idempotency_keys WHERE id = ANY(ARRAY(
   SELECT id FROM idempotency_keys
    WHERE scope <> 'payment.create'
      AND created_at < now() - (? * interval '1 millisecond') AND updated_at < now() - (? * interval '1 millisecond')
      AND (recovery_point = 'finished' OR locked_until IS NULL OR locked_until < now())
    LIMIT ${PRUNE_BATCH}
    FOR UPDATE SKIP LOCKED))
 RETURNING id`;

/**
 * How long idempotency keys (idempotency-keys.ts) are kept: IDEMPOTENCY_KEY_RETENTION after their last
 * change (24 h by default, as Stripe does). A request with a pruned key is a new request.
 *
 * Never pruned:
 * - payment-creation keys: interface.md promises that the same key always returns the original payment,
 *   with no time limit (the payment row holds its key under a unique constraint for as long as it exists);
 * - a claim whose lease is live: a request is still acting on it.
 * An unfinished claim whose lease ran out and that nobody resumed within the retention period is pruned
 * like a finished one: by then the providers' own idempotency windows (24 h, 6 h) are over, so resuming
 * it would no longer be recognised by the provider anyway.
 */
export class IdempotencyKeyRetention {
  constructor(
    private readonly em: EntityManager,
    private readonly retentionMs: number,
  ) {}

  /**
   * Deletes the keys past retention, a batch per statement (each its own short transaction); returns how many.
   * The cutoff is the database's now() less the retention, never this worker's clock: created_at and
   * updated_at are the database's now() too, so a worker whose clock runs ahead cannot end a key's replay early.
   */
  async prune(): Promise<number> {
    // SKIP LOCKED: a key being taken over right now is left for the next run.
    return deleteInBatches(() =>
      this.em.getConnection().execute<{ id: string }[]>(PRUNE_IDEMPOTENCY_KEYS_SQL, [this.retentionMs, this.retentionMs]),
    );
  }
}
