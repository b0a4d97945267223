import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, RefundSchema, type Payment } from '../../persistence/entities/index.js';
import type { WalletpayAdapter } from '../../providers/walletpay/adapter.js';
import { parseWalletpayEvent, verifyWalletpayEvent, walletpayHeaderProblem, walletpayTransmissionId, type WalletpayInboundEvent } from '../../providers/walletpay/webhook.js';
import { ProviderError, type InboundCallback } from '../../providers/types.js';
import { DomainError } from '../errors.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import type { StatusWriter } from '../payments/status-writer.js';
import { recordCallbackOnce } from './callback-inbox.js';
import type { CallbackOutcome } from './cardpay-callback.service.js';
import { CALLBACK_UNVERIFIED } from '../../../contract/errors.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * POST /v1/webhooks/walletpay: find the payment (our id in custom_id, else the order or capture id) →
 * verify with the provider's verify-webhook-signature call using that merchant's credentials and stored
 * webhook_id → store the transmission id once → apply (capture completed / denied, refunds).
 */
export class WalletpayCallbackService {
  constructor(
    private readonly em: EntityManager,
    private readonly adapter: WalletpayAdapter,
    private readonly credentials: CredentialsService,
    private readonly writer: StatusWriter,
    private readonly logger: Logger,
  ) {}

  async handle(callback: InboundCallback): Promise<CallbackOutcome> {
    const transmissionId = walletpayTransmissionId(callback);
    if (!transmissionId) throw new DomainError('UNAUTHORIZED', 'Missing Walletpay-Transmission-Id');
    // Cheap local checks first: a malformed forgery costs no lookup and no verification call.
    const headerProblem = walletpayHeaderProblem(callback);
    if (headerProblem) throw new DomainError('UNAUTHORIZED', `Invalid walletpay callback: ${headerProblem}`);
    const event = parseWalletpayEvent(callback.body);
    if (event.kind === 'ignored') {
      this.logger.info({ provider: 'walletpay', eventType: event.eventType }, 'callback type not used; acknowledged');
      return 'ignored';
    }
    const payment = await this.findPayment(event);
    if (!payment) {
      this.logger.warn({ provider: 'walletpay', transmissionId }, 'callback for an unknown reference; acknowledged and ignored');
      return 'unknown_reference';
    }
    const creds = await this.credentials.find(payment.merchantId, 'walletpay');
    let verdict: 'verified' | 'invalid' = 'invalid';
    try {
      if (creds) verdict = await verifyWalletpayEvent(this.adapter, creds, callback);
    } catch (err) {
      if (err instanceof ProviderError) throw new DomainError('PROVIDER_ERROR', 'walletpay signature verification is unavailable; retry later');
      throw err;
    }
    if (verdict !== 'verified') {
      this.logger.warn({ provider: 'walletpay', transmissionId, paymentId: payment.id }, 'callback signature rejected');
      throw new DomainError('UNAUTHORIZED', CALLBACK_UNVERIFIED.walletpay);
    }

    return this.writer.commit(async (uow) => {
      if (!(await recordCallbackOnce(uow.tx, 'walletpay', transmissionId, payment.id, event.eventType))) return 'duplicate' as const;
      if (event.kind === 'payment') {
        await uow.payment(payment.id, { status: event.status, data: { captureId: event.captureId }, raw: callback.body, reported: event.amount }, `callback:${event.eventType}`);
        return 'applied' as const;
      }
      if (event.status !== 'completed') return 'ignored' as const;
      await uow.providerRefund(
        payment.id,
        { providerRefundId: event.refundId, reported: event.amount ?? null, ourRefundId: event.customId, raw: callback.body },
        `callback:${event.eventType}`,
      );
      return 'applied' as const;
    });
  }

  private async findPayment(event: Exclude<WalletpayInboundEvent, { kind: 'ignored' }>): Promise<Payment | null> {
    const em = this.em.fork();
    if (event.kind === 'payment') {
      if (event.customId && UUID.test(event.customId)) {
        const byId = await em.findOne(PaymentSchema, { id: event.customId, provider: 'walletpay' });
        if (byId) return byId;
      }
      if (event.orderId) return em.findOne(PaymentSchema, { provider: 'walletpay', providerRef: event.orderId });
      return null;
    }
    if (event.customId && UUID.test(event.customId)) {
      const refund = await em.findOne(RefundSchema, { id: event.customId });
      if (refund) return em.findOne(PaymentSchema, { id: refund.paymentId, provider: 'walletpay' });
    }
    if (!event.captureId) return null;
    const rows = await em.getConnection().execute<{ id: string }[]>(
      `SELECT id FROM payments WHERE provider = 'walletpay' AND provider_data->>'captureId' = ? LIMIT 1`,
      [event.captureId],
    );
    return rows[0] ? em.findOne(PaymentSchema, { id: rows[0].id }) : null;
  }
}
