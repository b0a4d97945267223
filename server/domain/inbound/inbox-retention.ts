import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteInBatches, PRUNE_BATCH } from '../../lib/batched-delete.js';

/**
 * One batch of the prune (its parameter: the retention in milliseconds): the entries received before the
 * database's now() less the retention, read through provider_events_received_idx and deleted by their ctid
 * (the key has two columns: deleteInBatches says why `= ANY(ARRAY(…))`).
 */
export const PRUNE_INBOX_SQL = `DELETE FROM provider_events WHERE ctid = ANY(ARRAY(
   SELECT ctid FROM provider_events WHERE received_at < now() - (? * interval '1 millisecond') LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED))
 RETURNING event_id`;

/**
 * How long the inbox (`provider_events`, recordInInbox) keeps a provider notification's id:
 * PROVIDER_EVENT_RETENTION after it was received (30 days by default, at least 4). By then no provider
 * sends it again on its own: Stripe and PayPal stop retrying after 3 days (and PayPal transmissions older
 * than 72 h are refused before the inbox is read), the mobile-money operator's ids are only remembered 24 h.
 * A repeat after that is still no second move of money: the status writer refuses a move a payment has
 * already made, and refunds are matched by their own ids.
 */
export class InboxRetention {
  constructor(
    private readonly em: EntityManager,
    private readonly retentionMs: number,
  ) {}

  /**
   * Deletes the entries past retention, a batch per statement (each its own short transaction); returns how many.
   * The cutoff is the database's now() less the retention (received_at is the database's now()), never this worker's clock.
   */
  async prune(): Promise<number> {
    // SKIP LOCKED: an entry a callback is re-recording right now is left for the next run.
    return deleteInBatches(() => this.em.getConnection().execute<{ event_id: string }[]>(PRUNE_INBOX_SQL, [this.retentionMs]));
  }
}
