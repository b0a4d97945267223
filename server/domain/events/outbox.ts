import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { EventSchema } from '../../persistence/entities/index.js';
import type { MerchantEventData, MerchantEventPayload, MerchantEventType } from './merchant-events.js';

export interface AppendedEvent {
  eventId: string;
  deliveryId: string | null;
}

/**
 * Transactional outbox: call inside the transaction that changes the payment, so the change, the event
 * and its delivery row commit together or not at all. After commit, hand `deliveryId` to the
 * DeliveryQueue; if the process dies first, the sweeper finds the due row anyway.
 * A merchant with no webhook URL gets the event recorded and no delivery.
 */
export async function appendEvent(
  tx: EntityManager,
  input: { merchantId: string; paymentId: string | null; type: MerchantEventType; data: MerchantEventData },
): Promise<AppendedEvent> {
  const eventId = randomUUID();
  const createdAt = new Date();
  const payload: MerchantEventPayload = { id: eventId, type: input.type, created_at: createdAt.toISOString(), data: input.data };
  tx.create(EventSchema, {
    id: eventId,
    merchantId: input.merchantId,
    paymentId: input.paymentId,
    type: input.type,
    payload: payload as unknown as Record<string, unknown>,
    body: JSON.stringify(payload),
    createdAt,
  });
  // The entities declare no relation, so the unit of work does not know the event must be inserted
  // before its delivery (webhook_deliveries.event_id is a foreign key): write it first. The delivery is
  // due at the database's now(), the clock its claims and retries use (an api host's clock may differ).
  await tx.flush();
  const rows = await tx.execute<{ id: string }[]>(
    `INSERT INTO webhook_deliveries (id, event_id, merchant_id, payment_id, event_type, url, status, attempts, next_attempt_at, created_at, updated_at)
     SELECT ?, ?, m.id, ?, ?, m.webhook_url, 'pending', 0, now(), now(), now() FROM merchants m WHERE m.id = ? AND m.webhook_url <> '' RETURNING id`,
    [randomUUID(), eventId, input.paymentId, input.type, input.merchantId],
    'all',
  );
  const deliveryId = rows[0]?.id ?? null;
  return { eventId, deliveryId };
}

/**
 * `appendEvent` as two CTEs of the caller's statement (the status writer's one-statement strategy):
 * `event`, written once per row of the CTE `source` (the changed payment), and `delivery`, written with
 * it only when the merchant has a webhook URL — the same rows `appendEvent` writes. `deliveryId` is
 * selected FROM delivery by the caller, to enqueue after the commit.
 */
export function appendEventSql(
  input: { merchantId: string; paymentId: string | null; type: MerchantEventType; data: MerchantEventData },
  source: string,
): { sql: string; params: unknown[] } {
  const eventId = randomUUID();
  const createdAt = new Date().toISOString();
  const payload: MerchantEventPayload = { id: eventId, type: input.type, created_at: createdAt, data: input.data };
  const body = JSON.stringify(payload);
  return {
    sql: `event AS (INSERT INTO events (id, merchant_id, payment_id, type, payload, body, created_at)
        SELECT ?, ?, ?, ?, ?::jsonb, ?, ?::timestamptz FROM ${source} RETURNING id, created_at),
      delivery AS (INSERT INTO webhook_deliveries (id, event_id, merchant_id, payment_id, event_type, url, status, attempts, next_attempt_at, created_at, updated_at)
        SELECT ?, event.id, m.id, ?, ?, m.webhook_url, 'pending', 0, now(), now(), now()
        FROM event JOIN merchants m ON m.id = ? WHERE m.webhook_url <> '' RETURNING id)`,
    params: [eventId, input.merchantId, input.paymentId, input.type, body, body, createdAt, randomUUID(), input.paymentId, input.type, input.merchantId],
  };
}
