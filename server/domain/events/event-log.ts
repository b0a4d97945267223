import type { EntityManager } from '@mikro-orm/postgresql';
import { EventSchema, type Event } from '../../persistence/entities/index.js';
import { notFound } from '../errors.js';
import type { MerchantEventPayload, MerchantEventType } from './merchant-events.js';

export interface EventFilter {
  type?: MerchantEventType;
  paymentId?: string;
  since?: Date;
  until?: Date;
  page: number;
  pageSize: number;
}

/** How many events one prune statement deletes, so no statement holds locks for long. */
const PRUNE_BATCH = 1000;

/**
 * The merchant's events as the outbox holds them (GET /v1/events), within the retention period, and
 * the pruning of older ones. An event's `body` is the exact text every delivery sends.
 */
export class EventLog {
  constructor(
    private readonly em: EntityManager,
    private readonly retentionMs: number,
  ) {}

  private cutoff(now = new Date()): Date {
    return new Date(now.getTime() - this.retentionMs);
  }

  async list(merchantId: string, filter: EventFilter): Promise<{ items: MerchantEventPayload[]; total: number }> {
    const cutoff = this.cutoff();
    const since = filter.since && filter.since > cutoff ? filter.since : cutoff;
    const [rows, total] = await this.em.findAndCount(
      EventSchema,
      {
        merchantId,
        createdAt: { $gte: since, ...(filter.until ? { $lt: filter.until } : {}) },
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
   * Deletes events older than the retention period whose deliveries all succeeded (or that had none),
   * with those deliveries and their attempts (foreign keys cascade). An event with a delivery still
   * pending, retrying or dead is kept: the merchant can still retry it from the delivery log.
   */
  async prune(now = new Date()): Promise<number> {
    const cutoff = this.cutoff(now);
    let deleted = 0;
    for (;;) {
      const rows = await this.em.getConnection().execute<{ id: string }[]>(
        `DELETE FROM events WHERE id IN (
           SELECT e.id FROM events e
            WHERE e.created_at < ?
              AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status <> 'delivered')
            LIMIT ${PRUNE_BATCH})
         RETURNING id`,
        [cutoff],
      );
      deleted += rows.length;
      if (rows.length < PRUNE_BATCH) return deleted;
    }
  }
}

/** The stored text parsed: JSON.stringify of it gives back the delivered bytes (unlike the jsonb copy, which reorders keys). */
function bodyOf(row: Pick<Event, 'body'>): MerchantEventPayload {
  return JSON.parse(row.body) as MerchantEventPayload;
}
