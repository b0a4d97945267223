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

export const notFound = (what: string) => new DomainError('NOT_FOUND', ERROR_MESSAGES.notFound(what));
export const conflict = (message: string) => new DomainError('CONFLICT', message);
export const validationError = (field: string, issue: string, message = `Invalid request: ${field} ${issue}`) =>
  new DomainError('VALIDATION_ERROR', message, [{ field, issue }]);
