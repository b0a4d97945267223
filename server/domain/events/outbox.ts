import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
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
  // The unit of work's pending changes go first, as they did when the event was an entity of it.
  await tx.flush();
  const { sql, params, eventId } = appendEventSql(input, 'one');
  const rows = await tx.execute<{ delivery_id: string | null }[]>(`WITH one AS (SELECT 1), ${sql} SELECT (SELECT id FROM delivery) AS delivery_id`, params, 'all');
  return { eventId, deliveryId: rows[0]?.delivery_id ?? null };
}

/**
 * The outbox rows as two CTEs of the caller's statement (the status writer's one-statement strategy, and
 * `appendEvent`): `event`, written once per row of the CTE `source` (the changed payment), and
 * `delivery`, written with it only when the merchant has a webhook URL, due at the database's now() (the
 * clock its claims and retries use; an api host's clock may differ). `deliveryId` is selected FROM
 * delivery by the caller, to enqueue after the commit.
 */
export function appendEventSql(
  input: { merchantId: string; paymentId: string | null; type: MerchantEventType; data: MerchantEventData },
  source: string,
): { sql: string; params: unknown[]; eventId: string } {
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
    eventId,
  };
}
