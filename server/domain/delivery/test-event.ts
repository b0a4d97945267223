import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { EventSchema, WebhookDeliverySchema } from '../../persistence/entities/index.js';

export interface TestEventPayload {
  id: string;
  type: 'webhook.test';
  created_at: string;
  data: { message: string; merchant_id: string };
}

/**
 * Writes a `webhook.test` event and its delivery. The delivery has no due time, so neither the
 * delivery job nor the sweeper picks it up: the caller sends it once, at once.
 */
export async function recordTestEvent(tx: EntityManager, merchantId: string, url: string): Promise<{ eventId: string; deliveryId: string; body: string }> {
  const eventId = randomUUID();
  const deliveryId = randomUUID();
  const createdAt = new Date();
  const payload: TestEventPayload = {
    id: eventId,
    type: 'webhook.test',
    created_at: createdAt.toISOString(),
    data: { message: 'A test event from the payments service: your endpoint is reachable.', merchant_id: merchantId },
  };
  const body = JSON.stringify(payload);
  tx.create(EventSchema, { id: eventId, merchantId, paymentId: null, type: payload.type, payload: payload as unknown as Record<string, unknown>, body, createdAt });
  // No relation is declared between the entities: the event row must exist before its delivery's foreign key.
  await tx.flush();
  tx.create(WebhookDeliverySchema, {
    id: deliveryId, eventId, merchantId, paymentId: null, eventType: payload.type, url, status: 'pending', attempts: 0, nextAttemptAt: null,
  });
  await tx.flush();
  return { eventId, deliveryId, body };
}
