/**
 * The ONE table of the service's generic error messages. The runtime sends exactly these (error
 * handler, JSON body parser, auth and metrics middleware) and openapi.json shows them as the error
 * examples, so the document cannot drift from what clients receive.
 */
import type { ErrorCode } from './common.js';

export const ERROR_MESSAGES = {
  invalidJson: 'Request body is not valid JSON',
  /** A body sent as a form, text or without a Content-Type (the header, cut short, is echoed). */
  notJson: (contentType: string | undefined) =>
    `Request body must be JSON sent with Content-Type: application/json (got ${contentType ? contentType.slice(0, 60) : 'no Content-Type'})`,
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
  /** No connection to the database could be opened (it is down, unreachable or refusing them). */
  databaseUnreachable: 'The service cannot reach its database right now; nothing was done, retry after a moment',
  /** A failure after the provider may have acted (answered with Payments-Outcome: unknown). */
  outcomeNotRecorded:
    'The provider may have acted on this request, but the service could not record its outcome: do not treat it as refused, nor send it again without the same Idempotency-Key; retry with the same key if it had one, otherwise read the resource (GET) before doing anything',
  /** Stored credentials or signing secrets this server cannot decrypt (its operator's key configuration). */
  secretsUnreadable: 'The service cannot read the stored provider credentials right now; nothing was sent to the provider, retry after a moment',
  callbackSignature: (header: string) => `Invalid or missing ${header}`,
  metricsToken: 'Missing or wrong metrics token (send Authorization: Bearer <METRICS_TOKEN>)',
  /** A webhook operation that needs the merchant's URL (a test event, a recover) when none is registered. */
  noWebhookUrl: 'No webhook URL is registered: register one with PUT /v1/merchant/webhook first',
} as const;

/**
 * The response header of an error whose operation's outcome is unknown: the operation may have been carried out.
 * A 502 PROVIDER_ERROR when the provider did not say whether it acted (no answer in time, an outage, its server
 * error); a 500 INTERNAL_ERROR when the service failed after the provider may have acted (its answer could not be
 * recorded). Retry with the same Idempotency-Key, or read the resource. A refusal the provider gave never carries it.
 */
export const OUTCOME_HEADER = { name: 'Payments-Outcome', unknown: 'unknown' } as const;

export interface DocumentedError {
  code: ErrorCode;
  /** The response description in openapi.json. */
  description: string;
  /** A message the service really sends with this status. */
  message: string;
}

/**
 * Per HTTP status: the code the service answers with, its description, and — for the statuses every route
 * answers alike (400, 401, 403, 413, 429, 500, 503, and a path id that does not parse) — its example message.
 * A 404 on a path without an id, and every 409, 422 and 502, says something only its route says: those
 * examples come from ROUTE_ERROR_EXAMPLES, never from here.
 */
export const DOCUMENTED_ERRORS: Record<string, DocumentedError> = {
  '400': { code: 'BAD_REQUEST', description: 'Malformed JSON, or a body not sent as application/json (BAD_REQUEST)', message: ERROR_MESSAGES.invalidJson },
  '401': { code: 'UNAUTHORIZED', description: 'Missing, unknown or revoked API key (UNAUTHORIZED)', message: ERROR_MESSAGES.unauthorized },
  '403': { code: 'FORBIDDEN', description: 'The API key lacks the scope this operation needs (FORBIDDEN)', message: ERROR_MESSAGES.missingScope('payments:write') },
  '404': { code: 'NOT_FOUND', description: 'Unknown id, or an id owned by another merchant (NOT_FOUND)', message: ERROR_MESSAGES.resourceNotFound },
  '409': { code: 'CONFLICT', description: 'Conflict with the current state (CONFLICT)', message: '' },
  '413': { code: 'PAYLOAD_TOO_LARGE', description: 'Body larger than 100 KiB (PAYLOAD_TOO_LARGE)', message: ERROR_MESSAGES.payloadTooLarge },
  '422': { code: 'VALIDATION_ERROR', description: 'Invalid input, with field details (VALIDATION_ERROR)', message: '' },
  '429': { code: 'RATE_LIMITED', description: 'Too many requests for this API key, or too many failed authentications (missing, unknown or revoked key) from this address; wait for Retry-After seconds (RATE_LIMITED)', message: ERROR_MESSAGES.rateLimited('for this API key', '100 a second') },
  '500': { code: 'INTERNAL_ERROR', description: 'Unexpected error; quote the request id (INTERNAL_ERROR)', message: ERROR_MESSAGES.internal },
  '502': { code: 'PROVIDER_ERROR', description: 'The provider was unreachable or refused the request (PROVIDER_ERROR)', message: '' },
  '503': {
    code: 'SERVICE_UNAVAILABLE',
    description:
      'The service cannot serve the request right now (no database connection free or none could be opened, or stored credentials this server cannot decrypt; ' +
      'for a mobilemoney refund or transaction-status query, an operator certificate this service is not configured with); nothing was sent to the provider, ' +
      'retry after Retry-After seconds with the same Idempotency-Key (SERVICE_UNAVAILABLE)',
    message: ERROR_MESSAGES.overloaded,
  },
};

/**
 * Operations (as openapi.json names them) with a second 429 besides the API key's budget: the merchant's
 * webhook requests open at once in the process (twice WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT). That 429 is
 * not the budget's: the request was counted like any other, and its X-RateLimit-Remaining says what
 * the budget has left (not 0), so a client pacing itself on the header does not stop its other requests.
 */
export const OPEN_REQUESTS_BOUND_429 = {
  operations: ['POST /v1/webhooks/test', 'POST /v1/webhooks/logs/{id}/retry'] as readonly string[],
  description:
    "Too many requests for this API key, or too many of the merchant's webhook requests open at once (twice WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT; " +
    "message 'Too many requests to your webhook endpoint: …', Retry-After: 1). Wait for Retry-After seconds. X-RateLimit-Remaining is the " +
    "key's budget either way: 0 only when the budget refused (RATE_LIMITED)",
};

/** What each provider's callback answers when it cannot be verified (401). */
export const CALLBACK_UNVERIFIED = {
  cardpay: ERROR_MESSAGES.callbackSignature('Cardpay-Signature'),
  walletpay: 'Invalid walletpay transmission signature',
  mobilemoney: 'Callback could not be verified',
} as const;

/** A route's own error example: the message, and for a 422 the field detail it carries. */
export interface RouteErrorExample {
  message: string;
  details?: { field: string; issue: string }[];
  /** The response description, when the table's generic one does not fit this route. */
  description?: string;
  /** This answer carries Retry-After: when, and what to do then (documented as the response's header). */
  retryAfter?: string;
}

const invalid = (field: string, issue: string, description?: string): RouteErrorExample => ({
  message: ERROR_MESSAGES.invalidRequest(field, issue),
  details: [{ field, issue }],
  ...(description ? { description } : {}),
});

/** What a provider simulator in an outage (a 500) makes the service answer; the real providers' 5xx read alike. */
const EXAMPLE_ID = '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21';
/** A provider callback whose JSON is not an object (or whose query is too long): refused before verification. */
const CALLBACK_NOT_AN_OBJECT = invalid('body', 'Expected object, received array', 'The body is not a JSON object, or a query parameter is longer than allowed (VALIDATION_ERROR)');
const KEY_REUSED = 'This Idempotency-Key was already used with a different request body';
/** A live-env report on a reversal (its result or its timeout) that overtakes the record of its request's acknowledgement. */
const REVERSAL_REPORT_EARLY: RouteErrorExample = {
  message: 'mobilemoney reversal result arrived before its request was recorded; retry later',
  description: "The report arrived before the service recorded the operator's acknowledgement of the reversal request; nothing was applied, and the operator sends it again (PROVIDER_ERROR)",
};

/**
 * The errors a retry with the same Idempotency-Key replays (marked Idempotent-Replayed), per route that takes
 * one: only an error the request ended with once its key was claimed and its work begun. Refusals before the
 * claim (an unknown payment, a body or state the route refuses, a key used otherwise) keep no answer for the
 * key; a refused payment creation's key stands for the failed payment (200 with it); a refusal of a card save
 * for missing credentials, like an unknown outcome, is resumed by the retry.
 */
export const REPLAYED_ERRORS: Record<string, readonly ('404' | '409' | '422' | '502')[]> = {
  'POST /v1/payments': [],
  'POST /v1/payments/cards': ['422', '502'],
  'POST /v1/payments/{id}/capture': ['502'],
  'POST /v1/refunds': ['502'],
};

/**
 * Per operation, as openapi.json names it (`METHOD /path`): the error examples only that route sends — a
 * 404 on a path without an id, and its 409, 422 and 502. Each is a message the route really answers
 * (test/docs/openapi-quality.test.ts provokes every one and compares). openapi.json is not generated
 * while an operation documents one of these statuses without an entry here.
 */
export const ROUTE_ERROR_EXAMPLES: Record<string, Partial<Record<'404' | '409' | '422' | '502', RouteErrorExample>>> = {
  'PUT /v1/merchant/webhook': { '422': invalid('webhook_url', 'Invalid url') },
  'PUT /v1/merchant/credentials': {
    '409': {
      message: "another store or deletion of this merchant's cardpay credentials is still running; retry once it has finished",
      description:
        'Another store or a deletion of credentials for this provider (cardpay, walletpay: those that register the callback URL with the provider) is still running; nothing was stored by this request. ' +
        'It carries Retry-After: 1, as the other passing conflicts do (an Idempotency-Key still being processed, a deletion during a store): retry then (CONFLICT). ' +
        'A store whose process died holds this off until its lease ends: 6 × PROVIDER_TIMEOUT_MS (90 s by default).',
      retryAfter: 'Always sent on this conflict (1): retry the store after this many seconds, once the other one has finished.',
    },
    '422': invalid('provider', 'must be one of: cardpay, walletpay, mobilemoney'),
    '502': {
      message: 'cardpay rejected the credentials while registering the callback URL: cardpay refused the credentials: Invalid API Key provided: sk_test_****docs',
      description: 'The provider refused the credentials, or could not be reached, while the service registered its callback URL with them; nothing was stored (PROVIDER_ERROR)',
    },
  },
  'DELETE /v1/merchant/credentials/{provider}': {
    '404': { message: ERROR_MESSAGES.notFound('cardpay credentials'), description: 'No credentials are stored for this provider, or the provider is unknown (NOT_FOUND)' },
    '409': {
      message: "a store or deletion of this merchant's cardpay credentials is still running; nothing was deleted, retry once it has finished",
      description:
        'A store (or another deletion) of credentials for this provider (cardpay, walletpay: those that register the callback URL with the provider) is still running; ' +
        'nothing was deleted: deleted now, the running store would put its credentials back a moment later. It carries Retry-After: 1, as the other passing conflicts do: retry then (CONFLICT). ' +
        'A store whose process died holds the deletion off until its lease ends: 6 × PROVIDER_TIMEOUT_MS (90 s by default); credentials that leaked are revoked at the provider first in any case.',
      retryAfter: 'Always sent on this conflict (1): retry the deletion after this many seconds, once the store has finished.',
    },
  },
  'POST /v1/payments/cards': {
    '409': { message: KEY_REUSED, description: 'The Idempotency-Key was used with another body, or its first request is still running (CONFLICT)' },
    '422': invalid('payment_method_id', 'is required'),
    '502': {
      message: 'cardpay could not save the card: cardpay answered HTTP 500: An unknown error occurred.',
      description: 'cardpay refused, or could not be reached, before saving the card: nothing was saved. When cardpay did not say whether it acted (no answer in time, a dropped connection, its server error) the customer may have been created and the card attached: the answer carries `Payments-Outcome: unknown` — retry with the same Idempotency-Key, which resumes the save and gets that customer and card back instead of saving a second (PROVIDER_ERROR)',
    },
  },
  'GET /v1/payments/cards': { '422': invalid('page', 'Number must be greater than or equal to 1') },
  'POST /v1/payments/mobilemoney/check-status/{code}': {
    '404': { message: ERROR_MESSAGES.notFound('payment'), description: "A CheckoutRequestID (ws_CO_…) that names none of the merchant's payments (NOT_FOUND)" },
    '422': {
      message: 'mobilemoney credentials are not configured for this merchant',
      details: [{ field: 'provider', issue: 'no mobilemoney credentials configured; store them with PUT /v1/merchant/credentials' }],
      description:
        'The code is neither a receipt number (letters and digits) nor a CheckoutRequestID (ws_CO_…) (details field code), no mobilemoney credentials are stored, or the body is not empty; or, for a receipt, live credentials lack what a transaction-status query needs ' +
        '(details field mobilemoney.initiator, or mobilemoney.initiator_password when neither initiator_password nor security_credential is stored), as a refund with them is: ' +
        'nothing is recorded or sent (VALIDATION_ERROR)',
    },
    '502': { message: 'mobilemoney transaction status query failed: mobilemoney transaction status query failed, operator internal error (500.003.1001): Internal Server Error' },
  },
  'POST /v1/payments/mobilemoney/reconcile': {
    '422': invalid(
      'since',
      'must be an ISO 8601 date-time',
      'A bound that is not an ISO 8601 date-time, or a window the pull cannot serve: since older than 48 hours ago, until older than that or in the future ' +
        '(a minute of clock difference allowed at either end), since not before until, or longer than 48 hours (VALIDATION_ERROR)',
    ),
    '502': { message: 'mobilemoney pull query failed: mobilemoney pull query failed, operator internal error (500.003.1001): Internal Server Error' },
  },
  'POST /v1/payments/mobilemoney/register-pull': {
    '422': invalid('nominated_number', 'must be in the format 254XXXXXXXXX'),
    '502': { message: 'mobilemoney pull registration failed: mobilemoney pull registration failed, operator internal error (500.003.1001): Internal Server Error' },
  },
  'POST /v1/payments': {
    '409': { message: KEY_REUSED, description: 'The Idempotency-Key was used with another body or by another merchant, or its first request is still running (CONFLICT)' },
    '422': invalid('amount', 'must be greater than 0'),
    '502': {
      message: "cardpay refused the payment: cardpay rejected the request: No such PaymentMethod: 'pm_docs_unknown'",
      description:
        'The provider refused the request outright (for mobilemoney, also: the operator could not be reached or did nothing, as a push cannot be repeated); ' +
        'the payment is failed with failure_reason (PROVIDER_ERROR). The Idempotency-Key now stands for ' +
        'that failed payment: a retry with the same key and body answers 200 with it (its failure_reason, Idempotent-Replayed: true), not this 502 again; ' +
        'to try again, send a new key',
    },
  },
  'GET /v1/payments': { '422': invalid('status', 'must be one of: pending, completed, failed, refunded, reversed') },
  'POST /v1/payments/{id}/capture': {
    '409': {
      message: 'the buyer has not approved this payment yet',
      description: 'The payment is not a pending walletpay payment, the buyer has not approved it (or must approve again), or the Idempotency-Key was used with another payment (CONFLICT)',
    },
    '422': {
      ...invalid('idempotency-key', 'must be at most 255 characters'),
      description:
        'Invalid request, or no credentials configured for the payment\'s provider: nothing was sent (VALIDATION_ERROR). With an Idempotency-Key this keeps no answer for the key — ' +
        'also when a retry resuming an earlier capture with it finds the credentials deleted since: the retry with the key once they are stored again sends the capture',
    },
    '502': {
      message: 'walletpay capture failed: walletpay answered 500 INTERNAL_SERVER_ERROR: An internal server error has occurred.',
      description: 'walletpay refused the capture, or did not answer or refused before acting (rate-limited, credentials), or the order could not be read before the capture (an outage, a timeout: no capture sent, the message says `capture not sent`): nothing about the capture is final — the payment stays pending. After no answer, a refusal before acting or a capture not sent, a retry with the same Idempotency-Key sends the capture again (PayPal answers with the first capture if there was one); after another refusal the key replays this 502, and a capture with a new key sends it again. Nothing else sends a capture: retry before the order expires. When walletpay did not say whether it captured a capture that was sent (no answer in time, an outage, its server error), or answered it without the capture and the order could then not be read, the capture may have happened: the answer carries `Payments-Outcome: unknown` — never void the order then; retry with the same Idempotency-Key or read the payment. So does a request that sent nothing after an earlier capture request of the payment whose outcome is unknown (PROVIDER_ERROR)',
    },
  },
  'POST /v1/refunds': {
    '404': { message: ERROR_MESSAGES.notFound('payment'), description: 'payment_id names no payment of this merchant (NOT_FOUND)' },
    '409': { message: 'payment is pending; only a completed payment can be refunded' },
    '422': invalid('amount', 'must be greater than 0'),
    '502': {
      message: 'cardpay refused the refund: cardpay rejected the request: Refund amount (2500 usd) is greater than unrefunded amount on charge (2000 usd)',
      description:
        'The provider refused the refund (an amount it will not refund, credentials refused), or the request never reached it (a mobilemoney reversal ' +
        'whose operator could not be reached: its connection refused, not resolved or not made in time, or its access token not had; the message ' +
        'then says the reversal was not sent): the refund is failed (PROVIDER_ERROR) and a new refund may be asked for. A request whose outcome is ' +
        'unknown — one that may have reached the provider and was not answered (a timeout, a cardpay or walletpay outage) — is no error: 201 with the refund pending',
    },
  },
  'GET /v1/refunds': {
    '404': { message: ERROR_MESSAGES.notFound('payment'), description: 'payment_id names no payment of this merchant (NOT_FOUND)' },
    '422': invalid('status', 'must be one of: pending, completed, failed'),
  },
  'GET /v1/webhooks/logs': { '422': invalid('status', 'must be one of: pending, delivered, retrying, dead') },
  'POST /v1/webhooks/logs/{id}/retry': {
    '409': {
      message: 'Only a dead or retrying delivery can be retried; this one is delivered',
      description:
        'The delivery is pending or delivered: only a dead or retrying one can be retried, and retrying does not change that. Or it is being sent ' +
        "right now (a scheduled attempt or another retry is waiting for the endpoint; message 'The delivery is being sent right now; try again shortly'): " +
        'that conflict carries Retry-After: 1, as the other passing conflicts do (an Idempotency-Key still being processed, a store of credentials running): retry then (CONFLICT)',
      retryAfter: 'Sent only when the delivery is being sent right now (1): retry after this many seconds. Absent on the other conflict, which retrying does not change.',
    },
  },
  'POST /v1/webhooks/recover': {
    '409': { message: ERROR_MESSAGES.noWebhookUrl, description: 'No webhook URL is registered: nothing is queued, as nothing could be sent (CONFLICT)' },
    '422': invalid('since', 'must be an ISO 8601 date-time'),
  },
  'POST /v1/webhooks/test': {
    '409': { message: ERROR_MESSAGES.noWebhookUrl },
    '422': invalid('url', 'is not a known field'),
  },
  'GET /v1/events': { '422': invalid('type', 'must be one of: payment.completed, payment.failed, payment.refunded, payment.reversed, refund.failed, webhook.test') },
  'POST /v1/webhooks/cardpay': {
    '422': CALLBACK_NOT_AN_OBJECT,
    '409': { message: `payment ${EXAMPLE_ID} is not completed here yet; its refund re_3Nq8ZrLkdIwHu7ix0dV4Gp2a is applied once it is: send the notification again later` },
    '502': { message: 'cardpay could not be asked about the refunded payment; retry later' },
  },
  'POST /v1/webhooks/walletpay': {
    '422': CALLBACK_NOT_AN_OBJECT,
    '409': { message: `payment ${EXAMPLE_ID} is not completed here yet; its refund 1JU08902781691411 is applied once it is: send the notification again later` },
    '502': { message: 'walletpay notification verification is unavailable; retry later' },
  },
  // A result or a queue timeout: both report on a reversal request (InboundPipeline.confirmReversal), alike.
  ...Object.fromEntries(
    ['/reversal/result', '/reversal/timeout'].map((sub) => [`POST /v1/webhooks/mobilemoney${sub}`, { '422': CALLBACK_NOT_AN_OBJECT, '502': REVERSAL_REPORT_EARLY }]),
  ),
  ...Object.fromEntries(
    ['', '/transactionstatus/result', '/transactionstatus/timeout'].map((sub) => [`POST /v1/webhooks/mobilemoney${sub}`, { '422': CALLBACK_NOT_AN_OBJECT }]),
  ),
};
