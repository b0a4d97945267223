import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { AppConfig } from '../../config/config.js';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, RefundSchema, type Payment, type Refund, type RefundStatus } from '../../persistence/entities/index.js';
import { ProviderError, type ProviderRefundResult, type CredentialsIssue } from '../ports.js';
import { createdWindow } from '../created-window.js';
import { DomainError, afterProviderMayHaveActed, conflict, notFound } from '../errors.js';
import { formatMinorUnits, toMinorUnits } from '../money/money.js';
import { hashRequest, type IdempotencyKeys } from '../payments/idempotency-keys.js';
import { assertCredentialsConfigured } from '../merchants/credentials.service.js';
import { cannotSendWith } from '../payments/credentials-issue.js';
import type { ProviderGateway } from '../payments/provider-gateway.js';
import { paymentLookup } from '../payments/payment.service.js';
import { sortKeys } from '../payments/payment-request.js';
import { firstCheckAfterMs } from '../payments/sync-schedule.js';
import type { StatusWriter, UnitOfWork } from '../payments/status-writer.js';

/** A provider that did not answer whether it has a refund (RefundService.lookUp). */
const UNANSWERED = Symbol('unanswered');

/** What a merchant asks to refund (POST /v1/refunds). */
export interface RefundRequest {
  paymentId: string;
  /** Omitted: what remains of the payment. As sent (a string or a JSON number), checked against the currency. */
  amount?: string | number;
  metadata?: Record<string, string>;
}

export interface RefundListFilter {
  paymentId?: string;
  status?: RefundStatus;
  /** ISO 8601 instants: created after `since`, before `until` (both exclusive). */
  since?: string;
  until?: string;
}

/**
 * A request of a refund and the record of its answer (RefundService.sendAgain): the refund as it is then,
 * and the provider's failure that left it pending (a timeout, an outage, a rate limit, a repeated reversal
 * refused), which the refund sync reads as it reads a failed check (sync-schedule.ts outcomeOf: backing off
 * an account that rate-limits us, a provider that is down); null when the provider answered.
 */
export interface RefundRequested {
  refund: Refund;
  keptPendingBy: ProviderError | null;
}

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
    private readonly writer: StatusWriter,
    private readonly idempotency: IdempotencyKeys,
    private readonly logger: Logger,
  ) {}

  /**
   * Reserves the refund as `pending`, asks the provider, records its answer. With an Idempotency-Key the
   * reservation is the key's claim (idempotency-keys.ts): a retry replays the first answer, and a retry
   * after a crash resumes with the same refund id, so the provider sees the same idempotency key.
   * A provider that does not answer is no error: the refund is answered `pending` (201), as a payment
   * creation is (decisions.md), for the provider's event or the refund sync to settle; only a provider's
   * refusal is 502 with the refund `failed`. An answer of 502 would read as "nothing happened", and a
   * merchant asking again with a new key could refund twice.
   */
  async create(merchantId: string, asked: RefundRequest, idempotencyKey?: string): Promise<{ refund: Refund; replayed: boolean }> {
    const { paymentId, amount, metadata } = asked;
    const payment = await this.em.fork().findOne(PaymentSchema, { id: paymentId, merchantId }, { fields: ['provider', 'currency'] });
    // The credentials are opened before anything is written: a process that cannot open them (a key
    // missing from its configuration) answers 503 "nothing was sent, retry" truthfully, with no pending
    // refund left behind for the refund sync to send — a retry would otherwise refund twice. Whether they
    // can refund at all is asked then too, outside the reservation's transaction; the reservation answers it.
    const credentialsIssue = payment ? await this.gateway.refundCredentialsIssue(merchantId, payment.provider) : null;
    if (idempotencyKey === undefined) {
      const refund = await this.writer.commit((uow) => this.reserve(uow, merchantId, asked, credentialsIssue));
      return { refund: await this.carryOut(refund.id, false), replayed: false };
    }
    // Metadata joins the hash only when given, so a request without it hashes as before it existed.
    // The payment id is hashed in lower case: the contract takes a UUID in either case (one payment), so
    // a retry that spells it otherwise is the same request.
    const hashed = {
      payment_id: paymentId.toLowerCase(),
      amount: amount === undefined ? undefined : amountAsHashed(payment?.currency ?? null, amount),
      metadata: metadata && Object.keys(metadata).length > 0 ? JSON.stringify(sortKeys(metadata)) : undefined,
    };
    // Keys earlier releases stored still match: before 2026-11-27 the amount was hashed as sent, and
    // before 2026-11-28 the payment id was.
    const formerHashes = new Set<string>();
    for (const id of new Set([hashed.payment_id, paymentId])) {
      formerHashes.add(hashRequest({ ...hashed, payment_id: id }));
      if (amount !== undefined) formerHashes.add(hashRequest({ ...hashed, payment_id: id, amount: String(amount) }));
    }
    const requestHash = hashRequest(hashed);
    formerHashes.delete(requestHash);
    const request = { scope: 'refund.create' as const, merchantId, key: idempotencyKey, requestHash, formerHashes: [...formerHashes] };
    const { value, replayed } = await this.idempotency.run(request, 201, {
      reserve: async (uow) => (await this.reserve(uow, merchantId, asked, credentialsIssue)).id,
      act: (refundId, resumed) => this.carryOut(refundId, resumed),
      load: (refundId) => this.em.fork().findOneOrFail(RefundSchema, { id: refundId }),
      // (Keys stored when an unanswered refund was 502, kept until it settled:) the refund as it is now answers.
      settled: () => true,
    });
    return { refund: value, replayed };
  }

  /**
   * The request of a reserved refund, or its resumption (`resumed`: a dead request's Idempotency-Key taken
   * over), and the record of its answer. Reserved, the refund is the refund sync's to send if this request
   * does not, and the provider may have refunded already: a failure of ours here (no connection free to
   * record the answer) is an unknown outcome (afterProviderMayHaveActed), never the 503 "nothing was done".
   */
  private async carryOut(refundId: string, resumed: boolean): Promise<Refund> {
    try {
      if (!resumed) return await this.send(refundId, 'refund');
      const refund = await this.em.fork().findOneOrFail(RefundSchema, { id: refundId });
      // A resumed refund the provider already answered (or acknowledged) is not sent again.
      if (refund.status !== 'pending' || refund.providerRef) return refund;
      // Asked for before it is sent again, as the refund sync does: the provider may keep an idempotency
      // key for less time than this key lives (Stripe 24 h; PayPal documents 45 days for a capture's
      // refund, Payments v2), and a repeat it no longer recognises would be a second refund.
      const found = await this.lookUp(refund);
      if (found === UNANSWERED) return refund;
      if (found) return await this.settle(refund.id, found, 'refund');
      // Not sent: settled meanwhile, or sent again by the refund sync; the refund as it is now answers.
      return (await this.sendAgain(refund, 'refund'))?.refund ?? (await this.em.fork().findOneOrFail(RefundSchema, { id: refundId }));
    } catch (err) {
      throw afterProviderMayHaveActed(err);
    }
  }

  /**
   * The provider's record of a refund request (null: none; undefined: it cannot be asked). UNANSWERED:
   * the provider did not answer, so whether it was made is unknown; the refund stays pending for the sync.
   */
  private async lookUp(refund: Refund): Promise<ProviderRefundResult | null | undefined | typeof UNANSWERED> {
    const payment = await this.em.fork().findOneOrFail(PaymentSchema, { id: refund.paymentId });
    try {
      return await this.gateway.findRefund(payment, { refundId: refund.id, providerRef: null, payment: paymentLookup(payment) });
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      this.logger.warn({ refundId: refund.id, provider: payment.provider, err: { message: err.message } }, 'resumed refund: the provider could not be asked whether it was made; left pending for the refund sync');
      return UNANSWERED;
    }
  }

  /**
   * The first request of a reserved refund (no earlier request for it can have reached the provider) and
   * the record of its answer: the refund as it is then — still `pending` when the outcome is unknown.
   * Throws only for a refusal, after failing the refund.
   */
  async send(refundId: string, source = 'refund'): Promise<Refund> {
    const refund = await this.em.fork().findOneOrFail(RefundSchema, { id: refundId });
    const payment = await this.em.fork().findOneOrFail(PaymentSchema, { id: refund.paymentId });
    return (await this.request(refund, payment, source, true)).refund;
  }

  /**
   * A repeat of a refund's request — the refund sync's, or a resumed Idempotency-Key's — decided on the
   * refund as the caller read it (`asRead`). A reversal (a provider without partial refunds: no
   * idempotency key, and an earlier request may have been carried out, its acknowledgement or its result
   * lost) is first claimed in the refund's row, in its own statement (no transaction held across the
   * provider call): its repeats counted (reversal_resends), from which on only a success settles it
   * (UnitOfWork.refund) — a refusal of this request says nothing about an earlier one that may have
   * returned the money. It is sent only if still pending and as read, so a refund settled meanwhile, or
   * sent again by another worker, is not sent (null). Other providers repeat with the same idempotency key.
   * A repeat is never refused for being rate limited: see request.
   */
  async sendAgain(asRead: Refund, source: string): Promise<RefundRequested | null> {
    const payment = await this.em.fork().findOneOrFail(PaymentSchema, { id: asRead.paymentId });
    if (!this.gateway.port(payment.provider).capabilities.partialRefunds) {
      const claimed = await this.em.getConnection().execute<{ id: string }[]>(
        `UPDATE refunds SET reversal_resends = reversal_resends + 1, report_checks = 0
          WHERE id = ? AND status = 'pending' AND provider_ref IS NOT DISTINCT FROM ? AND reversal_resends = ? RETURNING id`,
        [asRead.id, asRead.providerRef ?? null, asRead.reversalResends],
      );
      if (claimed.length === 0) return null;
    }
    const refund = await this.em.fork().findOneOrFail(RefundSchema, { id: asRead.id });
    return this.request(refund, payment, source, false);
  }

  /**
   * The provider call (idempotency key derived from the refund's id) and the record of its answer.
   * `firstAttempt`: no earlier request for this refund can have reached the provider.
   */
  private async request(refund: Refund, payment: Payment, source: string, firstAttempt: boolean): Promise<RefundRequested> {
    let result: ProviderRefundResult;
    try {
      result = await this.gateway.refund(payment, {
        refundId: refund.id,
        payment: { ...paymentLookup(payment), amount: { minor: payment.amountMinor, currency: payment.currency }, receiptNumber: payment.receiptNumber ?? null },
        // The refund's own amount, also for a full refund: a provider left to refund "what remains" would
        // refund less than we reserved when a refund made elsewhere has not reached us yet, and a resumed
        // request repeats the first one's parameters exactly (as a repeated idempotency key must).
        amount: { minor: refund.amountMinor, currency: refund.currency },
        idempotencyKey: `refund-${refund.id}`,
      });
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      const fullOnly = !this.gateway.port(payment.provider).capabilities.partialRefunds;
      if (err.kind === 'unavailable' && fullOnly && firstAttempt) {
        // A reversal whose only request never reached the operator (its token or certificate could not be
        // had): nothing was sent, so it fails now and the merchant may ask again (reversals are one at a
        // time). Not so for a repeat (the sync's, a resumed one): the first request may have been accepted.
        const kept = await this.refuse(refund, `not sent: ${err.message}`, source, fullOnly);
        if (kept) return { refund: kept, keptPendingBy: null };
        throw new DomainError('PROVIDER_ERROR', `${payment.provider} could not be reached; the reversal was not sent: ${err.message}`);
      }
      if (err.kind === 'indeterminate' || err.kind === 'unavailable') {
        // Outcome unknown: the refund stays pending (the answer); the provider's refund event or the refund sync settles it.
        this.logger.warn({ refundId: refund.id, provider: payment.provider, source, err: { message: err.message } }, 'the provider did not answer the refund request; the refund stays pending');
        return this.keptPending(refund.id, err);
      }
      if (err.kind === 'rate_limited' && !firstAttempt) {
        // A repeat (the refund sync's, a resumed request's) the provider turned away for now, before acting:
        // the merchant was answered pending, and a refusal to take the request now is no refusal of the
        // refund. It stays pending; the refund sync backs off the account (CheckOutcome) and sends it again
        // at its next check. Only the merchant's own first request, rate limited, fails (502: nothing happened).
        this.logger.warn({ refundId: refund.id, provider: payment.provider, source, err: { message: err.message } }, 'the provider rate-limited the repeated refund request; the refund stays pending');
        return this.keptPending(refund.id, err);
      }
      if (fullOnly && !firstAttempt) {
        // A reversal sent again (the refund sync's, a resumed one) after the first request's answer was lost.
        // A reversal request has no idempotency key: the operator refusing the repeat (rate limited, a token
        // refused, the request refused) says nothing about the first, which it may have accepted and whose
        // result is on its way. Outcome unknown: the refund stays pending; its result settles it, or the sync asks again.
        this.logger.warn(
          { refundId: refund.id, provider: payment.provider, source, err: { message: err.message } },
          'the provider refused the repeated reversal request; the first may have been accepted, so the refund stays pending',
        );
        return this.keptPending(refund.id, err);
      }
      const kept = await this.refuse(refund, err.message, source, fullOnly);
      if (kept) return { refund: kept, keptPendingBy: null };
      throw new DomainError('PROVIDER_ERROR', `${payment.provider} refused the refund: ${err.message}`);
    }
    return { refund: await this.settle(refund.id, result, source), keptPendingBy: null };
  }

  /**
   * Records a synchronous refusal of a refund's request: the refund fails — unless it is a reversal
   * (`fullOnly`) that the refund sync sent again while this request was in flight (reversal_resends > 0,
   * read by the status writer under the refund's lock): a repeat may return the money, so the refusal is
   * recorded, not applied (UnitOfWork.refund), and the refund, still pending, is returned (201 pending).
   * Null when it failed: the caller answers the refusal.
   */
  private async refuse(refund: Refund, reason: string, source: string, fullOnly: boolean): Promise<Refund | null> {
    const outcome = await this.writer.applyRefund(
      refund.id,
      { status: 'failed', providerRef: null, failureReason: reason, raw: { error: reason }, reversal: fullOnly },
      source,
    );
    if (!outcome.keptPending) return null;
    this.logger.warn(
      { refundId: refund.id, source, refusal: reason },
      'the reversal request was refused, but the refund sync sent it again meanwhile and the repeat may reverse the payment: the refund stays pending (only a success settles it)',
    );
    return outcome.refund;
  }

  /** A request whose failure left the refund pending: the refund as it now is, and that failure (RefundRequested). */
  private async keptPending(refundId: string, err: ProviderError): Promise<RefundRequested> {
    return { refund: await this.em.fork().findOneOrFail(RefundSchema, { id: refundId }), keptPendingBy: err };
  }

  /**
   * Checks the refund is allowed and writes it as `pending`, in `uow` under the payment's row lock.
   * `credentialsIssue`: why the merchant's credentials cannot refund (read before the transaction).
   */
  private async reserve(uow: UnitOfWork, merchantId: string, { paymentId, amount, metadata }: RefundRequest, credentialsIssue: CredentialsIssue | null): Promise<Refund> {
    const tx = uow.tx;
    const payment = await tx.findOne(PaymentSchema, { id: paymentId, merchantId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (!payment) throw notFound('payment');
    // Before anything is written: a refund the provider cannot be asked for is the merchant's 422, not a failed refund.
    await assertCredentialsConfigured(tx, merchantId, payment.provider);
    // Nothing written or sent: 422 naming the field the merchant did not store, or 503 for our own configuration (cannotSendWith).
    if (credentialsIssue) throw cannotSendWith(this.logger, credentialsIssue, { merchantId, provider: payment.provider, what: 'refunds', nothingMade: 'no refund was made' });
    if (payment.status !== 'completed') throw conflict(`payment is ${payment.status}; only a completed payment can be refunded`);
    if (!payment.providerRef) throw conflict('payment has no provider reference to refund');
    const notYet = this.gateway.port(payment.provider).refundConflict?.({ providerRef: payment.providerRef, receiptNumber: payment.receiptNumber ?? null });
    if (notYet) throw conflict(`payment cannot be refunded yet: ${notYet}`);
    const pending = await tx.find(RefundSchema, { paymentId, status: 'pending' });
    const fullOnly = !this.gateway.port(payment.provider).capabilities.partialRefunds;
    // Full-only refunds are reversals, one at a time (decisions.md: 409 while one is pending) — also one
    // whose request was never acknowledged: the operator may have accepted it (its acknowledgement lost),
    // and its result, arriving later, must find it pending. The refund sync sends such a request again
    // (the operator reverses a transaction once and answers a repeat "already reversed"), and a request
    // that never reached the operator fails at once (send), so the merchant is not blocked by nothing.
    if (fullOnly && pending.length > 0) throw conflict('a reversal of this payment is already pending');
    const reserved = pending.reduce((sum, r) => sum + r.amountMinor, 0n);
    const remaining = payment.amountMinor - payment.amountRefundedMinor - reserved;
    let amountMinor = remaining;
    if (amount === undefined) {
      // "What remains" when nothing does (pending refunds hold it all) is a conflict; an amount asked for
      // is checked against the remainder below (422 naming amount, decisions.md "Refunds").
      if (remaining <= 0n) throw conflict('payment has no amount left to refund');
    } else {
      amountMinor = toMinorUnits(amount, payment.currency);
      if (amountMinor <= 0n) throw new DomainError('VALIDATION_ERROR', 'Invalid request: amount must be greater than 0', [{ field: 'amount', issue: 'must be greater than 0' }]);
      if (fullOnly && amountMinor !== payment.amountMinor) {
        throw new DomainError('VALIDATION_ERROR', `Invalid request: ${payment.provider} reversals are for the full amount only`, [{ field: 'amount', issue: `must be omitted or equal the full amount for ${payment.provider}` }]);
      }
    }
    // An amount the provider cannot refund in this currency (0.50 MGA at cardpay): the merchant's 422, not a failed refund.
    const amountIssue = this.gateway.port(payment.provider).refundAmountIssue?.({ minor: amountMinor, currency: payment.currency });
    if (amountIssue) throw new DomainError('VALIDATION_ERROR', `Invalid request: amount ${amountIssue}`, [{ field: 'amount', issue: amountIssue }]);
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
      metadata: metadata ?? {},
      // Settled by the provider's answer or event as a rule; the refund sync asks if neither comes.
      nextSyncAt: new Date(Date.now() + firstCheckAfterMs(this.config.statusSyncScheduleMs)),
    });
    await tx.flush();
    return refund;
  }

  /** Records a provider's answer for a refund through the status writer (one unit of work). */
  async settle(refundId: string, result: ProviderRefundResult, source = 'refund'): Promise<Refund> {
    const outcome = await this.writer.applyRefund(
      refundId,
      { status: result.status, providerRef: result.providerRef, failureReason: result.failureReason ?? null, raw: result.raw, reported: result.amount },
      source,
    );
    return outcome.refund;
  }

  async get(merchantId: string, id: string): Promise<Refund> {
    const refund = await this.em.findOne(RefundSchema, { id, merchantId });
    if (!refund) throw notFound('refund');
    return refund;
  }

  /** One payment's refunds oldest first (a ledger), or all of the merchant's newest first; exact total. */
  async list(merchantId: string, filter: RefundListFilter, page: number, pageSize: number) {
    const { paymentId, status, since, until } = filter;
    if (paymentId && !(await this.em.findOne(PaymentSchema, { id: paymentId, merchantId }))) throw notFound('payment');
    const window = createdWindow(since, until);
    const createdAt = { ...(window.since ? { $gt: window.since } : {}), ...(window.until ? { $lt: window.until } : {}) };
    const where = {
      merchantId,
      ...(paymentId ? { paymentId } : {}),
      ...(status ? { status } : {}),
      ...(since || until ? { createdAt } : {}),
    };
    const order = paymentId ? 'asc' : 'desc';
    const [items, total] = await this.em.findAndCount(RefundSchema, where, {
      orderBy: { createdAt: order, id: order },
      limit: pageSize,
      offset: (page - 1) * pageSize,
    });
    return { items, total };
  }
}

/**
 * A refund's amount as its Idempotency-Key hash holds it: formatted in the payment's currency, so
 * `"5.00"`, `"5.0"` and `5` are one USD request. A payment not found (null) or an amount that does not
 * parse hashes as sent: the request then answers 404/422 and claims no key.
 */
function amountAsHashed(currency: string | null, amount: string | number): string {
  if (currency === null) return String(amount);
  try {
    // By value (`"5.000"` is 5.00): a key stored before trailing zeros counted as decimal places still matches;
    // the request itself is then judged as written (reserve: 422 for a new key).
    return formatMinorUnits(toMinorUnits(amount, currency, 'amount', 'significant'), currency);
  } catch (err) {
    if (err instanceof DomainError) return String(amount);
    throw err;
  }
}
