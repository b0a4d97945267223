import { raw, type EntityManager } from '@mikro-orm/postgresql';
import { EventSchema, type Event } from '../../persistence/entities/index.js';
import { RECOVER_MAX_DAYS } from '../../../contract/index.js';
import { notFound } from '../errors.js';
import { PRUNE_BATCH } from '../../lib/batched-delete.js';
import type { Timestamptz } from '../created-window.js';
import type { MerchantEventPayload, MerchantEventType } from './merchant-events.js';

export interface EventFilter {
  type?: MerchantEventType;
  paymentId?: string;
  since?: Timestamptz;
  until?: Timestamptz;
  page: number;
  pageSize: number;
}

const DAY_MS = 86_400_000;

/**
 * One batch of the prune (its parameters: the retention in milliseconds, the last batch's created_at (null
 * on the first) twice and id, and recover's window in milliseconds): up to PRUNE_BATCH events past retention
 * that no delivery keeps, oldest first after the last batch, read through events_created_idx; then deleted
 * through the primary key (deleteInBatches says why `= ANY(ARRAY(…))`). Returns the deleted batch, newest first.
 */
export const PRUNE_EVENTS_SQL = `WITH batch AS (
   SELECT e.id, e.created_at FROM events e
    WHERE e.created_at < now() - (? * interval '1 millisecond')
      AND (?::timestamptz IS NULL OR (e.created_at, e.id) > (?::timestamptz, ?::uuid))
      AND NOT EXISTS (
            SELECT 1 FROM webhook_deliveries d
             WHERE d.event_id = e.id
               AND (d.status IN ('pending', 'retrying') OR (d.status IN ('dead') AND d.created_at >= now() - (? * interval '1 millisecond'))))
    ORDER BY e.created_at, e.id
    LIMIT ${PRUNE_BATCH}),
 gone AS (DELETE FROM events WHERE id = ANY(ARRAY(SELECT id FROM batch)) RETURNING id)
 SELECT b.created_at::text AS created_at, b.id FROM batch b JOIN gone USING (id) ORDER BY b.created_at DESC, b.id DESC`;

/**
 * The merchant's events as the outbox holds them (GET /v1/events), within the retention period, and
 * the pruning of older ones. An event's `body` is the exact text every delivery sends.
 */
export class EventLog {
  constructor(
    private readonly em: EntityManager,
    private readonly retentionMs: number,
  ) {}

  /** The oldest created_at within retention: the database's now() less it (one clock for every host, as the prune's). */
  private cutoff() {
    return raw(`now() - (? * interval '1 millisecond')`, [this.retentionMs]);
  }

  async list(merchantId: string, filter: EventFilter): Promise<{ items: MerchantEventPayload[]; total: number }> {
    // Within retention and the merchant's window: both bounds go to PostgreSQL (the window's at microsecond precision).
    const window = [...(filter.since ? [{ createdAt: { $gt: filter.since } }] : []), ...(filter.until ? [{ createdAt: { $lt: filter.until } }] : [])];
    const [rows, total] = await this.em.findAndCount(
      EventSchema,
      {
        merchantId,
        createdAt: { $gte: this.cutoff() },
        ...(window.length ? { $and: window } : {}),
        ...(filter.type ? { type: filter.type } : {}),
        ...(filter.paymentId ? { paymentId: filter.paymentId } : {}),
      },
      { orderBy: { createdAt: 'desc', id: 'desc' }, limit: filter.pageSize, offset: (filter.page - 1) * filter.pageSize, fields: ['id', 'body'] },
    );
    return { items: rows.map(bodyOf), total };
  }

  async get(merchantId: string, eventId: string): Promise<MerchantEventPayload> {
    const row = await this.em.findOne(EventSchema, { id: eventId, merchantId, createdAt: { $gte: this.cutoff() } }, { fields: ['id', 'body'] });
    if (!row) throw notFound('event');
    return bodyOf(row);
  }

  /**
   * Deletes events older than the retention period with their deliveries and their attempts (foreign
   * keys cascade), unless one of the deliveries can still go out: pending or retrying (on its schedule),
   * or dead and created within recover's window (RECOVER_MAX_DAYS), which can still queue it again. A
   * dead delivery older than both is not kept for ever: its endpoint was abandoned, and the event's
   * body (a payment's details) goes when the retention period says.
   * Each batch continues after the last event the one before deleted (oldest first), so the events
   * kept are walked once per prune, not once per batch.
   * Both cutoffs are the database's now() less a period, never this worker's clock (deliveries' created_at is the database's now()).
   */
  async prune(): Promise<number> {
    let deleted = 0;
    let after: { createdAt: string; id: string } | null = null;
    for (;;) {
      const rows: { created_at: string; id: string }[] = await this.em.getConnection().execute(
        PRUNE_EVENTS_SQL,
        [this.retentionMs, after?.createdAt ?? null, after?.createdAt ?? null, after?.id ?? null, RECOVER_MAX_DAYS * DAY_MS],
      );
      deleted += rows.length;
      if (rows.length < PRUNE_BATCH) return deleted;
      after = { createdAt: rows[0]!.created_at, id: rows[0]!.id };
    }
  }
}

/** The stored text parsed: JSON.stringify of it gives back the delivered bytes (unlike the jsonb copy, which reorders keys). */
function bodyOf(row: Pick<Event, 'body'>): MerchantEventPayload {
  return JSON.parse(row.body) as MerchantEventPayload;
}
