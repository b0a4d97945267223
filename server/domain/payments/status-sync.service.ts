import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, type Payment } from '../../persistence/entities/index.js';
import type { AppConfig } from '../../config/config.js';
import { ProviderError, type ProviderPaymentResult } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';
import { creationInput, expiredAtProvider, paymentLookup, toUpdate, type PaymentService } from './payment.service.js';
import { judgeUnansweredPush, lostCreationCheck, recoverLostCreation, type ReconciliationPull } from './lost-creation.js';
import { SharedPulls } from './shared-pulls.js';
import { cardSendLeaseMs, deletedCardVerdict, sendCreate } from './saved-card-sends.js';
import { abandonedCheckoutReason } from './abandoned-checkout.js';
import { abandonIdempotencyKey } from './abandon-failed.service.js';
import { outcomeOf, recheckDue, scheduleNextCheck, oneBatchRun, type CheckOutcome, type ClaimedBatch, type DrainRun } from './sync-schedule.js';

/** A lost push's last check is this long before its pull could no longer reach back to it (the job's delay in picking it up). */
const LAST_CHECK_MARGIN_MS = 30 * 60_000;

/**
 * Status sync ("psync"): re-checks pending payments with their provider on a backoff
 * (STATUS_SYNC_SCHEDULE, default 1m … 48h) and settles them through the same state machine and events
 * as a callback would. A payment whose creation answer was lost (no provider ref) is looked up at the
 * provider by our id first; it is re-sent with the same idempotency key only while the provider still
 * answers a repeat with the original result (lost-creation.ts) — the schedule reaches ~31 h and ~79 h,
 * and an overdue check runs at once after an outage, past cardpay's 24 h key retention, when a repeat
 * would charge again. Too late and not found at the provider: it fails, saying nothing was charged. A
 * creation that cannot be repeated (mobilemoney) is judged 2 h after it by reconciliation's pull (`pull`),
 * while the operator still lists its charge: a paid push is completed by it; one the pull succeeded
 * without listing fails the same way; a failed pull leaves it pending (lost-creation.ts). So is a push the
 * operator took whose STK query still gives no final answer at a check from 2 h on, or none at all (a 5xx, a
 * timeout: judgeUnansweredPush).
 * A payment created under another provider account than the stored credentials' is not asked about at all
 * (ProviderGateway.otherAccount): it stays pending, logged at each check, until credentials of its account
 * are stored again — or, once the schedule runs out, it is the operator's (payments_unresolved).
 * A checkout its customer abandoned ends at its provider's expiry (expiresUnapprovedAfterMs: walletpay's order
 * expires there; cardpay's intent awaiting 3-D Secure is cancelled by the check due then, providerState).
 */
export class StatusSyncService {
  constructor(
    private readonly em: EntityManager,
    private readonly config: AppConfig,
    private readonly gateway: ProviderGateway,
    private readonly payments: PaymentService,
    private readonly logger: Logger,
    private readonly pull: ReconciliationPull | null = null,
  ) {}

  /** Each run's judging pulls, shared by the lost pushes of one account (shared-pulls.ts). */
  private readonly runPulls = new WeakMap<DrainRun, ReconciliationPull>();

  /** One batch: claims up to `limit` due payments and syncs them (the worker's job claims batch after batch: jobs/drain-due.ts). */
  async syncDue(run: DrainRun = oneBatchRun(), limit = 25): Promise<ClaimedBatch> {
    let pull = this.runPulls.get(run) ?? null;
    if (!pull && this.pull) {
      pull = new SharedPulls(this.pull).shared;
      this.runPulls.set(run, pull);
    }
    return recheckDue(this.em, 'payments', limit, (id) => this.syncOne(id, Date.now(), pull), (id, err) =>
      this.logger.warn({ paymentId: id, err: { message: err.message } }, 'status sync failed'), run);
  }

  /**
   * `now`: the time the payment's age is judged at (a repeated create is only sent while the provider knows
   * its key). Says whether the provider could be asked (a payment it could not be asked about still counts
   * an attempt and waits for the next). `pull`: the judging pull of a lost push (a run's shares one per account).
   */
  async syncOne(paymentId: string, now = Date.now(), pull = this.pull): Promise<CheckOutcome> {
    const payment = await this.em.fork().findOneOrFail(PaymentSchema, { id: paymentId });
    if (payment.status !== 'pending') return 'checked';
    const other = await this.gateway.accountMismatch(payment);
    if (other) {
      // Nothing is sent, and nothing is judged from another account's answers: it waits for credentials of its
      // own account, checked on the schedule, then for the operator (payments_unresolved).
      this.logger.warn(
        { paymentId: payment.id, provider: payment.provider, createdOnAccount: payment.providerAccount, reason: other },
        'status sync: payment created on another provider account than the stored credentials; not asked about, left pending',
      );
      await scheduleNextCheck(this.em, 'payments', payment.id, this.config.statusSyncScheduleMs);
      return 'checked';
    }
    let result: ProviderPaymentResult | null = null;
    /** `result` is the answer to our cancel of an abandoned checkout (providerState). */
    let cancelled = false;
    let outcome: CheckOutcome = 'checked';
    try {
      if (payment.providerRef) {
        ({ result, cancelled } = await this.providerState(payment, now));
      } else {
        const lost = await recoverLostCreation(this.gateway, payment, paymentLookup(payment), now, pull);
        if (lost.kind === 'found') {
          result = lost.result;
        } else if (lost.kind === 'resend') {
          // Never for a saved card deleted since (saved-card-sends.ts): the DELETE's 200 said it is charged no more.
          const sent = await sendCreate(this.em, this.gateway, payment, creationInput(payment), cardSendLeaseMs(this.config.providerTimeoutMs));
          if (sent.kind === 'sent') {
            result = sent.result;
          } else {
            const verdict = deletedCardVerdict(payment, sent);
            if (verdict.kind === 'failed') {
              // No create of it was ever sent: nothing was charged.
              this.logger.warn({ paymentId: payment.id, provider: payment.provider, savedCardId: sent.cardId }, 'status sync: its saved card was deleted before any create of it was sent; not sent; payment failed');
              await this.payments.applyUpdate(payment.id, { status: 'failed', failureReason: verdict.failureReason }, 'status-sync');
              return 'checked';
            }
            // A create was sent before: the provider may have it however its lookup answered; the checks to come settle it.
            this.logger.warn({ paymentId: payment.id, provider: payment.provider, savedCardId: sent.cardId, reason: verdict.reason }, 'status sync: creation lost and its saved card deleted since; not sent again; left pending');
          }
        } else if (await this.settledByPull(payment, lost, 'creation lost and not found at the provider')) {
          return 'checked';
        } else if (this.gateway.port(payment.provider).capabilities.replayableCreate || now >= (lostCreationCheck(this.gateway.port(payment.provider), payment)?.at ?? Infinity)) {
          // (One whose creation cannot be repeated waits for its check, lostCreationCheck: nothing to say before.)
          this.logger.warn({ paymentId: payment.id, provider: payment.provider, reason: lost.reason }, 'status sync: creation answer lost; not sent again');
        }
      }
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      const expired = expiredAtProvider(this.gateway.port(payment.provider), payment, err, now);
      if (expired) {
        this.logger.warn({ paymentId: payment.id, provider: payment.provider }, 'status sync: the provider no longer has the payment (expired unapproved); payment failed');
        await this.payments.applyUpdate(payment.id, { status: 'failed', failureReason: expired, raw: { error: err.message, code: err.providerCode ?? null } }, 'status-sync');
        return 'checked';
      }
      if (err.kind === 'declined') result = err.result ?? null;
      if (err.kind === 'declined' && !result) {
        await this.payments.applyUpdate(payment.id, { status: 'failed', failureReason: err.message }, 'status-sync');
        return 'checked';
      }
      outcome = outcomeOf(err);
    }
    // A status query that gave no answer (a 5xx, a timeout) proves nothing either way, and the pull is another
    // of the operator's APIs: the push is judged by it all the same. Not after a rate limit (the account is
    // backed off for the run, its pull included).
    if (payment.providerRef && outcome !== 'rate_limited' && (!result || result.status === 'pending')) {
      try {
        const judged = await this.judgeUnansweredPush(payment, now, pull);
        if (judged === 'settled') return 'checked';
        // The pull answered: the operator did, so this check does not count its provider down for the run
        // (sync-schedule.ts checkClaimed), which would hold back the lost pushes only the pull can judge.
        if (judged === 'pulled') outcome = 'checked';
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        outcome = outcomeOf(err);
      }
    }
    if (result) {
      const applied = await this.payments.applyUpdate(payment.id, { ...toUpdate(result), answersOurCancel: cancelled }, 'status-sync');
      if (applied.payment.status !== 'pending') return 'checked';
    }
    await scheduleNextCheck(this.em, 'payments', payment.id, this.config.statusSyncScheduleMs);
    const port = this.gateway.port(payment.provider);
    // A payment its provider lets expire unapproved is checked again after that, should the schedule have
    // run out before: the expiry is what settles an abandoned checkout (see expiredAtProvider; cardpay's is
    // cancelled by that check: providerState). Still there then (the buyer was sent to approve it late, or
    // the account keeps orders longer), it is checked again every lifetime until the longest it can live;
    // after that, with no check ahead, it is counted in payments_unresolved (UNRESOLVED).
    const expiresAt = payment.providerRef || result?.providerRef ? nextExpiryCheck(port.capabilities, payment.createdAt.getTime(), now) : null;
    if (expiresAt) {
      await this.em.getConnection().execute(
        `UPDATE payments SET next_sync_at = ? WHERE id = ? AND status = 'pending' AND next_sync_at IS NULL`,
        [new Date(expiresAt), payment.id],
        'run',
      );
    }
    // A lost creation that cannot be repeated — or a push whose status query gave no final answer, judged the
    // same way (judgeUnansweredPush) — is checked at its check time (sooner if the schedule says so, and even
    // if the schedule ran out before), then by the schedule while a pull can still reach back to it; once the
    // schedule runs out after its check, it is the operator's (payments_unresolved, admin payment settle).
    const check = lostCreationCheck(port, payment);
    if (check && now < check.at) {
      const at = new Date(check.at + 60_000);
      await this.em.getConnection().execute(
        `UPDATE payments SET next_sync_at = ? WHERE id = ? AND status = 'pending' AND (next_sync_at IS NULL OR next_sync_at > ?)`,
        [at, payment.id, at],
        'run',
      );
    } else if (check && now < check.pullableUntil - LAST_CHECK_MARGIN_MS) {
      const last = new Date(check.pullableUntil - LAST_CHECK_MARGIN_MS);
      await this.em.getConnection().execute(
        `UPDATE payments SET next_sync_at = ? WHERE id = ? AND status = 'pending' AND next_sync_at > ?`,
        [last, payment.id, last],
        'run',
      );
    }
    return outcome;
  }

  /**
   * The payment as its provider has it. A checkout its customer abandoned (abandoned-checkout.ts: still
   * awaiting 3-D Secure past its provider's expiry) is cancelled there first, through the cancel of a failed
   * payment (ProviderGateway.abandon; no transaction is open meanwhile), and answered as the provider has it
   * afterwards (`cancelled`: the answer is the cancel's): ended by our cancel, it fails saying why (the abandoned
   * checkout's reason); failed before it got there (declined at 3-D Secure, cancelled in the provider's dashboard,
   * their events lost), it fails with the provider's own reason; either way it is not left to the cancel of
   * failed payments (PaymentUpdate.answersOurCancel: nothing is open there any more). Charged meanwhile (the
   * customer finished just before), it completes as any success; refused while under way, it stays pending. A
   * cancel without an answer throws as a read would: the payment stays pending and the next check cancels
   * again (a new idempotency key).
   */
  private async providerState(payment: Payment, now: number): Promise<{ result: ProviderPaymentResult; cancelled: boolean }> {
    const abandoned = abandonedCheckoutReason(this.gateway.port(payment.provider), payment, now);
    const answer = abandoned ? await this.gateway.abandon(payment, abandonIdempotencyKey(payment.id, Date.now().toString())) : undefined;
    if (!answer) return { result: await this.gateway.getPayment(payment, paymentLookup(payment)), cancelled: false };
    this.logger.info({ paymentId: payment.id, provider: payment.provider, status: answer.status }, 'status sync: checkout still awaiting the customer past its expiry; cancel sent to the provider');
    return { result: answer.endedByOurCancel ? { ...answer, failureReason: abandoned } : answer, cancelled: true };
  }

  /**
   * A push the operator took whose status query gave no final answer (still processing, refused, or no answer
   * at all): from its check on (lostCreationCheck) it is judged by the pull, as a lost creation is
   * (judgeUnansweredPush). Says whether that settled it (failed: nothing listed; or completed by the pull), or
   * left it pending after a pull that answered (`pulled`) or with no pull answered (`not_pulled`: before its
   * check, past the pull's reach, or the pull refused). A rate limit or an outage of the pull is thrown (the
   * run backs off the account, or counts the provider down).
   */
  private async judgeUnansweredPush(payment: Payment, now: number, pull: ReconciliationPull | null): Promise<'settled' | 'pulled' | 'not_pulled'> {
    const port = this.gateway.port(payment.provider);
    const check = lostCreationCheck(port, payment);
    if (!check || now < check.at) return 'not_pulled';
    let pulled = false;
    const answered: ReconciliationPull | null = pull && (async (...args) => {
      const report = await pull(...args);
      pulled = true;
      return report;
    });
    const judged = await judgeUnansweredPush(port, payment, now, answered);
    if (await this.settledByPull(payment, judged, 'push without a final answer and not listed as paid')) return 'settled';
    this.logger.warn({ paymentId: payment.id, provider: payment.provider, reason: judged.reason }, 'status sync: push without a final answer; left pending');
    return pulled ? 'pulled' : 'not_pulled';
  }

  /**
   * What a judging pull's verdict settled (lost-creation.ts): `absent` fails the payment with its reason
   * (`what` says why in the log); otherwise whether the pull itself settled it (reconciliation completed
   * the paid push) — `unknown` leaves it pending.
   */
  private async settledByPull(payment: Payment, verdict: { kind: 'absent' | 'unknown'; reason: string }, what: string): Promise<boolean> {
    if (verdict.kind === 'absent') {
      this.logger.warn({ paymentId: payment.id, provider: payment.provider, reason: verdict.reason }, `status sync: ${what}; payment failed`);
      await this.payments.applyUpdate(payment.id, { status: 'failed', failureReason: verdict.reason }, 'status-sync');
      return true;
    }
    return (await this.em.fork().findOneOrFail(PaymentSchema, { id: payment.id })).status !== 'pending';
  }
}

/**
 * When to look again for the expiry of a payment its provider lets expire unapproved: a minute after the
 * first multiple of its lifetime (after creation) still to come, as long as that is within the longest it
 * can live; null when it expires at no such time, or can no longer be there.
 */
export function nextExpiryCheck(
  { expiresUnapprovedAfterMs: lifetime, livesUnapprovedAtMostMs: longest }: { expiresUnapprovedAfterMs?: number; livesUnapprovedAtMostMs?: number },
  createdAt: number,
  now: number,
): number | null {
  if (!lifetime) return null;
  const periods = Math.max(1, Math.floor((now - createdAt) / lifetime) + 1);
  const at = createdAt + periods * lifetime;
  return at <= createdAt + (longest ?? lifetime) ? at + 60_000 : null;
}
