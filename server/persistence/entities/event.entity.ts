import { defineEntity, type InferEntity } from '@mikro-orm/core';

export type DeliveryStatus = 'pending' | 'delivered' | 'retrying' | 'dead';

/** An outbound merchant event; `payload` is the exact JSON body every delivery of it sends. */
export const EventSchema = defineEntity({
  name: 'Event',
  tableName: 'events',
  properties: (p) => ({
    id: p.uuid().primary(),
    merchantId: p.uuid(),
    paymentId: p.uuid().nullable(),
    type: p.text(),
    payload: p.json<Record<string, unknown>>(),
    /** The serialised payload: the exact bytes signed and sent on every attempt. */
    body: p.text(),
    createdAt: p.datetime().onCreate(() => new Date()),
  }),
});
export type Event = InferEntity<typeof EventSchema>;

/** One event's delivery to the merchant's URL; `id` is the X-Webhook-Id sent on every attempt. */
export const WebhookDeliverySchema = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  properties: (p) => ({
    id: p.uuid().primary(),
    eventId: p.uuid(),
    merchantId: p.uuid(),
    paymentId: p.uuid().nullable(),
    eventType: p.text(),
    url: p.text(),
    status: p.text().$type<DeliveryStatus>(),
    attempts: p.integer().default(0),
    lastResponseStatus: p.integer().nullable(),
    lastError: p.text().nullable(),
    nextAttemptAt: p.datetime().nullable(),
    deliveredAt: p.datetime().nullable(),
    /** Set while a worker is sending it, so two workers never send one delivery at once. */
    leaseUntil: p.datetime().nullable(),
    /** Drawn afresh by every lease: an attempt's result is recorded only while the row still carries its token. */
    leaseToken: p.uuid().nullable(),
    /** Times in a row given back unsent (its signing secret could not be opened): the next give-back waits longer. */
    unsentReleases: p.integer().default(0),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  }),
});
export type WebhookDelivery = InferEntity<typeof WebhookDeliverySchema>;
