import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteInBatches, PRUNE_BATCH } from '../../lib/batched-delete.js';

/**
 * One batch of the prune (its parameter: the retention in milliseconds): the status queries created before
 * the database's now() less the retention (created_at is the database's now(); never the worker's clock), read through
 * provider_status_queries_created_idx (Migration20261129160000), not the whole table; the batch's ids are
 * then deleted through the primary key (deleteInBatches says why `= ANY(ARRAY(…))`).
 */
export const PRUNE_STATUS_QUERIES_SQL =
  'DELETE FROM provider_status_queries WHERE id = ANY(ARRAY(' +
  `SELECT id FROM provider_status_queries WHERE created_at < now() - (? * interval '1 millisecond') LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)) ` +
  'RETURNING id';

/**
 * How long a status query (`provider_status_queries`: a merchant's check-status, a confirmation of an
 * unverifiable notification or of a pending reversal) is kept: PROVIDER_EVENT_RETENTION after it was sent,
 * answered or not, as the inbox's entries (`provider-events.prune` deletes both). Its row only matches the
 * provider's result to what was asked; nothing reads an answered one again. A result arrives within minutes
 * (the operator's queue timeout), never days later. One for a query already pruned is answered as any
 * notification for an unknown reference (200, counted `unmatched`, logged at warn): nothing changes, as
 * nothing would for a result repeated after its query's answer was applied.
 */
export class StatusQueryRetention {
  constructor(
    private readonly em: EntityManager,
    private readonly retentionMs: number,
  ) {}

  /** Deletes the queries past retention, a batch per statement (each its own short transaction); returns how many. */
  async prune(): Promise<number> {
    // SKIP LOCKED: a query a result is being recorded on right now is left for the next run.
    return deleteInBatches(() => this.em.getConnection().execute<{ id: string }[]>(PRUNE_STATUS_QUERIES_SQL, [this.retentionMs]));
  }
}
