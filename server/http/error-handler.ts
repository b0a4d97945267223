import type { ErrorRequestHandler, RequestHandler } from 'express';
import { RequestValidationError } from '@ts-rest/express';
import type { ErrorCode } from '../../contract/index.js';
import type { ZodError, ZodIssue } from 'zod';
import { AlreadyActedError, DomainError, OutcomeNotRecordedError, OutcomeUnknownError, type FieldIssue } from '../domain/errors.js';
import { SecretUnreadableError } from '../domain/crypto/secret-box.js';
import type { Logger } from '../observability/logger.js';
import { sendError } from './envelope.js';
import { HTTP_STATUS, isCapacityExhausted, isDatabaseUnreachable, RETRY_AFTER_SECONDS } from './error-map.js';
import { ERROR_MESSAGES, OUTCOME_HEADER } from '../../contract/errors.js';

function issueToField(prefix: string | null, issue: ZodIssue): FieldIssue[] {
  const base = [...(prefix ? [prefix] : []), ...issue.path.map(String)].join('.');
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => ({ field: base ? `${base}.${key}` : key, issue: 'is not a known field' }));
  }
  let text = issue.message;
  if (issue.code === 'invalid_type' && issue.received === 'undefined') text = 'is required';
  else if (issue.code === 'invalid_union_discriminator') text = `must be one of: ${issue.options.map(String).join(', ')}`;
  else if (issue.code === 'invalid_enum_value') text = `must be one of: ${issue.options.map(String).join(', ')}`;
  return [{ field: base || (prefix ?? 'body'), issue: text }];
}

function zodDetails(prefix: string | null, error: ZodError | null): FieldIssue[] {
  return error ? error.issues.flatMap((i) => issueToField(prefix, i)) : [];
}

/**
 * Path parameters that are a value the merchant asks about (check-status's receipt or CheckoutRequestID),
 * not the id of a resource: one that does not match is the merchant's 422 naming it. Any other path
 * parameter that does not parse names no resource (404).
 */
const VALUE_PATH_PARAMS = new Set(['code']);

/** The issues of a path that failed only on value parameters; null when an id failed (404). */
function pathValueDetails(error: ZodError): FieldIssue[] | null {
  const onValues = error.issues.every((i) => VALUE_PATH_PARAMS.has(String(i.path[0])));
  return onValues ? zodDetails(null, error) : null;
}

export function validationDetails(err: RequestValidationError): FieldIssue[] {
  return [
    ...zodDetails('header', err.headers),
    ...zodDetails('query', err.query),
    ...zodDetails(null, err.body),
  ].map((d) => (d.field.startsWith('header.') ? { ...d, field: d.field.slice('header.'.length) } : d))
   .map((d) => (d.field.startsWith('query.') ? { ...d, field: d.field.slice('query.'.length) } : d));
}

/** What body-parser 1.x (express 4) inflates; br is not among them. */
const CONTENT_ENCODINGS = 'gzip, deflate or identity';

/**
 * The 4xx errors of reading a body (body-parser / raw-body / zlib, marked with a 4xx `status`), as
 * the envelope's code and a message; null for anything else. A body that does not match its
 * Content-Encoding is a zlib error body-parser marks 400.
 */
function bodyReadError(err: unknown): { code: ErrorCode; message: string } | null {
  const e = err as { type?: unknown; status?: unknown; statusCode?: unknown; code?: unknown };
  const status = Number(e?.status ?? e?.statusCode);
  if (!(status >= 400 && status < 500)) return null;
  switch (e.type) {
    case 'entity.too.large':
      return { code: 'PAYLOAD_TOO_LARGE', message: ERROR_MESSAGES.payloadTooLarge };
    case 'entity.parse.failed':
      return { code: 'BAD_REQUEST', message: 'Request body is not valid JSON' };
    case 'encoding.unsupported':
      return { code: 'BAD_REQUEST', message: `Unsupported Content-Encoding; use ${CONTENT_ENCODINGS}` };
    case 'charset.unsupported':
      return { code: 'BAD_REQUEST', message: 'Unsupported request body charset; send UTF-8' };
    default:
      break;
  }
  if (typeof e.code === 'string' && e.code.startsWith('Z_')) {
    return { code: 'BAD_REQUEST', message: 'Request body does not match its Content-Encoding' };
  }
  if (status === 413) return { code: 'PAYLOAD_TOO_LARGE', message: 'Request body is too large' };
  if (status === 404) return { code: 'NOT_FOUND', message: 'No such route' };
  return { code: 'BAD_REQUEST', message: 'Request body could not be read' };
}

/** Unknown route: 404 in the envelope. */
export const notFoundHandler: RequestHandler = (_req, res) => {
  sendError(res, 'NOT_FOUND', ERROR_MESSAGES.noSuchRoute);
};

/** Maps every error to the envelope; internals never reach the response. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    if (res.headersSent) return;
    if (err instanceof RequestValidationError) {
      // A path id that does not even parse (not a UUID, unknown provider) is an unknown resource.
      const pathDetails = err.pathParams ? pathValueDetails(err.pathParams) : [];
      if (!pathDetails) return sendError(res, 'NOT_FOUND', ERROR_MESSAGES.resourceNotFound);
      const details = [...pathDetails, ...validationDetails(err)];
      const first = details[0];
      return sendError(res, 'VALIDATION_ERROR', first ? ERROR_MESSAGES.invalidRequest(first.field, first.issue) : 'Invalid request', details);
    }
    if (err instanceof OutcomeNotRecordedError) {
      // What failed after the provider may have acted (the logger's err serializer keeps SQL out): the
      // operator's business, as any other 500 is; the payment or refund stays pending for the sync.
      const capacity = isCapacityExhausted(err.failure);
      logger.error(
        { requestId: res.locals.requestId, route: req.path, err: err.failure, ...(capacity ? { capacityExhausted: true } : {}) },
        'failed after the provider may have acted; answered 500 with Payments-Outcome: unknown',
      );
    } else if (err instanceof DomainError && HTTP_STATUS[err.code] >= 500) {
      // A provider that failed us is the operator's business too: the merchant's message (which names the
      // provider and what it said, never a secret) goes to the log with the request id.
      logger.warn({ requestId: res.locals.requestId, route: req.path, code: err.code, reason: err.message }, 'answered with a server-side error');
    }
    if (err instanceof DomainError) {
      // The one place an unknown outcome is marked: the client must not read it as "nothing was done".
      const marked = err instanceof OutcomeUnknownError ? { ...err.headers, [OUTCOME_HEADER.name]: OUTCOME_HEADER.unknown } : err.headers;
      // Every 503 tells when to retry, as the ones below do (openapi.json documents Retry-After on each): a
      // domain's own (a refund or status query this service is not configured to send) included.
      const headers = HTTP_STATUS[err.code] === 503 && !marked?.['Retry-After'] ? { ...marked, 'Retry-After': String(RETRY_AFTER_SECONDS) } : marked;
      return sendError(res, err.code, err.message, err.details, headers);
    }
    // Express could not percent-decode a path parameter (/v1/payments/%zz): like an id that does not
    // parse, it names no resource. Without this it fell through to 500.
    if (err instanceof URIError) return sendError(res, 'NOT_FOUND', ERROR_MESSAGES.resourceNotFound);
    const bodyError = bodyReadError(err);
    if (bodyError) return sendError(res, bodyError.code, bodyError.message);
    if (err instanceof AlreadyActedError) {
      // Never one of the 503s below, which say nothing was done.
      logger.error({ requestId: res.locals.requestId, route: req.path, err: err.failure, acted: err.acted }, 'failed after the request acted; answered 500');
      return sendError(res, 'INTERNAL_ERROR', ERROR_MESSAGES.internal);
    }
    if (isCapacityExhausted(err)) {
      logger.warn({ requestId: res.locals.requestId, route: req.path, err: { type: (err as Error)?.name } }, 'database capacity exhausted; answered 503');
      return sendError(res, 'SERVICE_UNAVAILABLE', ERROR_MESSAGES.overloaded, undefined, { 'Retry-After': String(RETRY_AFTER_SECONDS) });
    }
    if (isDatabaseUnreachable(err)) {
      // No connection could be opened, so nothing was sent for the statement: the request stopped there.
      logger.warn({ requestId: res.locals.requestId, route: req.path, err }, 'database unreachable; answered 503');
      return sendError(res, 'SERVICE_UNAVAILABLE', ERROR_MESSAGES.databaseUnreachable, undefined, { 'Retry-After': String(RETRY_AFTER_SECONDS) });
    }
    if (err instanceof SecretUnreadableError) {
      // An operator's key configuration, not a bug: said once at boot too (service.ts). Another process of a
      // rolling deploy may hold the key, so the client (or provider) is told to retry.
      logger.error({ requestId: res.locals.requestId, route: req.path, reason: err.message }, 'stored secret cannot be opened with ENCRYPTION_KEY or DECRYPTION_KEYS; answered 503');
      return sendError(res, 'SERVICE_UNAVAILABLE', ERROR_MESSAGES.secretsUnreadable, undefined, { 'Retry-After': String(RETRY_AFTER_SECONDS) });
    }
    // The logger's err serializer keeps SQL, its parameters and request data out of the log.
    logger.error({ requestId: res.locals.requestId, route: req.path, err }, 'unhandled error');
    return sendError(res, 'INTERNAL_ERROR', ERROR_MESSAGES.internal);
  };
}
