import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema } from '../../persistence/entities/index.js';
import { ProviderError } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';
import type { StatusWriter } from './status-writer.js';
import { ACCOUNT, checkClaimed, oneBatchRun, outcomeOf, type CheckOutcome, type ClaimedBatch, type DrainRun } from './sync-schedule.js';

/** How long a claimed payment is left to its worker before another may take it again (a provider outage: the retry interval). */
const CLAIM_MS = 5 * 60_000;
/** After this long since the payment failed, a provider that still cannot be asked is given up on (logged). */
const GIVE_UP_MS = 7 * 24 * 3_600_000;
/**
 * An intent still under way (a bank debit `processing`, which Stripe does not cancel): looked at again
 * hourly — not every CLAIM_MS, some 2,000 refused cancels a week — for up to 21 days after the payment
 * failed (a SEPA debit can take 14 business days to settle).
 */
const UNDER_WAY_RECHECK_MS = 3_600_000;
const UNDER_WAY_GIVE_UP_MS = 21 * 24 * 3_600_000;

/**
 * The idempotency key of one attempt to cancel a payment's provider object: new on every attempt (`attempt`
 * names it), since Stripe answers a key's stored answer, a 500 included, to every repeat for 24 h, while a
 * cancel sent again is harmless. Also the status sync's cancel of an abandoned checkout (abandoned-checkout.ts).
 */
export const abandonIdempotencyKey = (paymentId: string, attempt: string): string => `abandon-${paymentId}-${attempt}`;

/**
 * Cancels at the provider what a payment we recorded `failed` left open there. A card decline or a failed
 * 3-D Secure authentication leaves a Stripe intent in `requires_payment_method`, confirmable again with
 * its client secret: a later confirmation would charge the customer for a payment we show failed (and
 * that decisions.md's rule keeps failed: a success after `failed` is recorded and ignored). The status
 * writer marks such payments due (`abandon_due_at`) in the transaction that fails them; this worker job
 * claims them (SKIP LOCKED: no two workers take the same one), asks the provider to cancel with an
 * idempotency key derived from the payment and the claim — never inside a transaction — and clears the mark. An
 * intent already canceled is fine; one that succeeded after all (charged before the cancel got there)
 * is recorded as a refused late success and counted (payments_integrity_mismatches_total, source
 * `abandon:charged_but_failed`), and logged as an error for an operator to refund. An intent whose cancel
 * is refused while it is still under way (`processing`: a bank debit) keeps the mark: looked at again hourly
 * until it is final (a success then recorded as above), given up on after UNDER_WAY_GIVE_UP_MS.
 */
export class AbandonFailedService {
  constructor(
    private readonly em: EntityManager,
    private readonly gateway: ProviderGateway,
    private readonly writer: StatusWriter,
    private readonly logger: Logger,
  ) {}

  /** One batch: claims up to `limit` due payments and cancels them, CHECKS_AT_ONCE at a time (the job claims batch after batch: jobs/drain-due.ts). */
  async abandonDue(run: DrainRun = oneBatchRun(), limit = 25): Promise<ClaimedBatch> {
    // Each claim's new abandon_due_at (microseconds) names the attempt: no two claims of a payment share it.
    const claimed = await this.em.getConnection().execute<{ id: string; attempt: string; account: string }[]>(
      `UPDATE payments SET abandon_due_at = now() + (? * interval '1 millisecond')
       WHERE id IN (SELECT id FROM payments WHERE abandon_due_at <= now() ORDER BY abandon_due_at LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING id, (extract(epoch FROM abandon_due_at) * 1000000)::bigint::text AS attempt, ${ACCOUNT.payments} AS account`,
      [CLAIM_MS, limit],
    );
    return checkClaimed(claimed, ({ id, attempt }) => this.abandonOne(id, attempt), ({ id }, err) =>
      this.logger.warn({ paymentId: id, err: { message: err.message } }, 'abandoning a failed payment at the provider failed'), { accountOf: (row) => row.account, run });
  }

  /**
   * `attempt` makes the cancel's idempotency key new on every try: Stripe answers a key's stored answer, a
   * 500 included, to every repeat for 24 h, so one key would keep a failed cancel failing. A cancel is safe
   * to send again under another key (a second one is refused payment_intent_unexpected_state, then read).
   * Says whether the provider could be asked.
   */
  async abandonOne(paymentId: string, attempt: string = Date.now().toString()): Promise<CheckOutcome> {
    const payment = await this.em.fork().findOneOrFail(PaymentSchema, { id: paymentId });
    if (payment.status !== 'failed') return this.done(paymentId);
    let answer;
    try {
      answer = await this.gateway.abandon(payment, abandonIdempotencyKey(payment.id, attempt));
    } catch (err) {
      // Anything but the provider's own refusal may pass (an outage, credentials being replaced): retried
      // after CLAIM_MS, and given up on, logged, once GIVE_UP_MS has passed since the payment failed.
      const kind = err instanceof ProviderError ? err.kind : 'not_asked';
      const transient = kind === 'unavailable' || kind === 'indeterminate' || kind === 'rate_limited' || kind === 'auth' || kind === 'not_asked';
      if (transient && Date.now() - payment.updatedAt.getTime() < GIVE_UP_MS) {
        this.logger.warn({ paymentId, provider: payment.provider, kind, reason: (err as Error).message }, 'could not cancel a failed payment at the provider; retrying later');
        return err instanceof ProviderError ? outcomeOf(err) : 'checked';
      }
      this.logger.warn({ paymentId, provider: payment.provider, kind, reason: (err as Error).message }, 'a failed payment could not be cancelled at the provider; given up');
      return this.done(paymentId);
    }
    if (answer?.status === 'completed') {
      // Charged after we said failed: it stays failed; the writer records, counts and logs it (charged_but_failed).
      await this.writer.chargedButFailed(payment.id, answer.amount, 'abandon', payment.providerRef ?? null);
    }
    if (answer?.status === 'pending') {
      // The cancel was refused and the intent is not final: Stripe cancels a `processing` intent only in rare
      // cases, and a bank debit under way settles days later. Asked again in an hour, so one that then
      // succeeds is recorded above; given up on, logged, after UNDER_WAY_GIVE_UP_MS.
      if (Date.now() - payment.updatedAt.getTime() < UNDER_WAY_GIVE_UP_MS) {
        this.logger.info({ paymentId, provider: payment.provider }, 'a failed payment could not be cancelled at the provider: still under way there; checking again in an hour');
        await this.em.getConnection().execute(
          `UPDATE payments SET abandon_due_at = now() + (? * interval '1 millisecond') WHERE id = ? AND abandon_due_at IS NOT NULL`,
          [UNDER_WAY_RECHECK_MS, paymentId], 'run',
        );
        return 'checked';
      }
      this.logger.warn({ paymentId, provider: payment.provider }, 'a failed payment is still under way at the provider three weeks after it failed; no longer checked');
    }
    return this.done(paymentId);
  }

  private async done(paymentId: string): Promise<CheckOutcome> {
    await this.em.getConnection().execute('UPDATE payments SET abandon_due_at = NULL WHERE id = ?', [paymentId], 'run');
    return 'checked';
  }
}
