import type { Logger } from '../../observability/logger.js';
import { DomainError, validationError } from '../errors.js';
import type { CredentialsIssue } from '../ports.js';

/**
 * The answer to a request the merchant's stored credentials cannot make (CredentialsIssue: a refund, a
 * transaction-status query), given before anything is written or sent. A field the merchant did not store
 * is theirs to fix: 422 naming it (`<provider>.<field>`, as the credentials' own validation does).
 * Something this service's configuration lacks (an operator certificate) is neither the merchant's doing
 * nor a refusal by the provider: 503 (with Retry-After, as every 503), nothing sent, and an error in the
 * log for the operator, with the setting to fix; the message to the merchant names no setting of ours.
 * `what`: the requests, in the plural ("refunds"); `nothingMade`: what else was not done, if anything.
 */
export function cannotSendWith(
  logger: Logger,
  issue: CredentialsIssue,
  request: { merchantId: string; provider: string; what: string; nothingMade?: string },
): DomainError {
  const { merchantId, provider, what, nothingMade } = request;
  if ('merchant' in issue) return validationError(`${provider}.${issue.merchant.field}`, issue.merchant.issue);
  logger.error({ merchantId, provider, reason: issue.operator }, `${provider} ${what} refused before anything was sent: this service is not configured for them`);
  return new DomainError(
    'SERVICE_UNAVAILABLE',
    `${provider} ${what} cannot be sent by this service at the moment (its own configuration, not your credentials); nothing was sent${nothingMade ? ` and ${nothingMade}` : ''}: retry later`,
  );
}
