/** The errors the SDK throws: one base class, so `catch (e) { if (e instanceof PaymentsError) … }` covers all. */
import type { ErrorCode } from '../contract/common.js';

export type { ErrorCode };

/** A field-level problem in a 422 VALIDATION_ERROR. */
export interface ErrorDetail {
  field: string;
  issue: string;
}

export class PaymentsError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PaymentsError';
  }
}

/**
 * The service answered with a non-2xx status. `code` is the envelope's error code
 * (`UNEXPECTED_RESPONSE` when the body was not the service's error envelope, e.g. a proxy's 502 page).
 * Quote `requestId` when asking for support.
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
   */
  readonly idempotencyKey: string | undefined;

  constructor(init: {
    status: number;
    code: PaymentsApiError['code'];
    message: string;
    requestId: string | null;
    details?: ErrorDetail[];
    body: unknown;
    headers: Headers;
    idempotencyKey?: string | undefined;
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
  }

  /** Builds the error from a response, reading the `{ success: false, error: {…} }` envelope when present. */
  static fromResponse(status: number, body: unknown, headers: Headers, idempotencyKey?: string): PaymentsApiError {
    const headerRequestId = headers.get('x-request-id');
    const error = isRecord(body) && isRecord(body.error) ? body.error : undefined;
    if (error && typeof error.code === 'string' && typeof error.message === 'string') {
      const details = Array.isArray(error.details) ? (error.details.filter(isDetail) as ErrorDetail[]) : [];
      return new PaymentsApiError({
        status,
        code: error.code as ErrorCode,
        message: error.message,
        requestId: typeof error.request_id === 'string' && error.request_id ? error.request_id : headerRequestId,
        details,
        body,
        headers,
        idempotencyKey,
      });
    }
    return new PaymentsApiError({
      status,
      code: 'UNEXPECTED_RESPONSE',
      message: `HTTP ${status} without the service's error envelope`,
      requestId: headerRequestId,
      body,
      headers,
      idempotencyKey,
    });
  }
}

/**
 * No response arrived: a network error or the per-attempt timeout, after any retries. The operation may
 * or may not have been carried out; retrying later with the same `idempotencyKey` is safe.
 */
export class PaymentsConnectionError extends PaymentsError {
  /** The Idempotency-Key every attempt carried (yours, or the one the SDK generated), else undefined. */
  readonly idempotencyKey: string | undefined;

  constructor(
    message: string,
    readonly attempts: number,
    options?: { cause?: unknown; idempotencyKey?: string | undefined },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'PaymentsConnectionError';
    this.idempotencyKey = options?.idempotencyKey;
  }
}

/**
 * The call's own `signal` aborted it (e.g. `signal: AbortSignal.timeout(10_000)`); `cause` is the signal's
 * reason. `attempts` counts the requests started: 0 means nothing was sent, otherwise one may have reached
 * the service and been carried out. Like any PaymentsConnectionError it carries the call's `idempotencyKey`
 * (also when nothing was sent): retry with it, never with a new key, so a create or refund happens once.
 */
export class PaymentsAbortError extends PaymentsConnectionError {
  constructor(message: string, attempts: number, options: { cause: unknown; idempotencyKey?: string | undefined }) {
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
