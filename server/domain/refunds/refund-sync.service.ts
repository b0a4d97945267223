import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { AppConfig } from '../../config/config.js';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, RefundSchema, type Payment, type Refund } from '../../persistence/entities/index.js';
import { DomainError } from '../errors.js';
import { askForConfirmation } from '../inbound/confirmation-queries.js';
import { paymentLookup } from '../payments/payment.service.js';
import type { ProviderGateway } from '../payments/provider-gateway.js';
import { recheckDue, scheduleNextCheck } from '../payments/sync-schedule.js';
import { ProviderError } from '../ports.js';
import type { RefundService } from './refund.service.js';

/** The audit trigger of what the refund sync applies. */
const SOURCE = 'refund-sync';

/**
 * Refund sync: re-checks refunds still `pending` with their provider on the status sync's backoff
 * (STATUS_SYNC_SCHEDULE, from the refund's creation), for when neither the provider's answer nor its
 * event settled them — the answer lost to a timeout, the event never delivered. What the provider says
 * goes through the status writer like any answer (its amount checked against the refund's):
 * - a provider that looks refunds up (ProviderPort.findRefund) is asked at once; a refund it has no
 *   record of never reached it, and is sent again with the same idempotency key;
 * - one that reports asynchronously (mobile money) is asked for a status report on our reversal
 *   request, answered as a `status-report` notification that completes the refund; a reversal whose
 *   request was never acknowledged is sent again — the provider reverses a transaction once, and
 *   answers a repeat "already reversed", which completes it all the same.
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

  /** Claims due refunds (SKIP LOCKED, so several workers split them) and syncs each. */
  async syncDue(limit = 25): Promise<number> {
    return recheckDue(this.em, 'refunds', limit, (id) => this.syncOne(id), (id, err) =>
      this.logger.warn({ refundId: id, err: { message: err.message } }, 'refund sync failed'));
  }

  async syncOne(refundId: string): Promise<void> {
    const em = this.em.fork();
    const refund = await em.findOneOrFail(RefundSchema, { id: refundId });
    if (refund.status !== 'pending') return;
    const payment = await em.findOneOrFail(PaymentSchema, { id: refund.paymentId });
    try {
      await this.ask(refund, payment);
    } catch (err) {
      // Not answered now (or refused again, recorded by the send): the schedule decides when to ask next.
      if (!(err instanceof ProviderError) && !(err instanceof DomainError)) throw err;
      this.logger.warn({ refundId, provider: payment.provider, err: { message: err.message } }, 'refund sync: the provider did not answer');
    }
    await scheduleNextCheck(this.em, 'refunds', refundId, this.config.statusSyncScheduleMs);
  }

  private async ask(refund: Refund, payment: Payment): Promise<void> {
    if (this.gateway.offersStatusReports(payment.provider) && refund.providerRef) {
      await this.askForReport(refund, payment, refund.providerRef);
      return;
    }
    const found = await this.gateway.findRefund(payment, { refundId: refund.id, providerRef: refund.providerRef ?? null, payment: paymentLookup(payment) });
    if (found) {
      await this.refunds.settle(refund.id, found, SOURCE);
    } else if (!refund.providerRef) {
      // The provider has no record of the request (or cannot be asked without its id): send it again.
      this.logger.info({ refundId: refund.id, provider: payment.provider }, 'refund sync: the provider has no record of the refund request; sending it again');
      await this.refunds.send(refund.id, SOURCE);
    }
  }

  /** The answer arrives as a status report (see InboundPipeline, `status-report`), which completes the refund. */
  private async askForReport(refund: Refund, payment: Payment, requestRef: string): Promise<void> {
    const queryId = randomUUID();
    const about = { id: queryId, provider: payment.provider, merchantId: refund.merchantId, paymentId: payment.id, refundId: refund.id, code: requestRef, confirms: SOURCE };
    const sent = await askForConfirmation(this.em, about, () => this.gateway.requestStatusReport(payment, { queryId, requestRef }));
    this.logger.info({ refundId: refund.id, provider: payment.provider, queryId, sent }, 'refund sync: asked the provider for a status report');
  }
}
