import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema, IdParamsSchema, TimestampSchema, UuidSchema, commonErrorResponses, envelope, intQuery, pageQuery, listEnvelope } from './common.js';

const c = initContract();

/** The event types a merchant's webhook receives (interface.md "Events"; `webhook.test` from POST /v1/webhooks/test). */
export const WEBHOOK_EVENT_TYPES = ['payment.completed', 'payment.failed', 'payment.refunded', 'payment.reversed', 'refund.failed', 'webhook.test'] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const DELIVERY_STATUSES = ['pending', 'delivered', 'retrying', 'dead'] as const;
export const DeliveryStatusSchema = z.enum(DELIVERY_STATUSES);

const NullableTimestamp = TimestampSchema.nullable();

const DeliveryFields = z.object({
  id: UuidSchema.describe('Delivery id, sent as X-Webhook-Id on every attempt: de-duplicate on it'),
  event_id: UuidSchema.describe('The event id (the body\'s `id`)'),
  event_type: z.enum(WEBHOOK_EVENT_TYPES),
  payment_id: UuidSchema.nullable(),
  url: z.string().describe('Where the last attempt went (the webhook URL registered at the time)'),
  status: DeliveryStatusSchema.describe('pending (queued: not tried yet, or queued again by POST /v1/webhooks/recover), delivered (a 2xx answer), retrying (failed, next attempt booked), dead (retries exhausted, or the webhook URL was removed: last_error "no webhook URL registered")'),
  attempts: z.number().int().describe('Attempts so far, manual retries included'),
  last_response_status: z.number().int().nullable().describe('HTTP status of the last attempt; null when no response arrived'),
  last_error: z.string().nullable(),
  next_attempt_at: NullableTimestamp.describe('When the next scheduled attempt is due; null once delivered or dead'),
  delivered_at: NullableTimestamp,
  created_at: TimestampSchema,
});

export const DeliveryLogSchema = extendApi(
  DeliveryFields,
  {
    title: 'WebhookDelivery',
    example: {
      id: '3f2b8c1d-9e4a-4b7c-8d6e-5f4a3b2c1d0e', event_id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d', event_type: 'payment.completed',
      payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', url: 'https://shop.example.com/payments/webhook', status: 'retrying', attempts: 2,
      last_response_status: 503, last_error: 'HTTP 503', next_attempt_at: '2026-11-22T10:18:01.000Z', delivered_at: null,
      created_at: '2026-11-22T10:15:30.000Z',
    },
  },
);

export const DeliveryAttemptSchema = z.object({
  attempt_number: z.number().int(),
  trigger: z.enum(['scheduled', 'manual']),
  response_status: z.number().int().nullable().describe('null when no response arrived (network error, timeout, URL refused)'),
  error: z.string().nullable(),
  duration_ms: z.number().int(),
  created_at: TimestampSchema,
});

export const DeliveryLogDetailSchema = extendApi(DeliveryFields.extend({ attempt_history: z.array(DeliveryAttemptSchema) }), {
  title: 'WebhookDeliveryDetail',
  example: {
    id: '3f2b8c1d-9e4a-4b7c-8d6e-5f4a3b2c1d0e', event_id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d', event_type: 'payment.completed',
    payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', url: 'https://shop.example.com/payments/webhook', status: 'delivered', attempts: 2,
    last_response_status: 200, last_error: null, next_attempt_at: null, delivered_at: '2026-11-22T10:16:01.000Z',
    created_at: '2026-11-22T10:15:30.000Z',
    attempt_history: [
      { attempt_number: 1, trigger: 'scheduled', response_status: 503, error: 'HTTP 503', duration_ms: 41, created_at: '2026-11-22T10:15:31.000Z' },
      { attempt_number: 2, trigger: 'scheduled', response_status: 200, error: null, duration_ms: 37, created_at: '2026-11-22T10:16:01.000Z' },
    ],
  },
});

export const ListWebhookLogsQuerySchema = z
  .object({
    status: DeliveryStatusSchema.optional(),
    event_type: z.enum(WEBHOOK_EVENT_TYPES).optional(),
    payment_id: UuidSchema.optional(),
    page: pageQuery(),
    page_size: intQuery({ min: 1, max: 100, default: 50, description: 'Items per page, at most 100' }),
  })
  .strict();
export type ListWebhookLogsQuery = z.infer<typeof ListWebhookLogsQuerySchema>;

const read = { scope: 'webhooks:read', tag: 'Webhooks' } as const;

/** The merchant's outbound webhook deliveries. `/logs` comes before `/logs/:id` for Express. */
export const webhookLogsContract = c.router(
  {
    list: {
      method: 'GET',
      path: '/v1/webhooks/logs',
      summary: 'List webhook deliveries',
      description:
        "Lists the merchant's outbound event deliveries, newest first, with their status and the outcome of the last attempt. " +
        'Filters combine with AND; an unknown filter value, page below 1 or page_size above 100 is 422.',
      metadata: read,
      query: ListWebhookLogsQuerySchema,
      responses: { 200: listEnvelope(DeliveryLogSchema) },
    },
    get: {
      method: 'GET',
      path: '/v1/webhooks/logs/:id',
      summary: 'Get a webhook delivery with its attempts',
      description: "Returns one delivery and every attempt made (scheduled or manual), oldest first. Another merchant's delivery is 404.",
      metadata: read,
      pathParams: IdParamsSchema,
      responses: { 200: envelope(DeliveryLogDetailSchema), 404: ErrorBodySchema },
    },
    retry: {
      method: 'POST',
      path: '/v1/webhooks/logs/:id/retry',
      summary: 'Retry a webhook delivery now',
      description:
        'Re-sends a dead or retrying delivery at once, within this request, with the same event body and X-Webhook-Id. A 2xx answer marks it ' +
        'delivered; a failure is recorded and leaves its status and schedule unchanged. Any other status (pending, delivered) is 409. ' +
        'A delivery being sent right now (a scheduled attempt or another retry waiting for the endpoint) is 409 with Retry-After: 1: retry then. ' +
        'While twice WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT (32 by default) of the merchant\'s webhook requests are open in the process, the retry ' +
        'is refused at once: 429 with Retry-After, nothing sent.',
      metadata: { scope: 'webhooks:write', tag: 'Webhooks' } as const,
      pathParams: IdParamsSchema,
      body: c.noBody(),
      responses: { 200: envelope(DeliveryLogSchema), 404: ErrorBodySchema, 409: ErrorBodySchema },
    },
  },
  { commonResponses: commonErrorResponses },
);
