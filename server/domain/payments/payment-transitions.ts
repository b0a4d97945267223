import type { EntityManager } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import { PaymentSchema, type Payment, type PaymentStatus } from '../../persistence/entities/index.js';
import type { Money, ProviderPaymentResult } from '../ports.js';
import { appendEvent } from '../events/outbox.js';
import type { MerchantEventData } from '../events/merchant-events.js';
import { formatMinorUnits } from '../money/money.js';
import { canTransition, eventFor } from './payment-state.js';

/** What a provider told us about a payment, from any source (creation, capture, callback, sync). */
export interface PaymentUpdate {
  status: PaymentStatus;
  providerRef?: string | null;
  receiptNumber?: string | null;
  failureReason?: string | null;
  nextAction?: ProviderPaymentResult['nextAction'];
  raw?: unknown;
  data?: Record<string, unknown>;
  /** The amount the provider reported with this update, when it reported one (integrity check). */
  reportedAmount?: Money | null;
}

export interface AppliedUpdate {
  payment: Payment;
  /** Delivery rows written by this transaction; enqueue them after commit. */
  deliveryIds: string[];
  transitioned: boolean;
}

export function eventData(payment: Payment, previousStatus: PaymentStatus): MerchantEventData {
  return {
    payment_id: payment.id,
    amount: formatMinorUnits(payment.amountMinor, payment.currency),
    currency: payment.currency,
    provider: payment.provider,
    status: payment.status,
    previous_status: previousStatus,
  };
}

/** One row of the transition audit: accepted moves and refused ones (with the reason in `note`). */
export async function recordTransition(tx: EntityManager, paymentId: string, from: PaymentStatus | null, to: PaymentStatus, trigger: string, accepted: boolean, note?: string) {
  await tx.execute(
    'INSERT INTO payment_transitions (payment_id, from_status, to_status, trigger, accepted, note) VALUES (?, ?, ?, ?, ?, ?)',
    [paymentId, from, to, trigger, accepted, note ?? null],
    'run',
  );
}

/**
 * Applies a provider update to a payment inside `tx` (the caller's transaction), holding the row lock.
 * A transition the state machine allows moves the payment and appends its event to the outbox in the
 * same transaction; one it refuses is recorded in payment_transitions and otherwise ignored. Details
 * (provider_ref, next_action, raw response) are refreshed only while the payment is still pending.
 */
export async function applyPaymentUpdate(tx: EntityManager, paymentId: string, update: PaymentUpdate, trigger: string): Promise<AppliedUpdate> {
  const payment = await tx.findOneOrFail(PaymentSchema, { id: paymentId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
  const from = payment.status;
  const deliveryIds: string[] = [];

  if (from === 'pending') {
    if (update.providerRef) payment.providerRef = update.providerRef;
    if (update.receiptNumber) payment.receiptNumber = update.receiptNumber;
    if (update.nextAction !== undefined) payment.nextAction = update.nextAction ?? null;
    if (update.raw !== undefined) payment.providerResponse = update.raw;
    if (update.data) payment.providerData = { ...payment.providerData, ...update.data };
  }

  if (update.status === from) {
    await tx.flush();
    return { payment, deliveryIds, transitioned: false };
  }
  if (!canTransition(from, update.status)) {
    await recordTransition(tx, paymentId, from, update.status, trigger, false, 'refused by the state machine');
    await tx.flush();
    return { payment, deliveryIds, transitioned: false };
  }

  payment.status = update.status;
  if (update.status === 'failed') payment.failureReason = update.failureReason ?? payment.failureReason ?? 'declined by the provider';
  if (update.status !== 'pending') {
    payment.nextAction = null;
    payment.nextSyncAt = null;
  }
  await recordTransition(tx, paymentId, from, update.status, trigger, true);
  const appended = await appendEvent(tx, {
    merchantId: payment.merchantId,
    paymentId: payment.id,
    type: eventFor(from, update.status),
    data: eventData(payment, from),
  });
  if (appended.deliveryId) deliveryIds.push(appended.deliveryId);
  await tx.flush();
  return { payment, deliveryIds, transitioned: true };
}

/** Records the first status of a new payment (the row is written as pending before the provider call). */
export async function recordCreation(tx: EntityManager, paymentId: string): Promise<void> {
  await recordTransition(tx, paymentId, null, 'pending', 'create', true);
}
