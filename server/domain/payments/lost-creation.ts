import type { Provider } from '../../../contract/index.js';
import type { Payment } from '../../persistence/entities/index.js';
import { RECONCILE_MAX_WINDOW_MS } from '../operations/reconcile-windows.js';
import { DomainError } from '../errors.js';
import { ProviderError, type PaymentLookup, type ProviderPaymentResult, type ProviderPort } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';

/**
 * How far from the end of the provider's idempotency-key retention a lost create is no longer repeated:
 * the repeat must reach the provider while it still knows the key, whatever the time a call takes (it
 * may be retried) and however far our clock is from the provider's. The payment's created_at is taken
 * before the first request is sent, so the key is never older than the payment.
 */
export const REPLAY_MARGIN_MS = 3_600_000;

/**
 * A creation that cannot be repeated (mobilemoney's push) whose answer was lost is found by reconciliation
 * only: the provider's list of settled transactions, which reaches back RECONCILE_MAX_WINDOW_MS (the
 * operator keeps 48 h). It is judged by a pull of that list, made this long after its creation: the
 * customer's prompt expires within minutes (a push is paid then or never) and a paid push is listed soon
 * after, so by 2 h a charge would be listed; and the 46 h left of the window give checks whose pull failed
 * time to try again, and the operator's own pull time to find a charge listed late (charged_but_failed).
 */
export const UNREPEATABLE_CREATION_CHECK_AFTER_MS = 2 * 3_600_000;

/** The judging pull starts this long before the payment's creation (our clock against the operator's transaction time). */
export const UNREPEATABLE_CREATION_PULL_LEAD_MS = 30 * 60_000;

/**
 * The judging pull's window: from UNREPEATABLE_CREATION_PULL_LEAD_MS before the creation to its check time
 * plus the same allowance for the clocks (or `now`, if sooner). The operator lists a transaction at the time
 * the customer paid, and a push is paid within minutes of being sent or never, so nothing of it can be
 * listed later in the window; the re-checks at 26 h and 47 h pull these 3 h again (a charge listed late is
 * still listed at its own time), not a day or two of the merchant's transactions.
 */
export function judgingPullWindow(payment: Payment, now: number): { since: Date; until: Date } {
  const created = payment.createdAt.getTime();
  const until = Math.min(now, created + UNREPEATABLE_CREATION_CHECK_AFTER_MS + UNREPEATABLE_CREATION_PULL_LEAD_MS);
  return { since: new Date(created - UNREPEATABLE_CREATION_PULL_LEAD_MS), until: new Date(until) };
}

/**
 * The provider's failure behind a failed pull when it says the provider is limiting us or could not answer
 * (its kind: a job backs off the account or counts the provider down), else null (a refusal, no credentials).
 */
export function pullOutage(err: unknown): ProviderError | null {
  const cause = err instanceof DomainError ? err.cause : err;
  return cause instanceof ProviderError && (cause.kind === 'rate_limited' || cause.kind === 'unavailable' || cause.kind === 'indeterminate') ? cause : null;
}

/**
 * When a lost creation that cannot be repeated is judged, for a provider that lists its settled transactions
 * (null otherwise: nothing is judged): from `at` on, while a pull from before its creation up to the check still
 * fits the provider's window (`pullableUntil`).
 */
export function lostCreationCheck(port: ProviderPort, payment: Payment): { at: number; pullableUntil: number } | null {
  if (port.capabilities.replayableCreate || !port.operations?.listTransactions) return null;
  const created = payment.createdAt.getTime();
  return { at: created + UNREPEATABLE_CREATION_CHECK_AFTER_MS, pullableUntil: created - UNREPEATABLE_CREATION_PULL_LEAD_MS + RECONCILE_MAX_WINDOW_MS };
}

/**
 * Reconciliation's pull for one merchant's window (ProviderOperationsService.reconcileWindow): settles what
 * it lists as reconciliation always does (a paid push completes its payment) and says which payments its
 * transactions named; throws when the provider could not list (or the merchant cannot pull).
 */
export type ReconciliationPull = (merchantId: string, provider: Provider, since: Date, until: Date) => Promise<{ results: readonly { payment_id?: string; reason?: string }[] }>;

/**
 * What to do about a pending payment whose creation's answer was lost (it has no provider reference):
 * - `found`: the provider has it (found by our payment id): apply its answer;
 * - `resend`: send the create again with the same idempotency key — the provider has no such payment
 *   or could not be asked, and a repeat is still answered with the original result (within the provider's
 *   idempotency-key retention, less REPLAY_MARGIN_MS, or a provider whose repeats cannot charge). A repeat
 *   is sent through saved-card-sends.ts, never for a saved card deleted since (deletedCardVerdict: the
 *   payment fails when no create of it was ever sent, else stays pending for these verdicts — a lookup's
 *   "none" within the window proves little: cardpay's search trails its writes);
 * - `absent`: the provider has no payment of ours by that id and it is too late to repeat the create
 *   (the provider forgot the key: a repeat would be a second, new charge) — or, where the create cannot be
 *   repeated, reconciliation's pull succeeded at its check (lostCreationCheck) and named no transaction of
 *   it. Nothing was charged (to the service's knowledge): the payment fails with `reason`, which tells the
 *   merchant to create a new one (a charge found after all is reported charged_but_failed: the status writer);
 * - `unknown`: nothing can be learned now (the payment was created under another provider account than the
 *   stored credentials': ProviderGateway.otherAccount; the lookup failed, or the provider cannot look a payment up
 *   by our id and the repeat is too late, or a create that cannot be repeated waits for its check, or its
 *   pull failed, named it without settling it, or can no longer reach back to it): the payment stays
 *   pending for the next check, then for the operator (payments_unresolved), and is never sent again.
 * Status sync uses it, with `pull` (without one, a create that cannot be repeated is never judged); so
 * must anything else that would repeat a create (a resumed creation request).
 */
export type LostCreation =
  | { kind: 'found'; result: ProviderPaymentResult }
  | { kind: 'resend' }
  | { kind: 'absent'; reason: string }
  | { kind: 'unknown'; reason: string };

/** What a judging pull can say: nothing was charged (`absent`), or nothing is known (`unknown`). */
type PullVerdict = Extract<LostCreation, { kind: 'absent' | 'unknown' }>;

export async function recoverLostCreation(
  gateway: ProviderGateway, payment: Payment, lookup: PaymentLookup, now = Date.now(), pull: ReconciliationPull | null = null,
): Promise<LostCreation> {
  // Created under another provider account than the stored credentials' (ProviderGateway.otherAccount): what
  // that account says proves nothing about this payment, and a repeat there would be a new charge.
  const other = await gateway.accountMismatch(payment);
  if (other) return { kind: 'unknown', reason: other };
  const port = gateway.port(payment.provider);
  const { capabilities } = port;
  if (!capabilities.replayableCreate) return judgeByPull(port, payment, now, pull, `${payment.provider} never answered the request creating this payment`);
  let found: ProviderPaymentResult | null | undefined;
  let lookupFailed: string | null = null;
  try {
    found = await gateway.findPayment(payment, lookup);
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    lookupFailed = err.message;
  }
  if (found) return { kind: 'found', result: found };
  const window = capabilities.createReplayWindowMs;
  if (window === null || now - payment.createdAt.getTime() < window - REPLAY_MARGIN_MS) return { kind: 'resend' };
  if (found === null) {
    const hours = Math.round(window / 3_600_000);
    return {
      kind: 'absent',
      reason:
        `${payment.provider} has no payment with this id: the request creating it never reached the provider, and it can no longer be ` +
        `sent again (after ${hours} h the provider would take it as a new charge). Nothing was charged; create a new payment if the customer still wants to pay.`,
    };
  }
  return {
    kind: 'unknown',
    reason: lookupFailed
      ? `${payment.provider} could not be asked about the payment (${lookupFailed}); too late to send its creation again`
      : `${payment.provider} cannot look the payment up without its reference; too late to send its creation again`,
  };
}

/**
 * A push the operator took (the payment has its CheckoutRequestID) whose status query still gives no final
 * answer at the push's check (lostCreationCheck) — "being processed", 4999, or a refusal — is judged by the
 * same pull as a lost creation: a push is paid within minutes or not at all, and the pull is the operator's
 * record of money received. Without it such a push would stay pending for ever once the schedule ran out.
 * `absent` (the pull listed no charge: fail it) or `unknown`, as judgeByPull; a rate limit or outage is thrown.
 */
export function judgeUnansweredPush(port: ProviderPort, payment: Payment, now: number, pull: ReconciliationPull | null): Promise<PullVerdict> {
  return judgeByPull(port, payment, now, pull, `${payment.provider} took the request creating this payment but its status query never gave the outcome`);
}

/**
 * A lost creation that cannot be repeated (or a push without a final answer, judgeUnansweredPush), at or after
 * its check (lostCreationCheck): reconciliation's pull of its window (judgingPullWindow). A paid push is
 * listed, and the pull completes its payment; one the pull succeeded without naming is `absent`, its reason
 * starting with `unanswered`. The pull failing, or the window no longer reaching back to the creation, proves
 * nothing: `unknown` — but a rate limit or an outage is thrown (a ProviderError).
 */
async function judgeByPull(port: ProviderPort, payment: Payment, now: number, pull: ReconciliationPull | null, unanswered: string): Promise<PullVerdict> {
  const check = lostCreationCheck(port, payment);
  if (!check || !pull || now < check.at) return { kind: 'unknown', reason: `${payment.provider} creation cannot be repeated; reconciliation finds the payment` };
  if (now > check.pullableUntil) {
    return { kind: 'unknown', reason: `${payment.provider} lists settled transactions for too short a time now to show whether the payment was charged` };
  }
  const { since, until } = judgingPullWindow(payment, now);
  let report;
  try {
    report = await pull(payment.merchantId, payment.provider as Provider, since, until);
  } catch (err) {
    // A rate limit or an outage is thrown as the provider's: the status sync backs off the account, or counts the provider down.
    const outage = pullOutage(err);
    if (outage) throw outage;
    if (!(err instanceof DomainError)) throw err;
    return { kind: 'unknown', reason: `reconciliation could not pull ${payment.provider}'s settled transactions (${err.message})` };
  }
  if (report.results.some((r) => r.payment_id === payment.id)) {
    return { kind: 'unknown', reason: `reconciliation listed a transaction naming the payment (settled by it, or refused: see its report)` };
  }
  if (report.results.some((r) => r.reason === 'unreadable' || r.reason === 'not_a_payment')) {
    // An entry set aside may be this payment's charge (an amount written "1,000.00", a type we do not know).
    return { kind: 'unknown', reason: `reconciliation's pull had entries it could not read or did not take for customer payments; one may be this payment's charge` };
  }
  const minutes = Math.round((now - payment.createdAt.getTime()) / 60_000);
  return {
    kind: 'absent',
    reason:
      `${unanswered}, and its settled transactions, pulled ${minutes} minutes after ` +
      `the payment was created, list no charge for it. Nothing was charged to the service's knowledge; create a new payment if the customer still wants to pay.`,
  };
}

/**
 * Why an operator may not fail `payment` by hand (admin `payment settle`), or null when they may: only a
 * pending payment whose creation cannot be repeated and that is judged by the pull (lostCreationCheck) —
 * its creation's answer lost (no provider reference), or a push whose status query never gave the outcome:
 * once its judging pulls failed or can no longer reach back to it, nothing of the service settles it — and
 * not before its check (the service's own pull comes first).
 */
export function operatorSettlementRefusal(port: ProviderPort, payment: Payment, now = Date.now()): string | null {
  const check = lostCreationCheck(port, payment);
  if (payment.providerRef && !check) return `payment ${payment.id} has ${payment.provider}'s reference: the status sync asks the provider about it (payment recheck), not an operator`;
  if (port.capabilities.replayableCreate) return `payment ${payment.id}'s creation can be sent again: the status sync settles it (payment recheck), not an operator`;
  if (check && now < check.at) return `payment ${payment.id} is judged by reconciliation's pull at ${new Date(check.at).toISOString()}: wait for it (then payment recheck)`;
  // A check still booked while a pull can reach back to the payment may yet find its charge: failing it now
  // could tell the merchant payment.failed for a customer who paid.
  if (check && payment.nextSyncAt && now < check.pullableUntil) {
    return `payment ${payment.id} still has a check of the status sync booked at ${payment.nextSyncAt.toISOString()}, whose pull may find its charge: wait for it`;
  }
  return null;
}
