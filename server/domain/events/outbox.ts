import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { EventSchema, MerchantSchema, WebhookDeliverySchema } from '../../persistence/entities/index.js';
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
  // before its delivery (webhook_deliveries.event_id is a foreign key): write it first.
  await tx.flush();
  const merchant = await tx.findOneOrFail(MerchantSchema, { id: input.merchantId });
  if (!merchant.webhookUrl) return { eventId, deliveryId: null };
  const deliveryId = randomUUID();
  tx.create(WebhookDeliverySchema, {
    id: deliveryId,
    eventId,
    merchantId: input.merchantId,
    paymentId: input.paymentId,
    eventType: input.type,
    url: merchant.webhookUrl,
    status: 'pending',
    attempts: 0,
    nextAttemptAt: createdAt,
  });
  return { eventId, deliveryId };
}
