import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, type Payment } from '../../persistence/entities/index.js';
import { parseCardpayEvent, verifyCardpaySignature, type CardpayNotification } from '../../providers/cardpay/webhook.js';
import type { CardpayPort, InboundCallback, ProviderRefundRecord } from '../../providers/types.js';
import { DomainError } from '../errors.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import type { StatusWriter, UnitOfWork } from '../payments/status-writer.js';
import { recordCallbackOnce } from './callback-inbox.js';
import { CALLBACK_UNVERIFIED } from '../../../contract/errors.js';

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
    private readonly writer: StatusWriter,
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
      throw new DomainError('UNAUTHORIZED', CALLBACK_UNVERIFIED.cardpay);
    }

    // charge.refunded carries no refunds (API ≥ 2022-11-15): read them before the transaction opens.
    const reported = event.kind === 'refund' ? await this.cardpay.listChargeRefunds(creds, event.chargeId) : [];

    return this.writer.commit(async (uow) => {
      if (!(await recordCallbackOnce(uow.tx, 'cardpay', event.eventId, payment.id, event.type))) return 'duplicate' as const;
      if (event.kind === 'payment') {
        await uow.payment(
          payment.id,
          { status: event.status, providerRef: event.paymentIntentId, failureReason: event.failureReason, raw: event.raw, reported: event.amount },
          `callback:${event.type}`,
        );
      } else {
        await this.applyRefunds(uow, payment.id, event, reported);
      }
      return 'applied' as const;
    });
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
   * charge.refunded: each completed refund of the charge as the provider lists it (oldest first),
   * recorded once by the status writer, whether the service or the provider's dashboard made it.
   */
  private async applyRefunds(
    uow: UnitOfWork,
    paymentId: string,
    event: Extract<CardpayNotification, { kind: 'refund' }>,
    reported: ProviderRefundRecord[],
  ): Promise<void> {
    for (const refund of [...reported].reverse()) {
      if (refund.status !== 'completed') continue;
      await uow.providerRefund(
        paymentId,
        { providerRefundId: refund.providerRef, reported: refund.amount, ourRefundId: refund.ourRefundId, raw: refund.raw },
        `callback:${event.type}`,
      );
    }
  }
}
