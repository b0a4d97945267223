import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, type Payment } from '../../persistence/entities/index.js';
import { parseCardpayEvent, verifyCardpaySignature, type CardpayNotification } from '../../providers/cardpay/webhook.js';
import type { CardpayPort, InboundCallback, ProviderRefundRecord } from '../../providers/types.js';
import { DomainError } from '../errors.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import { applyPaymentUpdate } from '../payments/payment-transitions.js';
import type { PaymentService } from '../payments/payment.service.js';
import type { RefundService } from '../refunds/refund.service.js';
import { recordCallbackOnce } from './callback-inbox.js';

export type CallbackOutcome = 'applied' | 'duplicate' | 'unknown_reference' | 'ignored';

/**
 * POST /v1/webhooks/cardpay: parse → find the payment (our id in the intent's metadata first, the
 * intent id second) → verify the signature with that merchant's cardpay webhook secret → store the
 * event id once → apply through the state machine, all in one transaction.
 */
export class CardpayCallbackService {
  constructor(
    private readonly em: EntityManager,
    private readonly credentials: CredentialsService,
    private readonly payments: PaymentService,
    private readonly refunds: RefundService,
    private readonly cardpay: CardpayPort,
    private readonly logger: Logger,
  ) {}

  async handle(callback: InboundCallback): Promise<CallbackOutcome> {
    let event: CardpayNotification;
    try {
      event = parseCardpayEvent(callback.body);
    } catch {
      throw new DomainError('BAD_REQUEST', 'Body is not a cardpay event');
    }
    if (event.kind === 'ignored') {
      this.logger.info({ provider: 'cardpay', eventType: event.type }, 'callback type not used; acknowledged');
      return 'ignored';
    }
    const payment = await this.findPayment(event);
    if (!payment) {
      this.logger.warn({ provider: 'cardpay', eventId: event.eventId }, 'callback for an unknown reference; acknowledged and ignored');
      return 'unknown_reference';
    }
    const creds = await this.credentials.find(payment.merchantId, 'cardpay');
    const header = callback.headers['cardpay-signature'] ?? callback.headers['stripe-signature'];
    if (!creds?.webhook_secret || !verifyCardpaySignature(callback.rawBody, header, creds.webhook_secret)) {
      this.logger.warn({ provider: 'cardpay', eventId: event.eventId, paymentId: payment.id }, 'callback signature rejected');
      throw new DomainError('UNAUTHORIZED', 'Invalid or missing Cardpay-Signature');
    }

    // charge.refunded carries no refunds (API ≥ 2022-11-15): read them before the transaction opens.
    const reported = event.kind === 'refund' ? await this.cardpay.listChargeRefunds(creds, event.chargeId) : [];

    const result = await this.em.fork().transactional(async (tx) => {
      if (!(await recordCallbackOnce(tx, 'cardpay', event.eventId, payment.id, event.type))) return { outcome: 'duplicate' as const, deliveryIds: [] };
      if (event.kind === 'payment') {
        const applied = await applyPaymentUpdate(
          tx,
          payment.id,
          { status: event.status, providerRef: event.paymentIntentId, failureReason: event.failureReason, raw: event.raw },
          `callback:${event.type}`,
        );
        return { outcome: 'applied' as const, deliveryIds: applied.deliveryIds };
      }
      return { outcome: 'applied' as const, deliveryIds: await this.applyRefunds(tx, payment, event, reported) };
    });
    await this.payments.enqueue(result.deliveryIds);
    return result.outcome;
  }

  private async findPayment(event: Exclude<CardpayNotification, { kind: 'ignored' }>): Promise<Payment | null> {
    const em = this.em.fork();
    if (event.kind === 'payment' && event.paymentId && /^[0-9a-f-]{36}$/i.test(event.paymentId)) {
      const byId = await em.findOne(PaymentSchema, { id: event.paymentId, provider: 'cardpay' });
      if (byId) return byId;
    }
    return em.findOne(PaymentSchema, { provider: 'cardpay', providerRef: event.paymentIntentId });
  }

  /**
   * charge.refunded: each completed refund of the charge, as the provider lists it, recorded once (see
   * RefundService), whether the service or the provider's dashboard made it. A refund in another
   * currency than the payment's is not ours to count.
   */
  private async applyRefunds(
    tx: EntityManager,
    payment: Payment,
    event: Extract<CardpayNotification, { kind: 'refund' }>,
    reported: ProviderRefundRecord[],
  ): Promise<string[]> {
    const deliveryIds: string[] = [];
    for (const refund of [...reported].reverse()) {
      if (refund.status !== 'completed') continue;
      if (refund.amount.currency !== payment.currency) {
        this.logger.warn({ provider: 'cardpay', paymentId: payment.id, refund: refund.providerRef }, 'provider refund currency differs from the payment; not recorded');
        continue;
      }
      deliveryIds.push(
        ...(await this.refunds.recordProviderRefund(tx, payment.id, {
          providerRefundId: refund.providerRef,
          amountMinor: refund.amount.minor,
          ourRefundId: refund.ourRefundId,
          raw: refund.raw,
          trigger: `callback:${event.type}`,
        })),
      );
    }
    return deliveryIds;
  }
}
