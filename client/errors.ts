/** The errors the SDK throws: one base class, so `catch (e) { if (e instanceof PaymentsError) … }` covers all. */
import type { ErrorCode } from '../contract/common.js';
import { OUTCOME_HEADER } from '../contract/errors.js';

export type { ErrorCode };

/** A field-level problem in a 422 VALIDATION_ERROR. */
export interface ErrorDetail {
  field: string;
  issue: string;
}

/**
 * Payments-Outcome: unknown — the operation may have been carried out: on a 502 PROVIDER_ERROR the provider did not
 * say whether it acted; on a 500 INTERNAL_ERROR the service failed after the provider may have acted.
 */
export const outcomeUnknown = (headers: Headers) => headers.get(OUTCOME_HEADER.name) === OUTCOME_HEADER.unknown;

/** The service's error envelope, read: `{ success: false, error: { code, message, details?, request_id? } }`. */
export interface ServiceErrorEnvelope {
  code: string;
  message: string;
  details: ErrorDetail[];
  requestId: string | null;
}

/**
 * The one reading of the service's error envelope, used wherever the SDK asks whether an answer is the
 * service's own refusal (retries, mayHaveSucceeded, the error's code, a DELETE's 404): `success: false`
 * and an `error` with a non-empty string `code` and a string `message`. Anything else (a proxy's JSON that
 * merely has an `error.code`, an envelope missing its message) is not the service's: undefined.
 */
export function parseErrorEnvelope(body: unknown): ServiceErrorEnvelope | undefined {
  if (!isRecord(body) || body.success !== false || !isRecord(body.error)) return undefined;
  const { code, message, details, request_id: requestId } = body.error;
  if (typeof code !== 'string' || code === '' || typeof message !== 'string') return undefined;
  return {
    code,
    message,
    details: Array.isArray(details) ? (details.filter(isDetail) as ErrorDetail[]) : [],
    requestId: typeof requestId === 'string' && requestId ? requestId : null,
  };
}

export class PaymentsError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PaymentsError';
  }
}

/**
 * The call got an answer other than the service's success: a non-2xx status, whose `code` is the envelope's
 * error code (`UNEXPECTED_RESPONSE` when the body was not the service's error envelope, e.g. a proxy's 502
 * page), or an answer the service never gives, always `UNEXPECTED_RESPONSE`: a redirect (3xx, not followed)
 * or a 2xx without the `{ success: true, data }` envelope (an SSO proxy's login page, a wrong baseUrl).
 * A redirect did not come from the service, which never redirects, so the request did not reach it:
 * `mayHaveSucceeded` is false (an http:// baseUrl redirected to https:// fails so: use the https address).
 * A 2xx without the envelope came from something else after the request may have reached the service, so
 * for a write (POST, PUT, DELETE) `mayHaveSucceeded` is true.
 * Quote `requestId` when asking for support. The status describes the last attempt only: when
 * `mayHaveSucceeded` is true, the operation may have been (or may yet be) carried out all the same.
 */
export class PaymentsApiError extends PaymentsError {
  readonly code: ErrorCode | 'UNEXPECTED_RESPONSE';
  readonly status: number;
  readonly requestId: string | null;
  readonly details: ErrorDetail[];
  /** The response body as received (parsed JSON, or text). */
  readonly body: unknown;
  readonly headers: Headers;
  /**
   * The Idempotency-Key the request carried (yours, or the one the SDK generated), else undefined.
   * To try the same operation again later, pass it as `{ idempotencyKey }`: a new call would generate a new key.
   * A payment creation's key replays for as long as the payment exists; a refund's, capture's or card save's
   * only within IDEMPOTENCY_KEY_RETENTION (24 h by default) of its first answer (a replay does not extend it): later, the key is unknown and the
   * call is a new request (a refund refunds again), so read the state first (refunds.list, cards.list).
   */
  readonly idempotencyKey: string | undefined;
  /**
   * True for the 409 CONFLICT that says something is still running, not refused: a request with this
   * Idempotency-Key (payments.create, refunds.create, capture, cards.create), another store or deletion
   * of the same provider's credentials (merchant.storeCredentials, merchant.deleteCredentials), or another
   * attempt sending the delivery webhookLogs.retry asked for (that POST is never retried by the SDK: call it
   * again shortly). It carries Retry-After; the SDK retried the others until its retries ran out. Unlike every
   * other CONFLICT it is not final: the operation may still complete — retry later with the same
   * `idempotencyKey` (never a new one) to get its result.
   */
  readonly inProgress: boolean;
  /**
   * True when an earlier attempt of this call may have been carried out although its answer was lost: no
   * answer once connected, a timeout, a 5xx that can follow work (not 501, 505, the service's own 503 in its
   * error envelope — a proxy's 503 without it may have forwarded the request — nor 502
   * PROVIDER_ERROR), or a 409 `inProgress` for its Idempotency-Key. Then this error's status may describe
   * the state after that attempt (the same fact that makes a DELETE's later 404 resolve as `alreadyDeleted`).
   */
  readonly earlierAttemptMayHaveSucceeded: boolean;
  /**
   * True when this call's operation may have been, or may yet be, carried out although it threw:
   * `earlierAttemptMayHaveSucceeded`, this answer is a 5xx that can follow work, it is `inProgress` for
   * this call's Idempotency-Key, or it carries `Payments-Outcome: unknown`: a 502 PROVIDER_ERROR whose provider did not
   * say whether it acted (a capture may have charged the buyer), or a 500 INTERNAL_ERROR after the provider may have
   * acted (the service could not record its answer); or it is a write's UNEXPECTED_RESPONSE 2xx without the envelope
   * (not the service's answer; a redirect is false: the request never reached the service). Never retry such a call
   * with a new key, nor undo the order on it: retry with `idempotencyKey`, or read the resource's state
   * (e.g. `payments.get`). (false: this call changed nothing; a 502 the provider refused is false.)
   */
  readonly mayHaveSucceeded: boolean;

  constructor(init: {
    status: number;
    code: PaymentsApiError['code'];
    message: string;
    requestId: string | null;
    details?: ErrorDetail[];
    body: unknown;
    headers: Headers;
    idempotencyKey?: string | undefined;
    earlierAttemptMayHaveSucceeded?: boolean;
    mayHaveSucceeded?: boolean;
  }) {
    super(init.message);
    this.name = 'PaymentsApiError';
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.details = init.details ?? [];
    this.body = init.body;
    this.headers = init.headers;
    this.idempotencyKey = init.idempotencyKey;
    // The service's passing conflicts (something still running) are its only 409s with Retry-After.
    this.inProgress = init.status === 409 && init.headers.has('retry-after');
    this.earlierAttemptMayHaveSucceeded = init.earlierAttemptMayHaveSucceeded ?? false;
    this.mayHaveSucceeded = init.mayHaveSucceeded ?? this.earlierAttemptMayHaveSucceeded;
  }

  /**
   * Builds the error from a response, reading the `{ success: false, error: {…} }` envelope when present.
   * `call` is what the SDK's transport knew of the call's attempts (its result carries those fields).
   */
  static fromResponse(
    status: number,
    body: unknown,
    headers: Headers,
    idempotencyKey?: string,
    call: { earlierAttemptMayHaveSucceeded?: boolean; mayHaveSucceeded?: boolean; notRepeatable?: string; sentRequestId?: string } = {},
  ): PaymentsApiError {
    // The id the answer names, else the one the attempt sent (a proxy's own page names none; its log may).
    const headerRequestId = headers.get('x-request-id') ?? call.sentRequestId ?? null;
    const error = parseErrorEnvelope(body);
    const unknown = outcomeUnknown(headers);
    const known = {
      body,
      headers,
      idempotencyKey,
      earlierAttemptMayHaveSucceeded: call.earlierAttemptMayHaveSucceeded === true,
      mayHaveSucceeded: call.mayHaveSucceeded === true || unknown,
    };
    const retryWith = idempotencyKey ? `retry with the same idempotencyKey (${idempotencyKey})` : 'retry with the same Idempotency-Key';
    const why = status === 502 ? 'the provider did not say whether it was done' : 'the service could not record whether the provider did it';
    const outcome = (message: string) => (unknown ? `${message}; ${why}, so it may have been carried out: ${retryWith} or read its current state, and do not treat it as refused` : message);
    const note = (message: string) => outcome(call.notRepeatable && call.mayHaveSucceeded ? `${message}; ${call.notRepeatable}` : message);
    // Success statuses and redirects: not the service's answer, whatever the body says (isSuccessEnvelope decided it is not one).
    if (status < 400) {
      const location = headers.get('location');
      const what =
        status >= 300 && status < 400
          ? `HTTP ${status} redirect${location ? ` to ${location}` : ''}, which the SDK does not follow (check baseUrl: use the https:// address the service is at)`
          : status === 0
            ? 'a redirect, which the SDK does not follow (check baseUrl: use the https:// address the service is at)'
            : `HTTP ${status} without the service's { success: true, data } envelope (content-type ${headers.get('content-type') ?? 'none'}; check baseUrl)`;
      return new PaymentsApiError({ ...known, status, code: 'UNEXPECTED_RESPONSE', message: note(what), requestId: headerRequestId });
    }
    if (error) {
      return new PaymentsApiError({
        ...known,
        status,
        code: error.code as ErrorCode,
        message: note(error.message),
        requestId: error.requestId ?? headerRequestId,
        details: error.details,
      });
    }
    return new PaymentsApiError({
      ...known,
      status,
      code: 'UNEXPECTED_RESPONSE',
      message: note(`HTTP ${status} without the service's error envelope`),
      requestId: headerRequestId,
    });
  }
}

/**
 * No response arrived: a network error or the per-attempt timeout, after any retries. The operation may
 * or may not have been carried out (`mayHaveSucceeded`). Retrying with the same `idempotencyKey` is safe
 * while the service keeps the key: always for payments.create; for refunds.create, payments.capture and
 * cards.create within IDEMPOTENCY_KEY_RETENTION (24 h by default) of its first answer (a replay does not extend it) — after that the key is
 * forgotten and a retry is a new request (a refund refunds again, a card save saves a second card), so
 * read the state first (refunds.list({ payment_id }), cards.list).
 */
export class PaymentsConnectionError extends PaymentsError {
  /** The Idempotency-Key every attempt carried (yours, or the one the SDK generated), else undefined. */
  readonly idempotencyKey: string | undefined;
  /**
   * False only when no attempt can have been carried out: every one was refused before it was sent (a
   * refused connection, a failed DNS lookup, or 408/429 answers and 503s in the service's error envelope), or nothing was sent at all.
   * Otherwise an attempt reached the service, or may have, and its answer was lost.
   */
  readonly mayHaveSucceeded: boolean;
  /**
   * The X-Request-Id the last attempt carried (the SDK's UUID, or your own on a raw call), which the service
   * logs the request under if it reached it: quote it when asking what became of a call whose answer was
   * lost. Null when no attempt was started. The service keeps only a well-formed id (up to 128 of
   * A–Z a–z 0–9 . _ : -) and logs a request with another under one of its own.
   */
  readonly requestId: string | null;

  constructor(
    message: string,
    readonly attempts: number,
    options?: { cause?: unknown; idempotencyKey?: string | undefined; mayHaveSucceeded?: boolean; requestId?: string | null },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'PaymentsConnectionError';
    this.idempotencyKey = options?.idempotencyKey;
    this.mayHaveSucceeded = options?.mayHaveSucceeded ?? attempts > 0;
    this.requestId = options?.requestId ?? null;
  }
}

/**
 * The call's own `signal` aborted it (e.g. `signal: AbortSignal.timeout(10_000)`); `cause` is the signal's
 * reason. `attempts` counts the requests started: 0 means nothing was sent, otherwise one may have reached
 * the service and been carried out. Like any PaymentsConnectionError it carries the call's `idempotencyKey`
 * (also when nothing was sent): retry with it, never with a new key, so a create or refund happens once;
 * and the `requestId` of the last request it started (null when none was).
 */
export class PaymentsAbortError extends PaymentsConnectionError {
  constructor(message: string, attempts: number, options: { cause: unknown; idempotencyKey?: string | undefined; mayHaveSucceeded?: boolean; requestId?: string | null }) {
    super(message, attempts, options);
    this.name = 'PaymentsAbortError';
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function isDetail(value: unknown): boolean {
  return isRecord(value) && typeof value.field === 'string' && typeof value.issue === 'string';
}
