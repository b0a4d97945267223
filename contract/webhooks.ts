import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema, UuidSchema, commonErrorResponses, envelope } from './common.js';
import { DateTimeQuery } from './payments.js';

const c = initContract();

/** How far back POST /v1/webhooks/recover reaches. */
export const RECOVER_MAX_DAYS = 7;

export const RecoverBodySchema = extendApi(
  z
    .object({
      since: DateTimeQuery.describe(`Deliveries created after this instant; at most ${RECOVER_MAX_DAYS} days ago`),
      until: DateTimeQuery.optional().describe('Deliveries created before this instant (default: now)'),
    })
    .strict(),
  { example: { since: '2026-11-21T00:00:00.000Z' } },
);

export const RecoverResultSchema = extendApi(
  z.object({
    queued: z.number().int().describe('Deliveries queued again by this call'),
    since: z.string(),
    until: z.string(),
  }),
  { title: 'RecoverResult', example: { queued: 3, since: '2026-11-21T00:00:00.000Z', until: '2026-11-22T10:15:30.000Z' } },
);

export const TestDeliveryResultSchema = extendApi(
  z.object({
    delivery_id: UuidSchema.describe('The delivery, shown in the delivery log; sent as X-Webhook-Id and webhook-id'),
    event_id: UuidSchema,
    url: z.string(),
    delivered: z.boolean().describe('true on a 2xx answer'),
    response_status: z.number().int().nullable().describe('null when no response arrived'),
    duration_ms: z.number().int(),
    error: z.string().nullable(),
  }),
  {
    title: 'TestDeliveryResult',
    example: {
      delivery_id: '3f2b8c1d-9e4a-4b7c-8d6e-5f4a3b2c1d0e', event_id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d', url: 'https://shop.example.com/payments/webhook',
      delivered: true, response_status: 200, duration_ms: 84, error: null,
    },
  },
);

const write = { scope: 'webhooks:write', tag: 'Webhooks' } as const;

/** Operations on the merchant's webhook endpoint as a whole (the per-delivery ones are under /logs). */
export const webhooksContract = c.router(
  {
    recover: {
      method: 'POST',
      path: '/v1/webhooks/recover',
      summary: 'Re-send failed deliveries of a time window',
      description:
        `Queues again every retrying or dead delivery created after since and before until — at most ${RECOVER_MAX_DAYS} days back — to the CURRENT webhook URL, ` +
        'with the same X-Webhook-Id and body, and answers how many were queued. Safe to call twice: a delivery already queued again is not ' +
        'counted again. A recovered delivery that fails again continues its retry schedule where it stood when it was retrying, or dead because ' +
        'the webhook URL was removed (DELETE /v1/merchant/webhook) before its schedule was used up; one dead after using up its schedule, or a ' +
        'failed test event, is dead again after one failed attempt. No webhook URL registered is 409, nothing queued. ' +
        `A since more than ${RECOVER_MAX_DAYS} days ago, or not in the past when until is left out, or an until not after since, is 422.`,
      metadata: write,
      body: RecoverBodySchema,
      responses: { 200: envelope(RecoverResultSchema), 409: ErrorBodySchema },
    },
    test: {
      method: 'POST',
      path: '/v1/webhooks/test',
      summary: 'Send a test event to the webhook URL now',
      description:
        'Sends a signed `webhook.test` event to the registered URL within this request and answers with the attempt\'s outcome. The delivery ' +
        'appears in the delivery log like any other; a failed test is not retried (it is dead at once). No webhook URL registered is 409. ' +
        'While twice WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT (32 by default) of the merchant\'s webhook requests are open in the process (test events, ' +
        'retries and deliveries waiting for the endpoint\'s answer), a test event is refused at once: 429 with Retry-After, nothing recorded.',
      metadata: write,
      body: z.union([z.object({}).strict(), z.undefined()]).optional(),
      responses: { 200: envelope(TestDeliveryResultSchema), 409: ErrorBodySchema },
    },
  },
  { commonResponses: commonErrorResponses },
);
