import type { ErrorCode } from '../../contract/index.js';
import { ERROR_MESSAGES } from '../../contract/errors.js';

export interface FieldIssue {
  field: string;
  issue: string;
}

/**
 * An expected failure the merchant can act on. The HTTP layer maps `code` to a status in one table
 * (http/error-map.ts); anything that is not a DomainError becomes a 500 without internals.
 */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: FieldIssue[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/**
 * The provider was asked but its answer did not say what happened (a timeout, an outage): the resource
 * stays pending for the provider's event or the sync. An Idempotency-Key does not keep this answer as
 * final: a replay answers the resource once it is settled (idempotency-keys.ts, `undecided`). The error
 * handler marks every such answer with Payments-Outcome: unknown, so clients never read it as a refusal.
 */
export class OutcomeUnknownError extends DomainError {
  constructor(code: ErrorCode, message: string, headers?: Record<string, string>) {
    super(code, message, undefined, headers);
    this.name = 'OutcomeUnknownError';
  }
}

/**
 * A failure of ours — no database connection free to record the answer (a capacity error would otherwise
 * be the 503 that says nothing was done), a bug — once a request's work may have reached the provider:
 * its provider call was sent or may have been, or its reservation (a pending payment or refund, which
 * the status and refund syncs carry through to the provider) was committed. The customer may have been
 * charged or refunded, so it is answered as an unknown outcome: 500 INTERNAL_ERROR with Payments-Outcome:
 * unknown. The request's Idempotency-Key is released, not answered: a retry with it resumes the request
 * (a resumed creation looks the payment up at the provider before it sends anything again, and then only
 * with the same provider idempotency key), so it settles the resource and never acts twice.
 * `failure` is what failed, for the log only.
 */
export class OutcomeNotRecordedError extends OutcomeUnknownError {
  constructor(readonly failure: unknown) {
    super('INTERNAL_ERROR', ERROR_MESSAGES.outcomeNotRecorded);
    this.name = 'OutcomeNotRecordedError';
  }
}

/**
 * A failure of ours after a request already acted outside the database — a webhook sent to the merchant's
 * endpoint (a test event, a manual retry), deliveries queued again and handed to the workers (recover) —
 * so it must never be answered as "nothing was done" (the 503s of a database out of reach or out of
 * connections): a plain 500. `failure` is what failed, kept out of `cause` so that it is not read as the
 * request's own failure to start; for the log only.
 */
export class AlreadyActedError extends Error {
  constructor(readonly failure: unknown, readonly acted: string) {
    super(`failed after ${acted}: ${(failure as Error)?.message ?? String(failure)}`);
    this.name = 'AlreadyActedError';
  }
}

/**
 * The answer to `err` thrown once the provider may have acted (see OutcomeNotRecordedError): a DomainError
 * as it is (it says what happened), anything else as an OutcomeNotRecordedError.
 */
export function afterProviderMayHaveActed(err: unknown): unknown {
  return err instanceof DomainError ? err : new OutcomeNotRecordedError(err);
}

export const notFound = (what: string) => new DomainError('NOT_FOUND', ERROR_MESSAGES.notFound(what));
export const conflict = (message: string) => new DomainError('CONFLICT', message);
/**
 * A 409 that passes: something is still running (a request under the same Idempotency-Key, a store of the
 * same credentials, an attempt of the same delivery). Retry-After tells clients to retry (the SDK's
 * PaymentsApiError.inProgress); every other CONFLICT is final.
 */
export const stillRunning = (message: string) => new DomainError('CONFLICT', message, undefined, { 'Retry-After': '1' });
export const validationError = (field: string, issue: string, message = `Invalid request: ${field} ${issue}`) =>
  new DomainError('VALIDATION_ERROR', message, [{ field, issue }]);
