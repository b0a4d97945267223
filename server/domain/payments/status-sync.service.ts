import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema } from '../../persistence/entities/index.js';
import type { AppConfig } from '../../config/config.js';
import { ProviderError, type ProviderPaymentResult } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';
import { paymentLookup, toUpdate, type PaymentService } from './payment.service.js';

/** How long a claimed payment is hidden from other workers while one syncs it. */
const CLAIM_MS = 5 * 60_000;

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
    const claimed = await this.em.getConnection().execute<{ id: string }[]>(
      `UPDATE payments SET next_sync_at = now() + (? * interval '1 millisecond')
       WHERE id IN (SELECT id FROM payments WHERE status = 'pending' AND next_sync_at <= now()
                    ORDER BY next_sync_at LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING id`,
      [CLAIM_MS, limit],
    );
    for (const { id } of claimed) {
      await this.syncOne(id).catch((err: Error) => this.logger.warn({ paymentId: id, err: { message: err.message } }, 'status sync failed'));
    }
    return claimed.length;
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
    await this.backOff(payment.id);
  }

  /** Still pending: the next re-check follows the schedule; after the last interval it stops. */
  private async backOff(paymentId: string): Promise<void> {
    await this.em.fork().transactional(async (tx) => {
      const payment = await tx.findOneOrFail(PaymentSchema, { id: paymentId });
      if (payment.status !== 'pending') return;
      payment.syncAttempts += 1;
      const delay = this.config.statusSyncScheduleMs[payment.syncAttempts];
      payment.nextSyncAt = delay === undefined ? null : new Date(Date.now() + delay);
    });
  }
}
