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

  constructor(init: { status: number; code: PaymentsApiError['code']; message: string; requestId: string | null; details?: ErrorDetail[]; body: unknown; headers: Headers }) {
    super(init.message);
    this.name = 'PaymentsApiError';
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.details = init.details ?? [];
    this.body = init.body;
    this.headers = init.headers;
  }

  /** Builds the error from a response, reading the `{ success: false, error: {…} }` envelope when present. */
  static fromResponse(status: number, body: unknown, headers: Headers): PaymentsApiError {
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
      });
    }
    return new PaymentsApiError({
      status,
      code: 'UNEXPECTED_RESPONSE',
      message: `HTTP ${status} without the service's error envelope`,
      requestId: headerRequestId,
      body,
      headers,
    });
  }
}

/** No response arrived: a network error or the per-attempt timeout, after any retries. */
export class PaymentsConnectionError extends PaymentsError {
  constructor(
    message: string,
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'PaymentsConnectionError';
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function isDetail(value: unknown): boolean {
  return isRecord(value) && typeof value.field === 'string' && typeof value.issue === 'string';
}
