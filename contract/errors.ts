/**
 * The ONE table of the service's generic error messages. The runtime sends exactly these (error
 * handler, JSON body parser, auth and metrics middleware) and openapi.json shows them as the error
 * examples, so the document cannot drift from what clients receive.
 */
import type { ErrorCode } from './common.js';

export const ERROR_MESSAGES = {
  invalidJson: 'Request body is not valid JSON',
  payloadTooLarge: 'Request body is larger than 100 KiB',
  unauthorized: 'Missing, unknown or revoked API key (send it in the X-API-Key header)',
  missingScope: (scope: string) => `This API key lacks the required scope: ${scope}`,
  noSuchRoute: 'No such route',
  resourceNotFound: 'Resource not found',
  /** An id that parses but names nothing this merchant owns. */
  notFound: (what: string) => `${what} not found`,
  invalidRequest: (field: string, issue: string) => `Invalid request: ${field} ${issue}`,
  rateLimited: (who: string, rule: string) => `Too many requests ${who}: at most ${rule}`,
  internal: 'Internal error; quote the request id when contacting support',
  overloaded: 'The service is temporarily overloaded; retry after a moment',
  /** Stored credentials or signing secrets this server cannot decrypt (its operator's key configuration). */
  secretsUnreadable: 'The service cannot read the stored provider credentials right now; nothing was sent to the provider, retry after a moment',
  callbackSignature: (header: string) => `Invalid or missing ${header}`,
  metricsToken: 'Missing or wrong metrics token (send Authorization: Bearer <METRICS_TOKEN>)',
  // Domain errors carry their own specific messages; these are real instances, for the examples.
  conflictExample: 'payment is pending; only a completed payment can be refunded',
  providerErrorExample: 'cardpay refused the payment: Invalid API Key provided',
} as const;

export interface DocumentedError {
  code: ErrorCode;
  /** The response description in openapi.json. */
  description: string;
  /** A message the service really sends with this status. */
  message: string;
}

/** Per HTTP status: the code the service answers with, and its example message. */
export const DOCUMENTED_ERRORS: Record<string, DocumentedError> = {
  '400': { code: 'BAD_REQUEST', description: 'Malformed JSON (BAD_REQUEST)', message: ERROR_MESSAGES.invalidJson },
  '401': { code: 'UNAUTHORIZED', description: 'Missing, unknown or revoked API key (UNAUTHORIZED)', message: ERROR_MESSAGES.unauthorized },
  '403': { code: 'FORBIDDEN', description: 'The API key lacks the scope this operation needs (FORBIDDEN)', message: ERROR_MESSAGES.missingScope('payments:write') },
  '404': { code: 'NOT_FOUND', description: 'Unknown id, or an id owned by another merchant (NOT_FOUND)', message: ERROR_MESSAGES.resourceNotFound },
  '409': { code: 'CONFLICT', description: 'Conflict with the current state (CONFLICT)', message: ERROR_MESSAGES.conflictExample },
  '413': { code: 'PAYLOAD_TOO_LARGE', description: 'Body larger than 100 KiB (PAYLOAD_TOO_LARGE)', message: ERROR_MESSAGES.payloadTooLarge },
  '422': { code: 'VALIDATION_ERROR', description: 'Invalid input, with field details (VALIDATION_ERROR)', message: ERROR_MESSAGES.invalidRequest('amount', 'must be greater than 0') },
  '429': { code: 'RATE_LIMITED', description: 'Too many requests; wait for Retry-After seconds (RATE_LIMITED)', message: ERROR_MESSAGES.rateLimited('for this API key', '100 a second') },
  '500': { code: 'INTERNAL_ERROR', description: 'Unexpected error; quote the request id (INTERNAL_ERROR)', message: ERROR_MESSAGES.internal },
  '502': { code: 'PROVIDER_ERROR', description: 'The provider was unreachable or refused the request (PROVIDER_ERROR)', message: ERROR_MESSAGES.providerErrorExample },
  '503': {
    code: 'SERVICE_UNAVAILABLE',
    description: 'The service cannot serve the request right now (no database capacity free, or stored credentials this server cannot decrypt); nothing was sent to the provider, retry after Retry-After seconds with the same Idempotency-Key (SERVICE_UNAVAILABLE)',
    message: ERROR_MESSAGES.overloaded,
  },
};

/** What each provider's callback answers when it cannot be verified (401). */
export const CALLBACK_UNVERIFIED = {
  cardpay: ERROR_MESSAGES.callbackSignature('Cardpay-Signature'),
  walletpay: 'Invalid walletpay transmission signature',
  mobilemoney: 'Callback could not be verified',
} as const;
