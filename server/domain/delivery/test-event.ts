import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { TEST_EVENT_MESSAGE } from '../../../contract/outbound-webhooks.js';
import { EventSchema } from '../../persistence/entities/index.js';
import { DATABASE_NOW_MS } from './delivery-store.js';

/** The event type of POST /v1/webhooks/test: never retried, and left out of the dead-delivery metrics. */
export const TEST_EVENT_TYPE = 'webhook.test';

export interface TestEventPayload {
  id: string;
  type: 'webhook.test';
  created_at: string;
  data: { message: string; merchant_id: string };
}

/**
 * Writes a `webhook.test` event and its delivery, leased to the caller, who sends it at once. Its due
 * time is the end of that lease: only if the process dies before recording the attempt does the
 * sweeper find it and send it as a scheduled delivery.
 */
export async function recordTestEvent(
  tx: EntityManager,
  merchantId: string,
  url: string,
  leaseMs: number,
): Promise<{ eventId: string; deliveryId: string; body: string; leaseToken: string; databaseClockOffsetMs: number }> {
  const eventId = randomUUID();
  const deliveryId = randomUUID();
  const leaseToken = randomUUID();
  const createdAt = new Date();
  const payload: TestEventPayload = {
    id: eventId,
    type: TEST_EVENT_TYPE,
    created_at: createdAt.toISOString(),
    data: { message: TEST_EVENT_MESSAGE, merchant_id: merchantId },
  };
  const body = JSON.stringify(payload);
  tx.create(EventSchema, { id: eventId, merchantId, paymentId: null, type: payload.type, payload: payload as unknown as Record<string, unknown>, body, createdAt });
  // No relation is declared between the entities: the event row must exist before its delivery's foreign key.
  await tx.flush();
  // The lease and due time by the database's clock, as every other lease (workers judge them by now()).
  const [inserted] = await tx.execute<{ database_now_ms: number }[]>(
    `INSERT INTO webhook_deliveries (id, event_id, merchant_id, event_type, url, status, next_attempt_at, lease_until, lease_token)
     VALUES (?, ?, ?, ?, ?, 'pending', now() + make_interval(secs => ?), now() + make_interval(secs => ?), ?)
     RETURNING ${DATABASE_NOW_MS} AS database_now_ms`,
    [deliveryId, eventId, merchantId, payload.type, url, leaseMs / 1000, leaseMs / 1000, leaseToken],
  );
  return { eventId, deliveryId, body, leaseToken, databaseClockOffsetMs: inserted!.database_now_ms - Date.now() };
}
