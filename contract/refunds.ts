import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema, IdParamsSchema, OptionalIdempotencyHeaders, TimestampSchema, UuidSchema, commonErrorResponses, envelope, intQuery, pageQuery, listEnvelope } from './common.js';
import { AmountInputSchema, DateTimeQuery, metadataSchema } from './payments.js';

const c = initContract();

/** Refund statuses, declared once: the domain's state table and the database check use this list. */
export const REFUND_STATUSES = ['pending', 'completed', 'failed'] as const;
export const RefundStatusSchema = z.enum(REFUND_STATUSES);
export type RefundStatus = z.infer<typeof RefundStatusSchema>;

export const RefundSchema = extendApi(
  z.object({
    id: UuidSchema,
    payment_id: UuidSchema,
    status: RefundStatusSchema,
    provider_ref: z.string().nullable(),
    amount: z.string(),
    currency: z.string(),
    failure_reason: z.string().nullable(),
    metadata: z.record(z.string(), z.string()).describe('The metadata given at creation ({} when none)'),
    created_at: TimestampSchema,
  }),
  {
    title: 'Refund',
    example: { id: '3f2b1c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d', payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', status: 'completed', provider_ref: 're_3Nq…', amount: '5.00', currency: 'USD', failure_reason: null, metadata: { return_id: 'RMA-2291' }, created_at: '2026-11-22T10:20:00.000Z' },
  },
);

export const refundsContract = c.router(
  {
    create: {
      method: 'POST',
      path: '/v1/refunds',
      summary: 'Refund a payment',
      description:
        'Refunds a completed payment in full (no amount) or in part. A cardpay or walletpay refund is usually completed in the answer; one the ' +
        'provider reports as pending, or does not answer (a timeout or outage: the outcome is unknown), is answered 201 with status pending — a real ' +
        'refund, counted against what remains — and stays pending until the provider\'s event or the refund sync settles it (completed, or failed ' +
        'with refund.failed); do not ask for it again with a new key. A mobilemoney refund is an asynchronous reversal of the full amount that ' +
        'stays pending until the operator reports the result. 502 PROVIDER_ERROR when the provider refused the refund, or when the request never ' +
        'reached it — a mobilemoney reversal whose operator could not be reached at all (no connection: refused, not resolved, not made in time; or ' +
        'its access token could not be had), so nothing was sent: the refund is then failed, and you may ask again. A request whose outcome is ' +
        'unknown (it may have reached the provider) is never 502: it is 201 with the refund pending. ' +
        'With an Idempotency-Key, a retry returns the first answer (Idempotent-Replayed: true), showing the refund as it is now, and does not refund ' +
        'again — within 24 hours of the key\'s first answer (IDEMPOTENCY_KEY_RETENTION; a replay does not extend it): after that the key is forgotten and a retry with it is a new refund.',
      metadata: { scope: 'refunds:write', tag: 'Refunds' } as const,
      headers: OptionalIdempotencyHeaders,
      body: z.object({ payment_id: UuidSchema, amount: AmountInputSchema.optional(), metadata: metadataSchema('refund', 'a return or ticket number, a reason').optional() }).strict(),
      responses: { 201: envelope(RefundSchema), 404: ErrorBodySchema, 409: ErrorBodySchema, 502: ErrorBodySchema },
    },
    list: {
      method: 'GET',
      path: '/v1/refunds',
      summary: 'List refunds',
      description:
        "With payment_id, that payment's refunds, oldest first; without, all of the merchant's refunds, newest first. Filters combine: " +
        'status (e.g. pending: refunds the provider has not settled yet), since and until (creation time).',
      metadata: { scope: 'refunds:read', tag: 'Refunds' } as const,
      query: z
        .object({
          payment_id: UuidSchema.optional().describe("One payment's refunds (404 when the payment is unknown)"),
          status: RefundStatusSchema.optional(),
          since: DateTimeQuery.optional().describe('Created after this instant'),
          until: DateTimeQuery.optional().describe('Created before this instant'),
          page: pageQuery(),
          page_size: intQuery({ min: 1, max: 100, default: 50, description: 'Items per page, at most 100' }),
        })
        .strict(),
      responses: { 200: listEnvelope(RefundSchema), 404: ErrorBodySchema },
    },
    get: {
      method: 'GET',
      path: '/v1/refunds/:id',
      summary: 'Get a refund',
      description: 'Returns one refund and its status; failure_reason is set when it failed.',
      metadata: { scope: 'refunds:read', tag: 'Refunds' } as const,
      pathParams: IdParamsSchema,
      responses: { 200: envelope(RefundSchema), 404: ErrorBodySchema },
    },
  },
  { commonResponses: commonErrorResponses },
);
