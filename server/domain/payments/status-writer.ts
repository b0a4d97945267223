import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Logger } from '../../observability/logger.js';
import { DomainError } from '../errors.js';
import {
  PaymentSchema, RefundSchema, type IntegrityMismatch, type Payment, type PaymentStatus, type Refund, type RefundStatus,
} from '../../persistence/entities/index.js';
import type { Money, ProviderPaymentResult, RefundReport } from '../ports.js';
import { appendEvent, appendEventSql } from '../events/outbox.js';
import type { MerchantEventData, PaymentEventType } from '../events/merchant-events.js';
import { formatMinorUnits } from '../money/money.js';
import type { DeliveryQueue, IntegrityCounter } from '../ports.js';
import { queryPrepared } from '../../persistence/prepared-statements.js';
import { PAYMENT_COLUMNS, paymentFromRow } from './payment-row.js';
import { paymentEdge, refundEdge, type PaymentEdge } from './state-table.js';

/**
 * THE status writer (issue 10): payment and refund statuses change only in `UnitOfWork.move`, driven by
 * the table in state-table.ts. One unit of work is one database transaction holding the row locks: the
 * status change, its audit row (payment_transitions), the merchant event and its delivery commit
 * together; the DeliveryQueue port hears of the new deliveries after the commit (and wakes the workers
 * with a NOTIFY; the sweeper finds anything missed).
 *
 * Integrity (anchor: Hyperswitch's integrity framework, without its opt-outs): a provider report that
 * carries an amount must carry ours — the payment's, or the refund's — in amount AND currency, and a
 * report that moves money must carry one. Otherwise nothing changes: the report is recorded in the audit
 * with both amounts (accepted = false), kept on the payment (`integrity` in the API), logged at warn and
 * counted (payments_integrity_mismatches_total). No caller can skip it: it is inside the only writer.
 *
 * One writer, two execution strategies. The general one is the unit of work above (row lock, ORM,
 * several statements). The creation answer of a payment the request has just reserved — the hot path of
 * POST /v1/payments — takes a second one when it can (`applyCreation`): a conditional UPDATE … WHERE
 * status = 'pending' with the audit row, the event, its delivery and the idempotency key's finish as CTEs
 * of the same statement (one round trip, no ORM flush). The move comes from the same table and the
 * report passes the same integrity check (`assessReport`, `sameMoney`) before it is sent; anything else
 * — a refused report, a payment a callback has already moved — goes to the general strategy.
 */

/** What a provider told us about a payment, from any source (creation, capture, callback, sync, reconcile). */
export interface PaymentUpdate {
  status: PaymentStatus;
  /** The amount and currency the provider reports for this payment; required for a move to `completed`. */
  reported?: Money | null;
  providerRef?: string | null;
  receiptNumber?: string | null;
  failureReason?: string | null;
  nextAction?: ProviderPaymentResult['nextAction'];
  raw?: unknown;
  data?: Record<string, unknown>;
  /**
   * What makes the provider's object another than the payment was created as, besides its amount
   * (ProviderPaymentResult.integrityIssue): refused as an integrity mismatch, whatever its amount.
   */
  issue?: string | null;
  /**
   * Refunds the provider lists with the payment: when this report completes it (pending → completed), its
   * completed ones are recorded in the same unit of work as refunds made at the provider (providerRefund).
   */
  refunds?: RefundReport[];
  /**
   * The report is the provider's answer to our cancel of its object (ProviderPort.abandonPayment): a move to
   * `failed` leaves nothing open there, so the payment is not marked for AbandonFailedService (abandon_due_at),
   * which would only send a second cancel (refused) and a read.
   */
  answersOurCancel?: boolean;
}

/** What a provider (or the service itself, for a reversal that never reached the operator) says about a refund. */
export interface RefundUpdate {
  status: RefundStatus;
  /** The refunded amount and currency the provider reports; required for a move to `completed`. */
  reported?: Money | null;
  providerRef?: string | null;
  failureReason?: string | null;
  raw?: unknown;
  /**
   * A mobile-money reversal's result: completing it reverses the whole payment instead of refunding part
   * of it; a failure never undoes one that completed (only a card refund fails after completing).
   */
  reversal?: boolean;
  /** The provider's reference of the request this answers (a reversal's), for the record of a refusal not applied. */
  request?: string | null;
  /**
   * The receipt of the transaction a report of a completed reversal describes (a transaction-status
   * report's ReceiptNo). A reversal's amount is always the payment's, so the amount check cannot tell the
   * reversal from the original charge: a report naming the payment's own receipt is refused (UnitOfWork.refund).
   */
  transactionReceipt?: string | null;
  /**
   * A reversal's `failed` that is no final outcome (a queue-timeout notice: the operator may still carry
   * the request out and send its result): recorded as a refused move, the refund stays pending.
   */
  outcomeUnknown?: boolean;
}

/** A refund the provider reports that may not be ours yet (made in the provider's dashboard). */
export interface ReportedRefund {
  providerRefundId: string;
  reported: Money | null;
  /** Our refund this provider refund is (by its provider reference: resolve.ts findOurRefund), never our id as the message carries it. */
  ourRefundId?: string | null;
  raw: unknown;
}

export interface PaymentOutcome {
  payment: Payment;
  transitioned: boolean;
  /** Set when the integrity check refused the report. */
  mismatch: IntegrityMismatch | null;
}

/**
 * What the status writer did with a settled transaction quoting a payment (UnitOfWork.settledTransaction):
 * `completed` the pending payment; `mismatch`: refused, another amount or currency; `charged_but_failed` /
 * `duplicate_charge`: recorded as such, nothing moved; `unchanged`: nothing to do (already so), except that
 * a payment completed without a receipt may have taken this one (`receiptRecorded`).
 */
export type SettledTransactionOutcome =
  | { kind: 'completed' }
  | { kind: 'mismatch'; mismatch: IntegrityMismatch }
  | { kind: 'charged_but_failed' }
  | { kind: 'duplicate_charge' }
  | { kind: 'unchanged'; receiptRecorded: boolean };

export interface RefundOutcome {
  refund: Refund;
  payment: Payment;
  transitioned: boolean;
  mismatch: IntegrityMismatch | null;
  /** Set when a refusal of a reversal that was sent again, or a queue timeout of any reversal, was recorded but not applied: the refund stays pending. */
  keptPending?: boolean;
}

type Subject = { kind: 'payment'; row: Payment } | { kind: 'refund'; row: Refund; payment: Payment };

interface Mismatched {
  provider: string;
  source: string;
  paymentId: string;
  mismatch: IntegrityMismatch;
}

/** A provider's report that one of our `failed` refunds completed: refused, recorded, logged as an error after the commit. */
interface CompletedAfterFailed {
  provider: string;
  source: string;
  paymentId: string;
  refundId: string;
  providerRefundId: string | null;
  reported: string;
}

/** How a refused completion of a pending refund that the payment cannot take starts its audit note (recorded once per refund). */
const REFUND_DOES_NOT_FIT = 'a refund completed at the provider does not fit the payment';

/** A report of a completed reversal that describes the payment's own charge (its receipt): refused, the refund kept pending, logged at warn after the commit. */
interface ReportOfTheCharge {
  provider: string;
  source: string;
  paymentId: string;
  refundId: string;
  receipt: string;
}

/** A provider's confirmed completion of one of our `pending` refunds that the payment cannot take: refused, kept pending, counted and logged as an error after the commit. */
interface CompletionThatDoesNotFit {
  provider: string;
  source: string;
  paymentId: string;
  refundId: string;
  providerRefundId: string | null;
  why: string;
  paymentStatus: string;
  amountMinor: string;
  amountRefundedMinor: string;
  refundAmountMinor: string;
  currency: string;
}

/**
 * A charge the provider reports (of exactly the amount) for a payment recorded `failed`: the customer paid
 * while the merchant was told failed. Counted once per payment and source, logged as an error each time.
 */
interface ChargedButFailed {
  provider: string;
  merchantId: string;
  paymentId: string;
  source: string;
  /** The provider's reference of the charge, when the report names one (a receipt, an intent). */
  reference: string | null;
  /** Recorded in the audit now: the first such report from this source. */
  firstReport: boolean;
}

/** A settled transaction quoting a payment already paid with another receipt: the customer was charged twice. */
interface DuplicateCharge {
  provider: string;
  merchantId: string;
  paymentId: string;
  source: string;
  receipt: string;
  /** The payment's own receipt. */
  paidWith: string;
  reported: string;
  /** Recorded in the audit now: the first report of this receipt. */
  firstReport: boolean;
}

/** The audit note of a charge reported for a payment recorded failed (followed by the charge's reference, when named). */
const CHARGED_BUT_FAILED = 'a payment recorded failed was charged at the provider';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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

/**
 * The first audit row of a new payment (written as pending before the provider is called), as a CTE body
 * of the statement that inserts the payment: one row per payment the CTE `inserted` returns.
 */
export function creationAuditSql(inserted: string): string {
  return `INSERT INTO payment_transitions (payment_id, subject, from_status, to_status, trigger, accepted)
    SELECT id, 'payment', NULL, 'pending', 'create', true FROM ${inserted}`;
}

/**
 * Another write that must commit with a creation answer (the idempotency key's finish): a data-modifying
 * statement usable as a CTE; `when` is an SQL condition it adds to its WHERE.
 */
export interface CompanionWrite {
  sql(when: string): string;
  params: unknown[];
}

/**
 * A pending refund's provider reference from its provider's answer. A new request's reference (a
 * reversal sent again) replaces it; the earlier one is kept, as its result may still come and counts.
 * A result naming an earlier request changes nothing.
 */
function newProviderRef(refund: Refund, providerRef: string): void {
  const earlier = refund.earlierProviderRefs ?? [];
  if (refund.providerRef === providerRef || earlier.includes(providerRef)) return;
  if (refund.providerRef) refund.earlierProviderRefs = [...earlier, refund.providerRef];
  refund.providerRef = providerRef;
}

function sameMoney(expected: Money, reported: Money | null | undefined): boolean {
  return !!reported && reported.minor === expected.minor && reported.currency.toUpperCase() === expected.currency.toUpperCase();
}

const amountOf = (payment: Payment): Money => ({ minor: payment.amountMinor, currency: payment.currency });

/** Whether a reported transaction (a receipt) is the payment's own charge. */
const describesTheCharge = (payment: Payment, receipt: string | null | undefined): boolean =>
  !!receipt && !!payment.receiptNumber && receipt.toUpperCase() === payment.receiptNumber.toUpperCase();

/**
 * The rule both strategies follow for a report about a payment: the move the table allows (null when the
 * status stays or the move is not listed), and whether the report must carry the payment's amount —
 * a report that moves money must carry it, and any report that carries one must carry ours.
 */
function assessReport(payment: Payment, update: PaymentUpdate): { edge: PaymentEdge | null; amountChecked: boolean } {
  const from = payment.status;
  const edge = update.status === from ? null : paymentEdge(from, update.status);
  const amountChecked = from === 'pending' && (edge?.movesMoney === true || (update.reported !== undefined && update.reported !== null) || Boolean(update.issue));
  return { edge, amountChecked };
}

const json = (value: unknown) => (value === null ? null : JSON.stringify(value));

/**
 * A payment moved to `failed` that has a provider object: the worker cancels that object at the provider
 * (AbandonFailedService), outside this transaction, so that nothing can charge it after we said failed.
 */
async function markAbandonDue(tx: EntityManager, paymentId: string): Promise<void> {
  await tx.execute('UPDATE payments SET abandon_due_at = now() WHERE id = ?', [paymentId], 'run');
}

export class StatusWriter {
  constructor(
    private readonly em: EntityManager,
    private readonly deliveryQueue: DeliveryQueue,
    private readonly mismatches: IntegrityCounter,
    private readonly logger: Logger,
  ) {}

  /**
   * Runs `work` as one unit of work (one transaction). After the commit: mismatches are logged and
   * counted, and the new deliveries enqueued. Never call a provider inside `work`.
   */
  async commit<T>(work: (uow: UnitOfWork) => Promise<T>): Promise<T> {
    const { result, uow } = await this.em.fork().transactional(async (tx) => {
      const uow = new UnitOfWork(tx);
      const result = await work(uow);
      await tx.flush();
      return { result, uow };
    });
    for (const m of uow.refused) {
      this.mismatches.inc({ provider: m.provider, source: m.source });
      this.logger.warn({ paymentId: m.paymentId, provider: m.provider, ...m.mismatch }, 'provider report refused: amount or currency is not ours');
    }
    for (const c of uow.completedAfterFailed) {
      this.logger.error(c, 'a refund recorded failed was completed at the provider; check it there and settle it by hand (it stays failed here)');
    }
    for (const r of uow.reportsOfTheCharge) {
      this.logger.warn(r, "a report of the refund's reversal describes the payment's own charge (its receipt), not the reversal; not applied, the refund stays pending");
    }
    for (const c of uow.completionsThatDoNotFit) {
      this.mismatches.inc({ provider: c.provider, source: `${c.source}:refund_does_not_fit` });
      this.logger.error(c, 'a refund the provider completed does not fit the payment here; it stays pending: check the payment\'s refunds with the provider and settle it by hand');
    }
    for (const d of uow.duplicateCharges) {
      if (d.firstReport) this.mismatches.inc({ provider: d.provider, source: `${d.source}:duplicate_charge` });
      this.logger.error(d, 'a second charge quotes a payment already paid with another receipt; refund it at the provider (nothing changed here)');
    }
    for (const c of uow.chargesOfFailed) {
      if (c.firstReport) this.mismatches.inc({ provider: c.provider, source: `${c.source}:charged_but_failed` });
      this.logger.error(c, 'a payment recorded failed was charged at the provider; refund it there or settle it by hand (it stays failed here)');
    }
    await this.enqueue(uow.deliveryIds);
    return result;
  }

  applyPayment(paymentId: string, update: PaymentUpdate, source: string): Promise<PaymentOutcome> {
    return this.commit((uow) => uow.payment(paymentId, update, source));
  }

  /**
   * The provider's answer to the creation of `payment` (as this request reserved or read it), committed
   * with `companion`. One statement when the payment is still pending and the report passes the integrity
   * check with a move the table lists (or no move); otherwise the general unit of work, with `companion`
   * in its transaction.
   */
  async applyCreation(payment: Payment, update: PaymentUpdate, source: string, companion: CompanionWrite): Promise<PaymentOutcome> {
    const { edge, amountChecked } = assessReport(payment, update);
    const direct =
      payment.status === 'pending' && (update.status === 'pending' || edge?.via === 'provider') && (!amountChecked || sameMoney(amountOf(payment), update.reported)) &&
      !update.issue && !update.refunds?.length;
    const applied = direct ? await this.applyInOneStatement(payment, update, source, edge, companion) : null;
    if (applied) return applied;
    return this.commit(async (uow) => {
      const outcome = await uow.payment(payment.id, update, source);
      await uow.tx.execute(companion.sql('true'), companion.params, 'run');
      return outcome;
    });
  }

  /**
   * `UnitOfWork.payment` for a pending payment as one statement: the conditional UPDATE (WHERE status =
   * 'pending': a concurrent callback that moved it first wins, and then nothing here is written), and
   * FROM its row the audit row, the event with its delivery (outbox.ts) and the companion. Null when the
   * payment was no longer pending.
   */
  private async applyInOneStatement(payment: Payment, update: PaymentUpdate, source: string, edge: PaymentEdge | null, companion: CompanionWrite): Promise<PaymentOutcome | null> {
    const moves = edge !== null;
    const set: string[] = [];
    const params: unknown[] = [];
    const assign = (sql: string, ...values: unknown[]) => {
      set.push(sql);
      params.push(...values);
    };
    if (update.providerRef) assign('provider_ref = ?', update.providerRef);
    if (update.receiptNumber) assign('receipt_number = ?', update.receiptNumber);
    if (update.raw !== undefined) assign('provider_response = ?::jsonb', json(update.raw));
    if (update.data) assign('provider_data = provider_data || ?::jsonb', JSON.stringify(update.data));
    if (moves) {
      assign('status = ?', update.status);
      if (update.status === 'failed') {
        assign(`failure_reason = COALESCE(?, failure_reason, 'declined by the provider')`, update.failureReason ?? null);
        if (!update.answersOurCancel) assign(`abandon_due_at = CASE WHEN COALESCE(?::text, provider_ref) IS NOT NULL THEN now() END`, update.providerRef ?? null);
      }
      assign('next_action = NULL, next_sync_at = NULL');
    } else if (update.nextAction !== undefined) {
      assign('next_action = ?::jsonb', json(update.nextAction ?? null));
    }
    assign('updated_at = now()');
    const ctes = [`moved AS (UPDATE payments SET ${set.join(', ')} WHERE id = ? AND status = 'pending' RETURNING ${PAYMENT_COLUMNS})`];
    params.push(payment.id);
    let event: ReturnType<typeof appendEventSql> | null = null;
    if (edge) {
      ctes.push(`audit AS (INSERT INTO payment_transitions (payment_id, subject, from_status, to_status, trigger, accepted)
        SELECT id, 'payment', 'pending', ?, ?, true FROM moved)`);
      params.push(edge.to, source);
      event = appendEventSql({ merchantId: payment.merchantId, paymentId: payment.id, type: edge.event, data: eventData({ ...payment, status: edge.to }, 'pending') }, 'moved');
      ctes.push(event.sql);
      params.push(...event.params);
    }
    ctes.push(`companion AS (${companion.sql('EXISTS (SELECT 1 FROM moved)')})`);
    params.push(...companion.params);
    // A prepared statement: its text varies only with which fields the report sets (a few variants).
    const rows = await queryPrepared<Record<string, unknown>>(
      this.em,
      `WITH ${ctes.join(',\n')}\nSELECT moved.*${event ? ', (SELECT id FROM delivery) AS delivery_id' : ''} FROM moved`,
      params,
    );
    const row = rows[0];
    if (!row) return null;
    const { delivery_id: deliveryId, ...columns } = row;
    if (typeof deliveryId === 'string') await this.enqueue([deliveryId]);
    const providerResponse = update.raw !== undefined ? update.raw : payment.providerResponse;
    return { payment: paymentFromRow(columns, providerResponse), transitioned: moves, mismatch: null };
  }

  /**
   * A provider's report that a `failed` payment was charged, from a source that knows the payment is
   * failed (reconciliation, the cancel of a failed card payment's intent): see UnitOfWork.chargedButFailed.
   */
  async chargedButFailed(paymentId: string, reported: Money | null | undefined, source: string, reference: string | null): Promise<void> {
    await this.commit((uow) => uow.chargedButFailed(paymentId, reported, source, reference));
  }

  applyRefund(refundId: string, update: RefundUpdate, source: string): Promise<RefundOutcome> {
    return this.commit((uow) => uow.refund(refundId, update, source));
  }

  /** See UnitOfWork.failLostPayment: an operator's settlement of a lost creation left pending. */
  failLostPayment(paymentId: string, reason: string, source: string, refusal: (payment: Payment) => string | null): Promise<PaymentOutcome | null> {
    return this.commit((uow) => uow.failLostPayment(paymentId, reason, source, refusal));
  }

  /** See UnitOfWork.failPendingRefund: an operator's settlement of a refund left pending. */
  failPendingRefund(refundId: string, reason: string, source: string): Promise<RefundOutcome | null> {
    return this.commit((uow) => uow.failPendingRefund(refundId, reason, source));
  }

  private async enqueue(deliveryIds: string[]): Promise<void> {
    if (deliveryIds.length === 0) return;
    await this.deliveryQueue.enqueue(deliveryIds.length).catch((err: Error) => {
      this.logger.warn({ err: { message: err.message } }, 'could not enqueue deliveries; the sweeper will');
    });
  }
}

export class UnitOfWork {
  readonly deliveryIds: string[] = [];
  readonly refused: Mismatched[] = [];
  readonly completedAfterFailed: CompletedAfterFailed[] = [];
  readonly completionsThatDoNotFit: CompletionThatDoesNotFit[] = [];
  readonly reportsOfTheCharge: ReportOfTheCharge[] = [];
  readonly chargesOfFailed: ChargedButFailed[] = [];
  readonly duplicateCharges: DuplicateCharge[] = [];

  constructor(readonly tx: EntityManager) {}

  /**
   * Applies a provider's report about a payment. Details (provider_ref, next_action, raw response) are
   * refreshed only while the payment is pending and only from a report that passed the integrity check —
   * and a completed payment's missing receipt from a report of completion naming it, of exactly its amount.
   */
  async payment(paymentId: string, update: PaymentUpdate, source: string): Promise<PaymentOutcome> {
    const payment = await this.lockPayment(paymentId);
    const from = payment.status;
    if (from === 'failed' && update.status === 'completed') return this.refuseChargeOfFailed(payment, update.reported, source, update.receiptNumber ?? update.providerRef ?? null);
    if (from === 'completed' && update.status === 'completed' && update.receiptNumber && !payment.receiptNumber) {
      // Completed by a report naming no receipt (an STK query: check-status, the status sync, an unsigned
      // callback's confirmation); the provider's verified report naming it arrives after: recorded, as a
      // settled transaction's would be (recordReceipt), with no second completion.
      const mismatch = await this.recordReceipt(payment, update.receiptNumber, update.providerRef ?? null, update.reported, source);
      return { payment, transitioned: false, mismatch };
    }
    const { edge, amountChecked } = assessReport(payment, update);
    if (amountChecked) {
      const mismatch = await this.checkIntegrity(payment, null, amountOf(payment), update.reported, source, update.status, update.issue);
      if (mismatch) return { payment, transitioned: false, mismatch };
    }
    if (from === 'pending') {
      if (update.providerRef) payment.providerRef = update.providerRef;
      if (update.receiptNumber) payment.receiptNumber = update.receiptNumber;
      if (update.nextAction !== undefined) payment.nextAction = update.nextAction ?? null;
      if (update.raw !== undefined) payment.providerResponse = update.raw;
      if (update.data) payment.providerData = { ...payment.providerData, ...update.data };
    }
    if (update.status === from) return { payment, transitioned: false, mismatch: null };

    if (edge?.via === 'provider' && update.status === 'failed') {
      payment.failureReason = update.failureReason ?? payment.failureReason ?? 'declined by the provider';
    }
    const moved = await this.move({ kind: 'payment', row: payment }, update.status, source, 'provider');
    if (!moved) return { payment, transitioned: false, mismatch: null };
    payment.nextAction = null;
    payment.nextSyncAt = null;
    if (update.status === 'failed' && payment.providerRef && !update.answersOurCancel) await markAbandonDue(this.tx, payment.id);
    await this.emit(payment, moved.event, eventData(payment, from));
    if (update.status === 'completed') await this.refundsListedWith(payment, update.refunds ?? [], source);
    return { payment, transitioned: true, mismatch: null };
  }

  /**
   * The refunds a report that completed `payment` just now lists with it (a walletpay order read whose
   * capture is REFUNDED or PARTIALLY_REFUNDED: refunded at the provider before we saw it paid, and whose
   * refund event may never come). Each completed one is recorded as its refund event would record it
   * (providerRefund: a refund made at the provider, amount and currency checked), after the completion and
   * its payment.completed: the payment ends refunded (payment.refunded), or completed with amount_refunded.
   * A payment that was pending until now has no refund of ours, so none is matched by our id.
   */
  private async refundsListedWith(payment: Payment, refunds: RefundReport[], source: string): Promise<void> {
    const completed = refunds.filter((r) => r.status === 'completed');
    if (completed.length === 0) return;
    // providerRefund locks (and re-reads) the payment: the completion is written first.
    await this.tx.flush();
    for (const r of completed) {
      await this.providerRefund(payment.id, { providerRefundId: r.providerRefundId, reported: r.amount, ourRefundId: null, raw: r.raw }, source);
    }
  }

  /**
   * A provider's report that `paymentId`, if it is `failed`, was charged (null when it is not failed: nothing
   * is done). See refuseChargeOfFailed.
   */
  async chargedButFailed(paymentId: string, reported: Money | null | undefined, source: string, reference: string | null): Promise<PaymentOutcome | null> {
    const payment = await this.lockPayment(paymentId);
    if (payment.status !== 'failed') return null;
    return this.refuseChargeOfFailed(payment, reported, source, reference);
  }

  /**
   * The provider reports a `failed` payment completed — a verified callback, a confirmed one, a status report,
   * reconciliation, the cancel of a card intent: the customer was charged for a payment the merchant was told
   * failed (an STK query answered 1037, then the customer paid). Terminal statuses never move (decisions.md),
   * so it stays failed and nothing goes to the merchant's webhook; but it is said loudly: the first report
   * from `source` of each charge (the receipt or intent it names) is recorded in the audit as a refused move to completed and counted
   * (payments_integrity_mismatches_total, source `<source>:charged_but_failed`), and every report is logged
   * as an error after the commit. Another amount (or none) is no charge of this payment's: an integrity
   * mismatch, refused and counted as one.
   */
  private async refuseChargeOfFailed(payment: Payment, reported: Money | null | undefined, source: string, reference: string | null): Promise<PaymentOutcome> {
    const mismatch = await this.checkIntegrity(payment, null, amountOf(payment), reported, source, 'completed');
    if (mismatch) return { payment, transitioned: false, mismatch };
    // Once per source and charge: a second charge of the same failed payment (the customer, told it failed,
    // paid again) names another receipt, and each must be refunded, so each is recorded and counted.
    const note = `${CHARGED_BUT_FAILED}${reference ? `: ${reference}` : ''}`;
    const seen = await this.tx.execute<unknown[]>(
      `SELECT 1 FROM payment_transitions WHERE payment_id = ? AND from_status = 'failed' AND to_status = 'completed' AND NOT accepted AND trigger = ? AND note = ? LIMIT 1`,
      [payment.id, source, note],
    );
    const firstReport = seen.length === 0;
    if (firstReport) await this.audit({ paymentId: payment.id, subject: 'payment', from: 'failed', to: 'completed', source, accepted: false, note, expected: amountOf(payment), reported });
    this.chargesOfFailed.push({ provider: payment.provider, merchantId: payment.merchantId, paymentId: payment.id, source, reference, firstReport });
    return { payment, transitioned: false, mismatch: null };
  }

  /**
   * A settled transaction `receipt` that quotes a payment already paid with another receipt (the customer
   * also paid by paybill with its reference): a second charge, which nothing of ours settles or refunds.
   * Nothing changes; the first report of each receipt is recorded in the audit as a refused move (the
   * receipt and its amount in the note) and counted (payments_integrity_mismatches_total, source
   * `<source>:duplicate_charge`); every report is logged as an error after the commit. `payment` is locked
   * and has a receipt other than `receipt`.
   */
  private async duplicateCharge(payment: Payment, receipt: string, reported: Money, source: string): Promise<void> {
    const amount = `${formatMinorUnits(reported.minor, reported.currency.toUpperCase())} ${reported.currency.toUpperCase()}`;
    const prefix = `a second charge ${receipt} `;
    const seen = await this.tx.execute<unknown[]>(
      'SELECT 1 FROM payment_transitions WHERE payment_id = ? AND trigger = ? AND NOT accepted AND starts_with(note, ?) LIMIT 1',
      [payment.id, source, prefix],
    );
    if (seen.length === 0) {
      await this.audit({
        paymentId: payment.id, subject: 'payment', from: payment.status, to: 'completed', source, accepted: false, reported,
        note: `${prefix}(${amount}) quotes this payment, paid with ${payment.receiptNumber}: not applied; refund it at the operator`,
      });
    }
    this.duplicateCharges.push({
      provider: payment.provider, merchantId: payment.merchantId, paymentId: payment.id, source, receipt, paidWith: payment.receiptNumber!, reported: amount, firstReport: seen.length === 0,
    });
  }

  /**
   * A report about a payment that could not be verified and that the provider did not confirm when asked
   * (or could not be asked about): nothing changes; recorded in the audit as a refused move (once per
   * payment and `source`, so forgeries in a burst add one row).
   */
  async unconfirmedReport(paymentId: string, claimed: PaymentStatus, source: string, note: string): Promise<void> {
    const payment = await this.lockPayment(paymentId);
    await this.auditRefusalOnce({ paymentId, subject: 'payment', from: payment.status, to: claimed, source, note }, 'per source');
  }

  /**
   * A provider's report that names one of our refunds by our id while the provider refund it describes is
   * not that refund's (resolve.ts, findOurRefund: a refund made with the merchant's own call carrying our
   * id): nothing changes on our refund; the report is recorded as a refused move (once per source) with `note`.
   */
  async refundReportNotOurs(refundId: string, claimed: RefundStatus, source: string, note: string): Promise<void> {
    const { refund } = await this.lockRefund(refundId);
    await this.auditRefusalOnce({ paymentId: refund.paymentId, refundId, subject: 'refund', from: refund.status, to: claimed, source, note }, 'per source');
  }

  /**
   * A settled transaction of the provider's (reconciliation's pull) that quotes `paymentId` — by its receipt
   * (`byReceipt`), else by the payment's reference — judged on the payment as locked here, never on an
   * earlier read: a callback or another run may have moved it since. Another receipt quoting a payment paid
   * with one is a second charge (duplicateCharge). A completed payment that was confirmed without a receipt
   * (an STK query answer names none) takes this one — only when the transaction is exactly its amount and
   * currency; the receipt becomes its provider reference, as a verified callback's would (later reversals
   * need it). A pending payment is completed by it (the integrity check as always). A failed one of exactly
   * this amount was charged (refuseChargeOfFailed). Anything else changes nothing. Says which it was.
   */
  async settledTransaction(paymentId: string, tx: { receipt: string; amount: Money }, byReceipt: boolean, source: string): Promise<SettledTransactionOutcome> {
    const payment = await this.lockPayment(paymentId);
    if (!byReceipt && payment.receiptNumber && payment.receiptNumber !== tx.receipt) {
      await this.duplicateCharge(payment, tx.receipt, tx.amount, source);
      return { kind: 'duplicate_charge' };
    }
    if (payment.status === 'completed' && !payment.receiptNumber) {
      const mismatch = await this.recordReceipt(payment, tx.receipt, tx.receipt, tx.amount, source);
      return { kind: 'unchanged', receiptRecorded: !mismatch };
    }
    if (payment.status === 'pending') {
      const update: PaymentUpdate = { status: 'completed', reported: tx.amount, providerRef: tx.receipt, receiptNumber: tx.receipt, raw: { reconciled: tx.receipt } };
      const outcome = await this.payment(paymentId, update, source);
      if (outcome.mismatch) return { kind: 'mismatch', mismatch: outcome.mismatch };
      return outcome.transitioned ? { kind: 'completed' } : { kind: 'unchanged', receiptRecorded: false };
    }
    if (payment.status === 'failed' && sameMoney(amountOf(payment), tx.amount)) {
      await this.refuseChargeOfFailed(payment, tx.amount, source, tx.receipt);
      return { kind: 'charged_but_failed' };
    }
    return { kind: 'unchanged', receiptRecorded: false };
  }

  /** A completed payment's receipt (and the provider reference the report gives with it), only for the report of exactly its amount. */
  private async recordReceipt(payment: Payment, receipt: string, providerRef: string | null, reported: Money | null | undefined, source: string): Promise<IntegrityMismatch | null> {
    const mismatch = await this.checkIntegrity(payment, null, amountOf(payment), reported, source, payment.status);
    if (mismatch) return mismatch;
    payment.receiptNumber = receipt;
    if (providerRef) payment.providerRef = providerRef;
    return null;
  }

  /**
   * Applies a report about one of our refunds. A completed refund raises amount_refunded and, at the
   * full amount (or for a reversal), moves the payment too — in this same unit of work. A completed card
   * refund that the provider reports failed lowers it again and tells the merchant (`refund.failed`).
   */
  async refund(refundId: string, update: RefundUpdate, source: string): Promise<RefundOutcome> {
    const { payment, refund } = await this.lockRefund(refundId);
    const from = refund.status;
    // A completed card refund the provider now reports failed (a mobile-money reversal never fails after completing).
    const failsCompleted = from === 'completed' && update.status === 'failed' && !update.reversal;
    if (from === 'failed' && update.status === 'completed') {
      await this.refuseCompletionOfFailed(payment, refund, update, source);
      return { refund, payment, transitioned: false, mismatch: null };
    }
    if ((from !== 'pending' && !failsCompleted) || update.status === 'pending') {
      if (from === 'pending' && update.providerRef) newProviderRef(refund, update.providerRef);
      // Settled before the answer to its request was recorded (a reversal's result that came before its
      // acknowledgement): the answer's reference is recorded now, while the refund has none; never in
      // place of another.
      else if (update.providerRef && !refund.providerRef) refund.providerRef = update.providerRef;
      if (from === 'pending' && update.raw !== undefined) refund.providerResponse = update.raw;
      return { refund, payment, transitioned: false, mismatch: null };
    }
    if (from === 'pending' && update.status === 'failed' && update.reversal && (refund.reversalResends > 0 || update.outcomeUnknown)) {
      await this.keepResentReversalPending(payment, refund, update, source);
      return { refund, payment, transitioned: false, mismatch: null, keptPending: true };
    }
    if (update.status === 'completed' && update.reversal && describesTheCharge(payment, update.transactionReceipt)) {
      await this.refuseReportOfTheCharge(payment, refund, update, source);
      return { refund, payment, transitioned: false, mismatch: null };
    }
    // A move that moves money (the state table says which) needs the provider's amount and currency to equal ours.
    if (refundEdge(from, update.status)?.movesMoney || (update.reported !== undefined && update.reported !== null)) {
      const mismatch = await this.checkIntegrity(payment, refund, { minor: refund.amountMinor, currency: refund.currency }, update.reported, source, update.status);
      if (mismatch) return { refund, payment, transitioned: false, mismatch };
    }
    // A reversal's result names the request it answers: its reference while the refund has recorded none
    // (the acknowledgement not recorded yet, or lost); the result of an earlier request of a reversal
    // sent again does not replace the current request's.
    if (update.providerRef && !(update.reversal && refund.providerRef)) refund.providerRef = update.providerRef;
    if (update.raw !== undefined) refund.providerResponse = update.raw;
    const previous = payment.status;

    if (update.status === 'completed') {
      const target: PaymentStatus | null = update.reversal
        ? 'reversed'
        : payment.amountRefundedMinor + refund.amountMinor >= payment.amountMinor
          ? 'refunded'
          : null;
      const paymentMove = target ? paymentEdge(previous, target) : null;
      // The provider says the money went back, but our books cannot take it (e.g. a refund made at the
      // provider, recorded first, took what our pending refund had reserved; a reversal result for a
      // payment no longer completed). Never `failed`: that would tell the merchant refund.failed and free
      // the amount to be refunded again. The refund stays pending, the report is refused and said loudly.
      const cannotApply =
        target && !paymentMove
          ? `the payment is ${previous}; it cannot be ${target}`
          : payment.amountRefundedMinor + refund.amountMinor > payment.amountMinor
            ? 'it exceeds what remains of the payment'
            : null;
      if (cannotApply) {
        await this.refuseCompletionThatDoesNotFit(payment, refund, update, source, cannotApply);
        return { refund, payment, transitioned: false, mismatch: null };
      }
      const refundMove = await this.move({ kind: 'refund', row: refund, payment }, 'completed', source, 'provider');
      if (!refundMove) return { refund, payment, transitioned: false, mismatch: null };
      payment.amountRefundedMinor = update.reversal ? payment.amountMinor : payment.amountRefundedMinor + refund.amountMinor;
      const moved = target ? await this.move({ kind: 'payment', row: payment }, target, source, 'refund', refund.id) : null;
      await this.emit(payment, moved?.event ?? refundMove.event, {
        ...eventData(payment, previous),
        refund_id: refund.id,
        amount_refunded: formatMinorUnits(payment.amountRefundedMinor, payment.currency),
      });
      return { refund, payment, transitioned: true, mismatch: null };
    }

    refund.failureReason = update.failureReason ?? (failsCompleted ? 'failed at the provider after it completed' : 'refused by the provider');
    const failed = await this.move({ kind: 'refund', row: refund, payment }, update.status, source, 'provider');
    if (!failed) return { refund, payment, transitioned: false, mismatch: null };
    // The money came back to the merchant: it no longer counts as refunded. The payment's status does not
    // move back (a `refunded` payment stays so: terminal statuses never move).
    if (failsCompleted) payment.amountRefundedMinor = payment.amountRefundedMinor > refund.amountMinor ? payment.amountRefundedMinor - refund.amountMinor : 0n;
    await this.emit(payment, failed.event, {
      ...eventData(payment, previous),
      refund_id: refund.id,
      amount_refunded: formatMinorUnits(payment.amountRefundedMinor, payment.currency),
      failure_reason: refund.failureReason ?? undefined,
    });
    return { refund, payment, transitioned: true, mismatch: null };
  }

  /**
   * An operator who checked a refund left pending at the provider (a reversal refused after it was sent
   * again, which only a success settles) fails it: `reason` becomes its failure_reason, the move is
   * audited with `source`, the merchant gets `refund.failed`, and the payment stays as it is (a new
   * refund may be asked). Null when the refund is not pending (nothing changes).
   */
  async failPendingRefund(refundId: string, reason: string, source: string): Promise<RefundOutcome | null> {
    const { refund } = await this.lockRefund(refundId);
    if (refund.status !== 'pending') return null;
    // Only a reversal sent again is left for an operator (a refusal no longer settles it). Any other pending
    // refund is settled by its provider's answer, its event or the refund sync: failing it here would free
    // the amount while the provider may still complete it (a completion of a failed refund is refused), and
    // the merchant could refund twice.
    if (refund.reversalResends === 0) {
      throw new DomainError(
        'CONFLICT',
        `refund ${refundId} was never sent again: its provider's answer, its event or the refund sync settles it (refund recheck), not an operator`,
      );
    }
    // Not a provider's report of a reversal (no `reversal`): the guard that keeps a resent reversal pending does not apply.
    return this.refund(refundId, { status: 'failed', failureReason: reason }, source);
  }

  /**
   * An operator's settlement of a pending payment the service can no longer settle (admin `payment settle`):
   * fails it with the operator's `reason` (payment.failed), under the payment's lock. Null when it is not
   * pending; `refusal` (read under the lock) says why another pending payment is not the operator's (a
   * CONFLICT, nothing changes).
   */
  async failLostPayment(paymentId: string, reason: string, source: string, refusal: (payment: Payment) => string | null): Promise<PaymentOutcome | null> {
    const payment = await this.lockPayment(paymentId);
    if (payment.status !== 'pending') return null;
    const refused = refusal(payment);
    if (refused) throw new DomainError('CONFLICT', refused);
    return this.payment(paymentId, { status: 'failed', failureReason: reason }, source);
  }

  /**
   * A refusal or queue timeout of a mobilemoney reversal sent again (reversalResends > 0: RefundService.sendAgain),
   * of any of its requests: it says nothing about the others — the first may have returned the money
   * while a repeat is refused (2001, 8006, 21, 1, a queue timeout), and a refusal of the first may arrive
   * after a repeat that succeeds was sent. Failing the refund would tell the merchant refund.failed while
   * the money went back (and a second refund could follow). Only a success ("0" or "already reversed",
   * or a report of the reversal) settles such a refund; this is recorded as a refused move with the
   * provider's words (payment_transitions), the caller logs it, and the refund stays pending
   * (refunds_pending_oldest_seconds alerts). A queue timeout of any reversal, sent again or not
   * (`outcomeUnknown`), is kept pending the same way: it is no final outcome.
   */
  private async keepResentReversalPending(payment: Payment, refund: Refund, update: RefundUpdate, source: string): Promise<void> {
    await this.audit({
      paymentId: payment.id,
      refundId: refund.id,
      subject: 'refund',
      from: 'pending',
      to: 'failed',
      source,
      accepted: false,
      note:
        `${update.failureReason ?? 'refused by the provider'}${update.request ? ` (request ${update.request})` : ''}: ` +
        (update.outcomeUnknown
          ? 'not applied; no final outcome (the operator may still carry the request out): its result, or a status report the refund sync asks for, settles the refund'
          : `not applied; the reversal was sent again (${refund.reversalResends} repeat${refund.reversalResends === 1 ? '' : 's'}) and another of its requests may have reversed the payment, so only a success settles it`),
    });
  }

  /**
   * A report of a completed reversal whose transaction is the payment's own charge (its receipt): the
   * operator reported the original payment, whose amount is the reversal's, not a reversal of it. Nothing
   * changes; recorded as a refused move (payment_transitions, the receipt in its note) and logged at warn
   * after the commit. The refund stays pending for its result or the refund sync's next report.
   */
  private async refuseReportOfTheCharge(payment: Payment, refund: Refund, update: RefundUpdate, source: string): Promise<void> {
    const receipt = update.transactionReceipt!;
    await this.audit({
      paymentId: payment.id,
      refundId: refund.id,
      subject: 'refund',
      from: 'pending',
      to: 'completed',
      source,
      accepted: false,
      note: `the report describes transaction ${receipt}, the payment's own charge, not its reversal: not applied; the refund stays pending`,
      expected: { minor: refund.amountMinor, currency: refund.currency },
      reported: update.reported ?? null,
    });
    this.reportsOfTheCharge.push({ provider: payment.provider, source, paymentId: payment.id, refundId: refund.id, receipt });
  }

  /**
   * The provider says a refund we hold as `failed` completed: money went back to the customer while the
   * merchant was told it did not (refund.failed) and amount_refunded leaves it out. Terminal statuses
   * never move (a failed refund may have been asked for again), so nothing changes; the report is
   * recorded as a refused move (payment_transitions, accepted = false, the provider's refund and amount
   * in its note) and logged as an error after the commit, once per refund — the provider lists a charge's
   * refunds on each of its refund events, and the same report again adds nothing.
   */
  private async refuseCompletionOfFailed(payment: Payment, refund: Refund, update: RefundUpdate, source: string): Promise<void> {
    const providerRefundId = update.providerRef ?? refund.providerRef ?? null;
    const reported = update.reported ? `${formatMinorUnits(update.reported.minor, update.reported.currency.toUpperCase())} ${update.reported.currency.toUpperCase()}` : 'no amount';
    const recorded = await this.auditRefusalOnce({
      paymentId: payment.id,
      refundId: refund.id,
      subject: 'refund',
      from: 'failed',
      to: 'completed',
      source,
      note:
        `the provider reports refund ${providerRefundId ?? '(no reference)'} completed (${reported}) while it is failed here` +
        `${refund.failureReason ? ` (${refund.failureReason})` : ''}: not applied; check it with the provider and settle it by hand`,
      expected: { minor: refund.amountMinor, currency: refund.currency },
      reported: update.reported ?? null,
    }, 'ever');
    if (!recorded) return;
    this.completedAfterFailed.push({ provider: payment.provider, source, paymentId: payment.id, refundId: refund.id, providerRefundId, reported });
  }

  /**
   * The provider confirms one of our `pending` refunds completed (its amount and currency checked) while
   * the payment can no longer take it: `why` — it is no longer `completed` (refunded or reversed by a
   * refund recorded first), or the refund exceeds what is left of it (amount_refunded already counts
   * money a provider-side refund gave back). The money went back to the customer, so the refund must not
   * become `failed` (refund.failed, the amount refundable again: a merchant refunding by other means would
   * refund twice), and it cannot become `completed` (amount_refunded would exceed the payment). Nothing
   * changes: the refund stays pending (its amount stays reserved); the report is recorded as a refused
   * `pending` → `completed` (payment_transitions, accepted = false, the provider's refund, its amount, the
   * payment's amounts), counted in payments_integrity_mismatches_total (`<source>:refund_does_not_fit`)
   * and logged at error after the commit — once per refund, however often the provider or the refund
   * sync repeats it. The operator settles it with the provider's records (README "How a payment moves").
   */
  private async refuseCompletionThatDoesNotFit(payment: Payment, refund: Refund, update: RefundUpdate, source: string, why: string): Promise<void> {
    const providerRefundId = update.providerRef ?? refund.providerRef ?? null;
    const money = (minor: bigint) => `${formatMinorUnits(minor, payment.currency)} ${payment.currency}`;
    const seen = await this.tx.execute<unknown[]>(
      "SELECT 1 FROM payment_transitions WHERE refund_id = ? AND subject = 'refund' AND from_status = 'pending' AND to_status = 'completed' AND NOT accepted AND starts_with(note, ?) LIMIT 1",
      [refund.id, REFUND_DOES_NOT_FIT],
    );
    if (seen.length > 0) return;
    await this.audit({
      paymentId: payment.id,
      refundId: refund.id,
      subject: 'refund',
      from: 'pending',
      to: 'completed',
      source,
      accepted: false,
      note:
        `${REFUND_DOES_NOT_FIT}: the provider reports refund ${providerRefundId ?? '(no reference)'} of ${money(refund.amountMinor)} completed, but ${why} ` +
        `(payment ${payment.status}, ${money(payment.amountMinor)}, ${money(payment.amountRefundedMinor)} refunded): not applied; the refund stays pending — check the payment's refunds with the provider and settle it by hand`,
      expected: { minor: refund.amountMinor, currency: refund.currency },
      reported: update.reported ?? null,
    });
    this.completionsThatDoNotFit.push({
      provider: payment.provider,
      source,
      paymentId: payment.id,
      refundId: refund.id,
      providerRefundId,
      why,
      paymentStatus: payment.status,
      amountMinor: payment.amountMinor.toString(),
      amountRefundedMinor: payment.amountRefundedMinor.toString(),
      refundAmountMinor: refund.amountMinor.toString(),
      currency: payment.currency,
    });
  }

  /**
   * A completed refund a provider reports (callback). Ours — matched by our id, which every provider
   * reporting refunds this way echoes (cardpay metadata.refund_id, walletpay custom_id), or by its
   * provider ref — is completed through `refund`. One without either was made at the provider directly
   * (its dashboard) and is recorded as a new refund, completed the same way, when its currency is the
   * payment's and it fits in what remains; one that does not is an integrity mismatch (nothing changes). Never matched by amount: a dashboard refund that happens to
   * equal a pending refund of ours is not ours, and taking it for ours would both mislabel it and leave
   * our refund's own completion nothing to apply to. A refund of a payment still `pending` here throws
   * (409): the caller must not consume the report (see InboundPipeline.settleBeforeRefunds).
   */
  async providerRefund(paymentId: string, report: ReportedRefund, source: string): Promise<RefundOutcome | null> {
    const payment = await this.lockPayment(paymentId);
    const known =
      (report.ourRefundId && UUID.test(report.ourRefundId) ? await this.tx.findOne(RefundSchema, { id: report.ourRefundId, paymentId }) : null) ??
      (await this.tx.findOne(RefundSchema, { paymentId, providerRef: report.providerRefundId }));
    if (known) {
      return this.refund(known.id, { status: 'completed', reported: report.reported, providerRef: report.providerRefundId, raw: report.raw }, source);
    }
    if (payment.status === 'pending') {
      // Refunded before we saw it paid (the provider's events come in any order). Recorded as "not
      // applicable" it would be lost for good once the payment completes; so the whole unit of work is
      // refused, the notification is not stored, and the provider sends it again (any non-2xx).
      throw new DomainError('CONFLICT', `payment ${paymentId} is not completed here yet; its refund ${report.providerRefundId} is applied once it is: send the notification again later`);
    }
    const reported = report.reported;
    if (reported && reported.currency.toUpperCase() !== payment.currency) {
      // A refund made at the provider defines its own amount; its currency must still be the payment's.
      await this.checkIntegrity(payment, null, { minor: reported.minor, currency: payment.currency }, reported, source, 'refunded');
      return null;
    }
    const refundable = payment.status === 'completed' ? payment.amountMinor - payment.amountRefundedMinor : 0n;
    if (!reported || payment.status !== 'completed' || reported.minor > refundable) {
      // One provider refund is reported by several events (cardpay: charge.refunded, refund.created,
      // refund.updated): recorded, counted and shown once, whichever told first.
      const notApplicable = `provider refund ${report.providerRefundId} not applicable`;
      const told = await this.tx.execute<unknown[]>(
        "SELECT 1 FROM payment_transitions WHERE payment_id = ? AND NOT accepted AND to_status = 'refunded' AND starts_with(note, ?) LIMIT 1",
        [paymentId, notApplicable],
      );
      if (told.length > 0) return null;
      if (reported && payment.status === 'failed' && reported.minor <= payment.amountMinor && (await this.wasChargedWhileFailed(paymentId))) {
        // What the service asked for when it found the charge (refuseChargeOfFailed: "refund it at the
        // provider"): the charge given back. Recorded; no mismatch, nothing changes (the payment stays failed).
        await this.audit({ paymentId, subject: 'payment', from: payment.status, to: 'refunded', source, accepted: false, reported, note: `${notApplicable}: it gives back a charge of this failed payment (${CHARGED_BUT_FAILED})` });
        return null;
      }
      // Money went back at the provider (a dashboard refund, a reversal or chargeback) that our books cannot
      // take: no amount, a payment not completed here (already refunded, failed), or more than is left. No
      // money field changes; it is an integrity mismatch (expected: what is left to refund), logged,
      // counted and shown on the payment. A refund we hold already, reported again, was matched above.
      const why = !reported ? 'no amount' : payment.status !== 'completed' ? `the payment is ${payment.status}` : 'more than is left to refund';
      await this.audit({ paymentId, subject: 'payment', from: payment.status, to: 'refunded', source, accepted: false, note: `${notApplicable} (${why})` });
      await this.checkIntegrity(payment, null, { minor: refundable, currency: payment.currency }, reported, source, 'refunded');
      return null;
    }
    const refund = this.tx.create(RefundSchema, {
      id: randomUUID(),
      paymentId,
      merchantId: payment.merchantId,
      status: 'pending',
      amountMinor: reported.minor,
      currency: payment.currency,
      providerRef: report.providerRefundId,
      providerResponse: report.raw,
    });
    await this.tx.flush();
    return this.refund(refund.id, { status: 'completed', reported, providerRef: report.providerRefundId, raw: report.raw }, source);
  }

  /**
   * THE status write: the only place a payment's or a refund's status changes. Refused unless the
   * table has the edge (and, for payments, the edge is reached the way the table says); every attempt
   * is audited.
   */
  private async move(subject: Subject, to: PaymentStatus | RefundStatus, source: string, via: PaymentEdge['via'], refundId?: string) {
    const paymentId = subject.kind === 'payment' ? subject.row.id : subject.payment.id;
    const from = subject.row.status;
    const found = subject.kind === 'payment' ? paymentEdge(subject.row.status, to as PaymentStatus) : refundEdge(subject.row.status, to as RefundStatus);
    const edge = found && (!('via' in found) || found.via === via) ? found : null;
    const audit = { paymentId, refundId: subject.kind === 'refund' ? subject.row.id : refundId, subject: subject.kind, from, to, source };
    if (!edge) {
      await this.audit({ ...audit, accepted: false, note: 'refused by the state machine' });
      return null;
    }
    subject.row.status = to as never;
    await this.audit({ ...audit, accepted: true });
    return edge;
  }

  /** Compares a report with what we expect; on a mismatch records it everywhere and returns it. */
  private async checkIntegrity(
    payment: Payment, refund: Refund | null, expected: Money, reported: Money | null | undefined, source: string, to: string, issue?: string | null,
  ): Promise<IntegrityMismatch | null> {
    if (sameMoney(expected, reported) && !issue) return null;
    const mismatch: IntegrityMismatch = {
      source,
      ...(refund ? { refund_id: refund.id } : {}),
      ...(issue ? { issue } : {}),
      expected_amount_minor: expected.minor.toString(),
      expected_currency: expected.currency,
      reported_amount_minor: reported ? reported.minor.toString() : null,
      reported_currency: reported ? reported.currency.toUpperCase() : null,
      at: new Date().toISOString(),
    };
    const seen = payment.integrityMismatches.some(
      (m) =>
        m.source === source && m.refund_id === mismatch.refund_id && m.reported_amount_minor === mismatch.reported_amount_minor && m.reported_currency === mismatch.reported_currency &&
        m.issue === mismatch.issue,
    );
    if (seen) return mismatch; // the same report again (a retried sync, a re-run reconciliation): recorded once
    payment.integrityMismatches = [...payment.integrityMismatches, mismatch];
    const what = reported ? `${reported.minor} ${reported.currency.toUpperCase()}` : 'no amount';
    await this.audit({
      paymentId: payment.id,
      refundId: refund?.id,
      subject: refund ? 'refund' : 'payment',
      from: refund ? refund.status : payment.status,
      to,
      source,
      accepted: false,
      note: `integrity: the provider reported ${what}, expected ${expected.minor} ${expected.currency}${issue ? `; ${issue}` : ''}`,
      expected,
      reported: reported ?? null,
    });
    this.refused.push({ provider: payment.provider, source, paymentId: payment.id, mismatch });
    return mismatch;
  }

  /** Locks a refund's payment, then the refund (the order every writer of a refund takes), and reads both as locked. */
  private async lockRefund(refundId: string): Promise<{ payment: Payment; refund: Refund }> {
    const unlocked = await this.tx.findOneOrFail(RefundSchema, { id: refundId });
    const payment = await this.lockPayment(unlocked.paymentId);
    const refund = await this.tx.findOneOrFail(RefundSchema, { id: refundId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
    return { payment, refund };
  }

  private async lockPayment(paymentId: string): Promise<Payment> {
    return this.tx.findOneOrFail(PaymentSchema, { id: paymentId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
  }

  private async emit(payment: Payment, type: PaymentEventType, data: MerchantEventData): Promise<void> {
    const appended = await appendEvent(this.tx, { merchantId: payment.merchantId, paymentId: payment.id, type, data });
    if (appended.deliveryId) this.deliveryIds.push(appended.deliveryId);
  }

  /**
   * Records a refused move (accepted = false) unless the same one is in the audit already — for the same
   * refund (or payment, when the move is the payment's), from any source (`ever`) or from this `source`
   * only (`per source`) — so a report the provider repeats adds nothing. Whether it was recorded now.
   */
  /** Whether a charge of this failed payment was reported (refuseChargeOfFailed). */
  private async wasChargedWhileFailed(paymentId: string): Promise<boolean> {
    const rows = await this.tx.execute<unknown[]>(
      "SELECT 1 FROM payment_transitions WHERE payment_id = ? AND from_status = 'failed' AND to_status = 'completed' AND NOT accepted AND starts_with(note, ?) LIMIT 1",
      [paymentId, CHARGED_BUT_FAILED],
    );
    return rows.length > 0;
  }

  private async auditRefusalOnce(row: Omit<AuditRow, 'accepted'>, once: 'ever' | 'per source'): Promise<boolean> {
    const [column, id] = row.refundId ? ['refund_id', row.refundId] : ['payment_id', row.paymentId];
    const seen = await this.tx.execute<unknown[]>(
      `SELECT 1 FROM payment_transitions WHERE ${column} = ? AND subject = ? AND from_status IS NOT DISTINCT FROM ? AND to_status = ? AND NOT accepted
       ${once === 'per source' ? 'AND trigger = ?' : ''} LIMIT 1`,
      [id, row.subject, row.from, row.to, ...(once === 'per source' ? [row.source] : [])],
    );
    if (seen.length > 0) return false;
    await this.audit({ ...row, accepted: false });
    return true;
  }

  private async audit(row: AuditRow): Promise<void> {
    await this.tx.execute(
      `INSERT INTO payment_transitions (payment_id, refund_id, subject, from_status, to_status, trigger, accepted, note,
         expected_amount_minor, expected_currency, reported_amount_minor, reported_currency)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        row.paymentId, row.refundId ?? null, row.subject, row.from, row.to, row.source, row.accepted, row.note ?? null,
        row.expected?.minor.toString() ?? null, row.expected?.currency ?? null, row.reported?.minor.toString() ?? null, row.reported?.currency.toUpperCase() ?? null,
      ],
      'run',
    );
  }
}

/** One row of the audit (payment_transitions). */
interface AuditRow {
  paymentId: string;
  refundId?: string;
  subject: Subject['kind'];
  from: string | null;
  to: string;
  source: string;
  accepted: boolean;
  note?: string;
  expected?: Money;
  reported?: Money | null;
}
