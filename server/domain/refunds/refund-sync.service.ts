import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AppConfig } from '../../config/config.js';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, RefundSchema, type Payment, type Refund } from '../../persistence/entities/index.js';
import { DomainError } from '../errors.js';
import { askForConfirmation } from '../inbound/confirmation-queries.js';
import { paymentLookup } from '../payments/payment.service.js';
import type { ProviderGateway } from '../payments/provider-gateway.js';
import { outcomeOf, recheckDue, scheduleNextCheck, oneBatchRun, type CheckOutcome, type ClaimedBatch, type DrainRun } from '../payments/sync-schedule.js';
import { ProviderError } from '../ports.js';
import type { RefundRequested, RefundService } from './refund.service.js';

/** The audit trigger of what the refund sync applies. */
const SOURCE = 'refund-sync';

/**
 * Status reports asked about one acknowledged reversal request without an outcome before the request is
 * sent again. One is not enough: a report's result comes back the same way as the lost one and can be
 * lost too, and the first check may come while the request is still in the operator's queue. With the
 * default STATUS_SYNC_SCHEDULE (1m,5m,15m,1h,…) the three reports are asked over the request's first
 * 21 minutes, long after the operator processed it or let it expire in its queue, and the repeat goes at
 * the fourth check (1 h 21 min), leaving the schedule's later checks (6 h, 24 h, 48 h) to ask about it.
 */
export const RESEND_AFTER_REPORT_CHECKS = 3;

/**
 * Repeats of one refund's reversal (reversal_resends: every repeat, also one of a request whose
 * acknowledgement was lost) after which an acknowledged request without an outcome is not sent again. A
 * refusal of a repeat settles nothing (see UnitOfWork.refund), so a refund the operator keeps refusing
 * would otherwise be sent for ever; after the last (and its reports) it is left pending for an operator.
 */
export const MAX_REVERSAL_RESENDS = 3;

/**
 * Refund sync: re-checks refunds still `pending` with their provider on the status sync's backoff
 * (STATUS_SYNC_SCHEDULE, from the refund's creation), for when neither the provider's answer nor its
 * event settled them — the answer lost to a timeout, the event never delivered. What the provider says
 * goes through the status writer like any answer (its amount checked against the refund's):
 * - a provider that looks refunds up (ProviderPort.findRefund) is asked at once; a refund it has no
 *   record of never reached it, and is sent again with the same idempotency key;
 * - one that reports asynchronously (mobile money) is asked for a status report on our reversal
 *   request (and, after a repeat, about each earlier request too: at most 1 + MAX_REVERSAL_RESENDS
 *   reports a check, none about a request whose report is still open), answered as a `status-report`
 *   notification that completes the refund; a reversal whose
 *   request was never acknowledged is sent again — the provider reverses a transaction once, and
 *   answers a repeat "already reversed", which completes it all the same. A report can say that a
 *   reversal completed, never that it was refused: a request acknowledged but whose result was lost is
 *   sent again after RESEND_AFTER_REPORT_CHECKS reports brought nothing (while fewer than
 *   MAX_REVERSAL_RESENDS repeats were sent). After any repeat only a success settles the refund — "0" or
 *   "already reversed" from any of its requests, or a report of the reversal — since a refusal of one
 *   request says nothing about the others.
 * After the schedule's last interval the refund is left pending (refunds_pending_oldest_seconds alerts).
 */
export class RefundSyncService {
  constructor(
    private readonly em: EntityManager,
    private readonly config: AppConfig,
    private readonly gateway: ProviderGateway,
    private readonly refunds: RefundService,
    private readonly logger: Logger,
  ) {}

  /** One batch: claims up to `limit` due refunds and syncs them (the worker's job claims batch after batch: jobs/drain-due.ts). */
  async syncDue(run: DrainRun = oneBatchRun(), limit = 25): Promise<ClaimedBatch> {
    return recheckDue(this.em, 'refunds', limit, (id) => this.syncOne(id), (id, err) =>
      this.logger.warn({ refundId: id, err: { message: err.message } }, 'refund sync failed'), run);
  }

  /** Says whether the provider could be asked (either way the refund waits for its next check). */
  async syncOne(refundId: string): Promise<CheckOutcome> {
    const em = this.em.fork();
    const refund = await em.findOneOrFail(RefundSchema, { id: refundId });
    if (refund.status !== 'pending') return 'checked';
    const payment = await em.findOneOrFail(PaymentSchema, { id: refund.paymentId });
    let outcome: CheckOutcome = 'checked';
    try {
      outcome = await this.ask(refund, payment);
    } catch (err) {
      // Not answered now (or refused again, recorded by the send): the schedule decides when to ask next.
      if (!(err instanceof ProviderError) && !(err instanceof DomainError)) throw err;
      if (err instanceof ProviderError) outcome = outcomeOf(err);
      this.logger.warn({ refundId, provider: payment.provider, err: { message: err.message } }, 'refund sync: the provider did not answer');
    }
    await scheduleNextCheck(this.em, 'refunds', refundId, this.config.statusSyncScheduleMs);
    return outcome;
  }

  /** What the check met (CheckOutcome), when the provider's failure did not throw: a repeat's, kept pending (RefundService.sendAgain). */
  private async ask(refund: Refund, payment: Payment): Promise<CheckOutcome> {
    if (this.gateway.offersStatusReports(payment.provider) && refund.providerRef) {
      if (refund.reportChecks >= RESEND_AFTER_REPORT_CHECKS && refund.reversalResends < MAX_REVERSAL_RESENDS) {
        return this.sendAfterReports(refund, refund.providerRef);
      }
      await this.askForReport(refund, payment, refund.providerRef);
      // And about each earlier request: one may have reversed the payment while its result and its reports
      // were lost, and a repeat answered "already reversed" (whose result was lost too) is no transaction
      // the operator can report on. Not counted: the count decides about the current request only.
      for (const earlier of refund.earlierProviderRefs) await this.requestReport(refund, payment, earlier);
      return 'checked';
    }
    const found = await this.gateway.findRefund(payment, { refundId: refund.id, providerRef: refund.providerRef ?? null, payment: paymentLookup(payment) });
    if (found) {
      await this.refunds.settle(refund.id, found, SOURCE);
    } else if (!refund.providerRef) {
      // The provider has no record of the request (or cannot be asked without its id): send it again.
      // A reversal's repeat (its first request may have been carried out, its acknowledgement lost) is
      // counted in the refund's row first: from then on only a success settles it (RefundService.sendAgain).
      this.logger.info({ refundId: refund.id, provider: payment.provider }, 'refund sync: the provider has no record of the refund request; sending it again');
      return this.sentAgain(refund, await this.refunds.sendAgain(refund, SOURCE));
    }
    return 'checked';
  }

  /**
   * A status report about the current request, counted (report_checks) towards sending it again — also
   * when an earlier report is still open (nothing sent: that one has brought no outcome either), and when
   * the operator refuses the query (an app without the Transaction Status product, a field it rejects):
   * a refusal is refused again at every check, and uncounted it would leave the refund pending for ever,
   * never sent again. A query the operator could not take now (unavailable, rate limited, no answer) is
   * not counted: the schedule asks again, and a repeat sent into an outage would use up the repeats.
   */
  private async askForReport(refund: Refund, payment: Payment, requestRef: string): Promise<void> {
    try {
      await this.requestReport(refund, payment, requestRef);
    } catch (err) {
      if (err instanceof ProviderError && outcomeOf(err) === 'checked') await this.countReportCheck(refund, payment, requestRef);
      throw err;
    }
    await this.countReportCheck(refund, payment, requestRef);
  }

  /** One more check without an outcome about the current request; warns once the repeats are used up. */
  private async countReportCheck(refund: Refund, payment: Payment, requestRef: string): Promise<void> {
    const [counted] = await this.em.getConnection().execute<{ report_checks: number; reversal_resends: number }[]>(
      `UPDATE refunds SET report_checks = report_checks + 1 WHERE id = ? AND status = 'pending' AND provider_ref = ? RETURNING report_checks, reversal_resends`,
      [refund.id, requestRef],
    );
    if (counted && counted.report_checks >= RESEND_AFTER_REPORT_CHECKS && counted.reversal_resends >= MAX_REVERSAL_RESENDS) {
      this.logger.warn(
        { refundId: refund.id, provider: payment.provider, requestRef, reversalResends: counted.reversal_resends, reportChecks: counted.report_checks },
        'refund sync: the reversal was sent again the most times allowed and no outcome came; the refund stays pending for an operator (check the reversal at the operator)',
      );
    }
  }

  /**
   * Asks for a status report about one of the refund's requests; the answer arrives as a status report
   * (see InboundPipeline, `status-report`), which completes the refund. Nothing is sent while an earlier
   * report about the same request is still open (askForConfirmation: one per request at a time).
   */
  private async requestReport(refund: Refund, payment: Payment, requestRef: string): Promise<void> {
    const queryId = randomUUID();
    const about = { id: queryId, provider: payment.provider, merchantId: refund.merchantId, paymentId: payment.id, refundId: refund.id, code: requestRef, confirms: SOURCE };
    const sent = await askForConfirmation(this.em, about, () => this.gateway.requestStatusReport(payment, { queryId, requestRef }));
    this.logger.info({ refundId: refund.id, provider: payment.provider, queryId, requestRef, sent }, 'refund sync: asked the provider for a status report');
  }

  /**
   * The request `requestRef` was acknowledged, but neither its result nor RESEND_AFTER_REPORT_CHECKS
   * status reports brought an outcome (a report never says that a request was refused): the reversal is
   * sent again. The operator reverses a receipt once: a repeat of one it reversed is answered "already
   * reversed" and a repeat of one it refused is carried out ("0") or refused again.
   * The repeat is claimed in the refund's row before it is sent (RefundService.sendAgain: its count, its
   * reports counted from 0), in its own statement: from then on any refusal of any of the refund's
   * requests — a late one of the first included — leaves it pending (UnitOfWork.refund), and a refund
   * settled meanwhile, or claimed by another worker, is not sent. The repeat's acknowledgement makes its
   * reference the refund's, the earlier one kept (status-writer.ts): both requests' results are matched
   * to the refund. A repeat not acknowledged counts as sent (it may have been accepted); the next reports
   * ask about the earlier request.
   */
  private async sendAfterReports(refund: Refund, requestRef: string): Promise<CheckOutcome> {
    this.logger.info(
      { refundId: refund.id, requestRef, reportChecks: refund.reportChecks, resend: refund.reversalResends + 1 },
      'refund sync: the provider acknowledged the reversal but its outcome never came; sending it again',
    );
    return this.sentAgain(refund, await this.refunds.sendAgain(refund, SOURCE));
  }

  /**
   * What a repeat met: the provider's failure that kept the refund pending read as a failed check (a rate
   * limit backs off the account for the rest of the run), else checked. Logs a repeat that was not sent
   * (`sent` null): the refund was settled meanwhile, or another worker sent it.
   */
  private sentAgain(refund: Refund, sent: RefundRequested | null): CheckOutcome {
    if (!sent) this.logger.info({ refundId: refund.id }, 'refund sync: not sent again; the refund was settled or sent again meanwhile');
    return sent?.keptPendingBy ? outcomeOf(sent.keptPendingBy) : 'checked';
  }
}
