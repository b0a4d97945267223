import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { AppConfig } from '../../config/config.js';
import { PaymentSchema, RefundSchema, type Payment, type Refund } from '../../persistence/entities/index.js';
import { appendEvent } from '../events/outbox.js';
import { ProviderError, type ProviderRefundResult } from '../ports.js';
import { DomainError, conflict, notFound } from '../errors.js';
import { formatMinorUnits, toMinorUnits } from '../money/money.js';
import type { ProviderGateway } from '../payments/provider-gateway.js';
import { eventData, recordTransition } from '../payments/payment-transitions.js';
import { canTransition } from '../payments/payment-state.js';
import { paymentLookup, type PaymentService } from '../payments/payment.service.js';

/**
 * Refunds (decisions.md "Refunds"): any number of partial refunds while the payment is `completed` and
 * the sum stays within the amount; the payment becomes `refunded` when they reach it. A refund is
 * reserved as `pending` under the payment's row lock before the provider is called, so two concurrent
 * refunds can never exceed the amount.
 */
export class RefundService {
  constructor(
    private readonly em: EntityManager,
    private readonly config: AppConfig,
    private readonly gateway: ProviderGateway,
    private readonly payments: PaymentService,
  ) {}

  async create(merchantId: string, paymentId: string, amount: string | number | undefined): Promise<Refund> {
    const { refund, payment } = await this.reserve(merchantId, paymentId, amount);
    let result: ProviderRefundResult;
    try {
      result = await this.gateway.refund(payment, {
        refundId: refund.id,
        payment: { ...paymentLookup(payment), amount: { minor: payment.amountMinor, currency: payment.currency }, receiptNumber: payment.receiptNumber ?? null },
        amount: { minor: refund.amountMinor, currency: refund.currency },
        full: refund.amountMinor === payment.amountMinor - payment.amountRefundedMinor,
        idempotencyKey: `refund-${refund.id}`,
      });
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      if (err.kind === 'indeterminate' || err.kind === 'unavailable') {
        // Outcome unknown: the refund stays pending; the provider's refund event settles it.
        throw new DomainError('PROVIDER_ERROR', `${payment.provider} did not answer the refund request; refund ${refund.id} stays pending`);
      }
      await this.settle(refund.id, { providerRef: null, status: 'failed', failureReason: err.message, raw: { error: err.message } });
      throw new DomainError('PROVIDER_ERROR', `${payment.provider} refused the refund: ${err.message}`);
    }
    return this.settle(refund.id, result);
  }

  private async reserve(merchantId: string, paymentId: string, amount: string | number | undefined) {
    return this.em.fork().transactional(async (tx) => {
      const payment = await tx.findOne(PaymentSchema, { id: paymentId, merchantId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!payment) throw notFound('payment');
      if (payment.status !== 'completed') throw conflict(`payment is ${payment.status}; only a completed payment can be refunded`);
      if (!payment.providerRef) throw conflict('payment has no provider reference to refund');
      let pending = await tx.find(RefundSchema, { paymentId, status: 'pending' });
      const fullOnly = !this.gateway.port(payment.provider).capabilities.partialRefunds;
      if (fullOnly) {
        // Full-only refunds are reversals, one at a time. One the provider never acknowledged (its request
        // failed) must not block the merchant's retry: it is superseded. A reversal is idempotent per
        // transaction at the provider, so if the old request did go through, the new one answers
        // "already reversed" and completes all the same.
        for (const stale of pending.filter((r) => !r.providerRef)) {
          stale.status = 'failed';
          stale.failureReason = 'superseded: the operator never acknowledged this reversal request';
        }
        pending = pending.filter((r) => r.providerRef);
        if (pending.length > 0) throw conflict('a reversal of this payment is already pending');
      }
      const reserved = pending.reduce((sum, r) => sum + r.amountMinor, 0n);
      const remaining = payment.amountMinor - payment.amountRefundedMinor - reserved;
      let amountMinor = remaining;
      if (amount !== undefined) {
        amountMinor = toMinorUnits(amount, payment.currency);
        if (amountMinor <= 0n) throw new DomainError('VALIDATION_ERROR', 'Invalid request: amount must be greater than 0', [{ field: 'amount', issue: 'must be greater than 0' }]);
        if (fullOnly && amountMinor !== payment.amountMinor) {
          throw new DomainError('VALIDATION_ERROR', `Invalid request: ${payment.provider} reversals are for the full amount only`, [{ field: 'amount', issue: `must be omitted or equal the full amount for ${payment.provider}` }]);
        }
      }
      if (remaining <= 0n) throw conflict('payment has no amount left to refund');
      if (amountMinor > remaining) {
        const left = formatMinorUnits(remaining, payment.currency);
        throw new DomainError('VALIDATION_ERROR', `Invalid request: amount exceeds the refundable remainder ${left}`, [{ field: 'amount', issue: `must be at most ${left}` }]);
      }
      const refund = tx.create(RefundSchema, {
        id: randomUUID(),
        paymentId,
        merchantId,
        status: 'pending',
        amountMinor,
        currency: payment.currency,
      });
      await tx.flush();
      return { refund, payment };
    });
  }

  /**
   * Records a provider's answer for a refund: completed refunds raise amount_refunded (and move the
   * payment to `refunded` at the full amount) and emit `payment.refunded`, all in one transaction.
   */
  async settle(refundId: string, result: ProviderRefundResult): Promise<Refund> {
    const applied = await this.em.fork().transactional(async (tx) => {
      const refund = await tx.findOneOrFail(RefundSchema, { id: refundId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (result.providerRef) refund.providerRef = result.providerRef;
      refund.providerResponse = result.raw;
      const deliveryIds: string[] = [];
      if (refund.status !== 'pending' || result.status === 'pending') return { refund, deliveryIds };
      refund.status = result.status;
      const payment = await tx.findOneOrFail(PaymentSchema, { id: refund.paymentId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (result.status === 'failed') {
        refund.failureReason = result.failureReason ?? 'refused by the provider';
        return { refund, deliveryIds };
      }
      deliveryIds.push(...(await this.recordCompletedRefund(tx, payment, refund)));
      return { refund, deliveryIds };
    });
    await this.payments.enqueue(applied.deliveryIds);
    return applied.refund;
  }

  /** Raises amount_refunded, moves a fully refunded payment to `refunded`, appends payment.refunded. */
  async recordCompletedRefund(tx: EntityManager, payment: Payment, refund: Refund): Promise<string[]> {
    const previous = payment.status;
    payment.amountRefundedMinor += refund.amountMinor;
    if (payment.amountRefundedMinor >= payment.amountMinor && canTransition(payment.status, 'refunded')) payment.status = 'refunded';
    if (payment.status !== previous) {
      await recordTransition(tx, payment.id, previous, payment.status, 'refund', true);
    }
    const appended = await appendEvent(tx, {
      merchantId: payment.merchantId,
      paymentId: payment.id,
      type: 'payment.refunded',
      data: {
        ...eventData(payment, previous),
        refund_id: refund.id,
        amount_refunded: formatMinorUnits(payment.amountRefundedMinor, payment.currency),
      },
    });
    return appended.deliveryId ? [appended.deliveryId] : [];
  }

  /**
   * A completed refund reported by a provider callback. Our own refund (matched by its id, its provider
   * ref, or — while its answer is still in flight — a pending one of the same amount) is completed if
   * still pending; a refund made at the provider directly is recorded now. Returns new delivery ids.
   */
  async recordProviderRefund(
    tx: EntityManager,
    paymentId: string,
    reported: { providerRefundId: string; amountMinor: bigint | null; ourRefundId?: string | null; raw: unknown; trigger: string },
  ): Promise<string[]> {
    const payment = await tx.findOneOrFail(PaymentSchema, { id: paymentId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    const known =
      (reported.ourRefundId && /^[0-9a-f-]{36}$/i.test(reported.ourRefundId) ? await tx.findOne(RefundSchema, { id: reported.ourRefundId, paymentId }) : null) ??
      (await tx.findOne(RefundSchema, { paymentId, providerRef: reported.providerRefundId })) ??
      (reported.amountMinor === null
        ? null
        : await tx.findOne(RefundSchema, { paymentId, providerRef: null, status: 'pending', amountMinor: reported.amountMinor }, { orderBy: { createdAt: 'asc' } }));
    if (known) {
      if (known.status !== 'pending') return [];
      known.status = 'completed';
      known.providerRef = reported.providerRefundId;
      const ids = await this.recordCompletedRefund(tx, payment, known);
      await tx.flush();
      return ids;
    }
    const amountMinor = reported.amountMinor;
    if (amountMinor === null || payment.status !== 'completed' || payment.amountRefundedMinor + amountMinor > payment.amountMinor) {
      await recordTransition(tx, payment.id, payment.status, 'refunded', reported.trigger, false, `provider refund ${reported.providerRefundId} not applicable`);
      return [];
    }
    const refund = tx.create(RefundSchema, {
      id: randomUUID(),
      paymentId,
      merchantId: payment.merchantId,
      status: 'completed',
      amountMinor,
      currency: payment.currency,
      providerRef: reported.providerRefundId,
      providerResponse: reported.raw,
    });
    const ids = await this.recordCompletedRefund(tx, payment, refund);
    await tx.flush();
    return ids;
  }

  /**
   * The provider's answer to a reversal (a full refund answered asynchronously), inside `tx`: succeeded
   * → refund completed, payment reversed, payment.reversed; refused → refund failed with the reason,
   * the payment stays completed, refund.failed. A refund already settled is left alone.
   */
  async applyReversalResult(
    tx: EntityManager,
    refundId: string,
    result: { succeeded: boolean; failureReason: string | null; raw: unknown; trigger: string },
  ): Promise<{ applied: boolean; deliveryIds: string[] }> {
    const refund = await tx.findOneOrFail(RefundSchema, { id: refundId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (refund.status !== 'pending') return { applied: false, deliveryIds: [] };
    const payment = await tx.findOneOrFail(PaymentSchema, { id: refund.paymentId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    refund.providerResponse = result.raw;
    const previous = payment.status;
    if (result.succeeded && canTransition(payment.status, 'reversed')) {
      refund.status = 'completed';
      payment.amountRefundedMinor = payment.amountMinor;
      payment.status = 'reversed';
      await recordTransition(tx, payment.id, previous, 'reversed', result.trigger, true);
    } else {
      refund.status = 'failed';
      refund.failureReason = result.succeeded ? `payment is ${payment.status}; it cannot be reversed` : (result.failureReason ?? 'reversal failed');
    }
    const event = await appendEvent(tx, {
      merchantId: payment.merchantId,
      paymentId: payment.id,
      type: refund.status === 'completed' ? 'payment.reversed' : 'refund.failed',
      data: {
        ...eventData(payment, previous),
        refund_id: refund.id,
        amount_refunded: formatMinorUnits(payment.amountRefundedMinor, payment.currency),
        ...(refund.status === 'failed' ? { failure_reason: refund.failureReason ?? undefined } : {}),
      },
    });
    await tx.flush();
    return { applied: true, deliveryIds: event.deliveryId ? [event.deliveryId] : [] };
  }

  async get(merchantId: string, id: string): Promise<Refund> {
    const refund = await this.em.findOne(RefundSchema, { id, merchantId });
    if (!refund) throw notFound('refund');
    return refund;
  }

  async listForPayment(merchantId: string, paymentId: string, page: number, pageSize: number) {
    const payment = await this.em.findOne(PaymentSchema, { id: paymentId, merchantId });
    if (!payment) throw notFound('payment');
    const [items, total] = await this.em.findAndCount(RefundSchema, { paymentId, merchantId }, {
      orderBy: { createdAt: 'asc', id: 'asc' },
      limit: pageSize,
      offset: (page - 1) * pageSize,
    });
    return { items, total };
  }
}
