import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema } from '../../persistence/entities/index.js';
import type { AppConfig } from '../../config/config.js';
import { ProviderError, type ProviderPaymentResult } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';
import { paymentLookup, toUpdate, type PaymentService } from './payment.service.js';
import { recheckDue, scheduleNextCheck } from './sync-schedule.js';

/**
 * Status sync ("psync"): re-checks pending payments with their provider on a backoff
 * (STATUS_SYNC_SCHEDULE, default 1m … 48h) and settles them through the same state machine and events
 * as a callback would. A payment whose creation answer was lost (no provider ref) is re-sent with the
 * same idempotency key, which the provider answers with the original result instead of charging again.
 */
export class StatusSyncService {
  constructor(
    private readonly em: EntityManager,
    private readonly config: AppConfig,
    private readonly gateway: ProviderGateway,
    private readonly payments: PaymentService,
    private readonly logger: Logger,
  ) {}

  /** Claims due payments (SKIP LOCKED, so several workers split them) and syncs each. */
  async syncDue(limit = 25): Promise<number> {
    return recheckDue(this.em, 'payments', limit, (id) => this.syncOne(id), (id, err) =>
      this.logger.warn({ paymentId: id, err: { message: err.message } }, 'status sync failed'));
  }

  async syncOne(paymentId: string): Promise<void> {
    const payment = await this.em.fork().findOneOrFail(PaymentSchema, { id: paymentId });
    if (payment.status !== 'pending') return;
    let result: ProviderPaymentResult | null = null;
    try {
      result = payment.providerRef
        ? await this.gateway.getPayment(payment, paymentLookup(payment))
        : !this.gateway.port(payment.provider).capabilities.replayableCreate
          ? null // creation cannot be repeated to learn its answer: reconciliation finds the payment
          : await this.gateway.createPayment(payment, {
              paymentId: payment.id,
              reference: payment.reference,
              amount: { minor: payment.amountMinor, currency: payment.currency },
              idempotencyKey: `payment-${payment.id}`,
              fields: payment.providerData,
            });
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      if (err.kind === 'declined') result = err.result ?? null;
      if (err.kind === 'declined' && !result) {
        await this.payments.applyUpdate(payment.id, { status: 'failed', failureReason: err.message }, 'status-sync');
        return;
      }
    }
    if (result) {
      const applied = await this.payments.applyUpdate(payment.id, toUpdate(result), 'status-sync');
      if (applied.payment.status !== 'pending') return;
    }
    await scheduleNextCheck(this.em, 'payments', payment.id, this.config.statusSyncScheduleMs);
  }
}
