import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema, IdParamsSchema, ProviderSchema, TimestampSchema, UuidSchema, commonErrorResponses, envelope, intQuery, listEnvelope, pageQuery } from './common.js';
import { DateTimeQuery } from './payments.js';
import { WEBHOOK_EVENT_TYPES } from './webhook-logs.js';

const c = initContract();

const PaymentEventDataSchema = extendApi(
  z.object({
    payment_id: UuidSchema,
    amount: z.string(),
    currency: z.string(),
    provider: ProviderSchema,
    status: z.string().describe("The payment's status after the event"),
    previous_status: z.string(),
    refund_id: UuidSchema.optional().describe('payment.refunded, refund.failed and payment.reversed only: the refund'),
    amount_refunded: z.string().optional().describe("payment.refunded, refund.failed and payment.reversed only: the payment's amount_refunded after the event"),
    failure_reason: z.string().optional().describe('refund.failed only: why the refund failed (payment.failed carries none: GET /v1/payments/{id} has the payment\'s failure_reason)'),
  }),
  { title: 'PaymentEventData' },
);

const TestEventDataSchema = extendApi(z.object({ message: z.string(), merchant_id: UuidSchema }), { title: 'TestEventData' });

/** An event exactly as its webhook body is (or will be) delivered. */
export const EventSchema = extendApi(
  z.object({
    id: UuidSchema.describe('The event id (every delivery of it sends this body)'),
    type: z.enum(WEBHOOK_EVENT_TYPES),
    created_at: TimestampSchema,
    data: z.union([PaymentEventDataSchema, TestEventDataSchema]),
  }),
  {
    title: 'Event',
    description: 'Exactly the JSON body POSTed to the webhook URL for this event.',
    example: {
      id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d', type: 'payment.completed', created_at: '2026-11-22T10:15:31.000Z',
      data: { payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'completed', previous_status: 'pending' },
    },
  },
);

export type EventBody = z.infer<typeof EventSchema>;

export const ListEventsQuerySchema = z
  .object({
    type: z.enum(WEBHOOK_EVENT_TYPES).optional(),
    payment_id: UuidSchema.optional(),
    since: DateTimeQuery.optional().describe("Created after this instant. An event is stamped when it is written, not when it is committed, so one can appear after events stamped later: to poll, use the newest `created_at` seen less a margin (five minutes) and de-duplicate by `id`"),
    until: DateTimeQuery.optional().describe('Created before this instant'),
    page: pageQuery(),
    page_size: intQuery({ min: 1, max: 100, default: 50, description: 'Items per page, at most 100' }),
  })
  .strict();

const read = { scope: 'webhooks:read', tag: 'Events' } as const;

/** The events the outbox holds for the merchant, kept for EVENT_RETENTION (30 days by default). */
export const eventsContract = c.router(
  {
    list: {
      method: 'GET',
      path: '/v1/events',
      summary: 'List events',
      description:
        "Lists the merchant's events, newest first, each exactly as its webhook body is (or will be) delivered, whether or not a webhook URL " +
        'was registered at the time: catch up after your endpoint was down (the `id` of an event is the body `id` of its delivery, whose X-Webhook-Id is a ' +
        'different, delivery id: de-duplicate the two channels on the event id). Events are kept for the retention period (30 days by default). ' +
        'Filters combine with AND; an unknown filter value, page below 1 or page_size above 100 is 422.',
      metadata: read,
      query: ListEventsQuerySchema,
      responses: { 200: listEnvelope(EventSchema) },
    },
    get: {
      method: 'GET',
      path: '/v1/events/:id',
      summary: 'Get an event',
      description: "Returns one event exactly as its webhook body is delivered. Another merchant's event, or one past the retention period, is 404.",
      metadata: read,
      pathParams: IdParamsSchema,
      responses: { 200: envelope(EventSchema), 404: ErrorBodySchema },
    },
  },
  { commonResponses: commonErrorResponses },
);
