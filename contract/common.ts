import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';

export const PROVIDERS = ['cardpay', 'mobilemoney', 'walletpay'] as const;
export const ProviderSchema = z.enum(PROVIDERS);
export type Provider = z.infer<typeof ProviderSchema>;

export const SCOPES = [
  'payments:read', 'payments:write', 'refunds:read', 'refunds:write',
  'merchant:read', 'merchant:write', 'webhooks:read', 'webhooks:write',
] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * Route metadata: the scope a key needs (read by the auth middleware), or none for provider callbacks;
 * the tag in /docs; and, for a route taking an Idempotency-Key whose replay answers with another success
 * status than its first answer, that status (openapi.json documents it; by default a replay answers
 * with the route's own success status).
 */
/**
 * `outcomeMayBeUnknown`: the route's 502 may carry Payments-Outcome: unknown (contract/errors.ts OUTCOME_HEADER).
 * `callbackHeaders`: a provider callback's headers as the provider spells them, and whether its verification
 * needs them. The verification checks them (a missing one is 401, as any unverified callback), so the zod
 * schema keeps them all optional — a required zod header would make a missing one a 422 validation error;
 * openapi.json marks the needed ones required.
 */
export type RouteMetadata = {
  readonly scope: Scope | null;
  readonly tag: string;
  readonly replayStatus?: 200 | 201;
  readonly outcomeMayBeUnknown?: true;
  readonly callbackHeaders?: Readonly<Record<string, 'required' | 'optional'>>;
};

export const ERROR_CODES = [
  'BAD_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'NOT_FOUND', 'CONFLICT', 'PAYLOAD_TOO_LARGE',
  'VALIDATION_ERROR', 'RATE_LIMITED', 'PROVIDER_ERROR', 'INTERNAL_ERROR', 'SERVICE_UNAVAILABLE',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

const errorBodyShape = {
  success: z.literal(false),
  error: z.object({
    code: z.enum(ERROR_CODES),
    message: z.string(),
    details: z.array(z.object({ field: z.string(), issue: z.string() })).optional(),
    request_id: z.string(),
  }),
};

/**
 * ErrorBodySchema's type, named: every route answers it under several statuses, and declarations (the
 * SDK's) then name it there instead of spelling its zod type out each time (~800 KB of them, which a
 * merchant's compiler would read and check).
 */
export interface ErrorBodyZod extends z.ZodObject<typeof errorBodyShape, 'strip'> {}

export const ErrorBodySchema: ErrorBodyZod = extendApi(
  z.object(errorBodyShape),
  {
    title: 'Error',
    description: 'Every error uses this envelope.',
    example: {
      success: false,
      error: {
        code: 'VALIDATION_ERROR',
        message: 'The request is invalid',
        details: [{ field: 'amount', issue: 'must be greater than 0' }],
        request_id: '6f1c1c1e-6c1a-4a57-9a57-1f0c3b9b9b0e',
      },
    },
  },
);
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** `{ success: true, data }` around a resource. */
export function envelope<T extends z.ZodTypeAny>(data: T) {
  return z.object({ success: z.literal(true), data });
}

export const PageMetaSchema = extendApi(
  z.object({
    page: z.number().int(),
    page_size: z.number().int(),
    total: z.number().int(),
  }),
  { example: { page: 1, page_size: 20, total: 1 } },
);

/** `{ success: true, data: [...], meta: { page, page_size, total } }` around a list. */
export function listEnvelope<T extends z.ZodTypeAny>(item: T) {
  return z.object({ success: z.literal(true), data: z.array(item), meta: PageMetaSchema });
}

/** Error responses every authenticated route can give. */
export const commonErrorResponses = {
  400: ErrorBodySchema,
  401: ErrorBodySchema,
  403: ErrorBodySchema,
  413: ErrorBodySchema,
  422: ErrorBodySchema,
  429: ErrorBodySchema,
  500: ErrorBodySchema,
  503: ErrorBodySchema,
} as const;

export const UuidSchema = extendApi(z.string().uuid(), { format: 'uuid', example: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21' });
export const IdParamsSchema = z.object({ id: UuidSchema });

export const TimestampSchema = extendApi(z.string(), { format: 'date-time', example: '2026-11-22T10:15:30.000Z' });

/** Header every merchant route takes; documented once as the X-API-Key security scheme. */
export const API_KEY_HEADER = 'x-api-key';

/** The page number query parameter: from 1, and small enough to stay an exact integer offset. */
export const pageQuery = () => intQuery({ min: 1, max: 10_000_000, default: 1, description: 'Page number, from 1' });

/** Integer query parameter given as a string (`?page=2`). */
export function intQuery(opts: { min: number; max?: number; default: number; description: string }) {
  const inner = z
    .string()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(opts.max === undefined ? z.number().int().min(opts.min) : z.number().int().min(opts.min).max(opts.max));
  return extendApi(inner.optional().transform((v) => v ?? opts.default), {
    type: 'integer',
    minimum: opts.min,
    ...(opts.max === undefined ? {} : { maximum: opts.max }),
    default: opts.default,
    description: opts.description,
  });
}

/**
 * The Idempotency-Key header, the same rule on every route that takes one: 1–255 printable ASCII
 * characters. Anything else would be stored and echoed garbled (headers are read as latin-1) and
 * could never be found again by search.
 */
export const IdempotencyKeySchema = extendApi(
  z
    .string()
    .min(1, 'is required')
    .max(255, 'must be at most 255 characters')
    .regex(/^[\x20-\x7e]*$/, 'must be printable ASCII (letters, digits, punctuation, spaces)'),
  { description: 'Unique per attempt: 1–255 printable ASCII characters', example: 'order-1042' },
);

/**
 * The optional Idempotency-Key of POST /v1/refunds, /v1/payments/{id}/capture and /v1/payments/cards:
 * with it, a retry replays the first answer and does not act again while the key is kept — 24 hours
 * after its first answer by default (a replay does not extend it) (IDEMPOTENCY_KEY_RETENTION, server/domain/payments/idempotency-key-retention.ts);
 * after that the key is unknown and a retry is a new request. The same key with another body is 409.
 */
export const OptionalIdempotencyHeaders = z.object({
  'idempotency-key': IdempotencyKeySchema.optional().describe(
    'Optional. A retry with the same key and body returns the first answer (status and resource, Idempotent-Replayed: true) and does not act again ' +
      'while the key is kept: 24 hours after its first answer (the IDEMPOTENCY_KEY_RETENTION default; a replay does not extend it). After that the key is unknown and a retry is a new ' +
      'request — a refund retried then refunds again, a card save saves a second card. The same key with another body is 409. ' +
      'A retry after an answer that kept no answer for the key (a 500 or 502 with Payments-Outcome: unknown, a capture not sent, or no answer at all) ' +
      'resumes that request and answers as a first request, without Idempotent-Replayed',
  ),
});
