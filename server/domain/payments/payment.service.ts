import { randomInt, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { FilterQuery } from '@mikro-orm/core';
import type { CreatePaymentBody, ListPaymentsQuery, Provider } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, SavedCardSchema, type Payment } from '../../persistence/entities/index.js';
import { createdWindow } from '../created-window.js';
import { DomainError, OutcomeUnknownError, afterProviderMayHaveActed, conflict, notFound } from '../errors.js';
import { assertCredentialsConfigured, type CredentialsService } from '../merchants/credentials.service.js';
import { assertDeliverableUrl, type HostResolver } from '../merchants/webhook-url-policy.js';
import { compareDecimals, formatMinorUnits } from '../money/money.js';
import { ProviderError, providerAccountOf, type CreatePaymentInput, type PaymentLookup, type ProviderPaymentResult, type ProviderPort } from '../ports.js';
import { hashRequest, type Acquired, type ClaimedKey, type IdempotencyKeys, type IdempotentRequest } from './idempotency-keys.js';
import type { ProviderGateway } from './provider-gateway.js';
import { countPayments } from './payment-counts.js';
import { DEEP_PAGE_OFFSET, deepPageIds } from './payment-pages.js';
import { recoverLostCreation } from './lost-creation.js';
import { reservePayment, type PaymentReservation } from './payment-reservation.js';
import type { PaymentUpdate, StatusWriter } from './status-writer.js';
import { normalizePaymentRequest, paymentCurrency, type NormalizedPaymentRequest } from './payment-request.js';
import { cardSendLeaseMs, deletedCardVerdict, sendCreate, type CreateSend } from './saved-card-sends.js';
import { firstCheckAfterMs } from './sync-schedule.js';

const REFERENCE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';

/**
 * A capture the provider refused before acting on it (rate-limited, credentials refused), or never sent
 * (a read it needs first failed): nothing was captured, and nothing about the capture is final — a retry
 * with the same Idempotency-Key sends it again.
 */
class CaptureNotSentError extends DomainError {}

/**
 * A capture refused before anything was sent, for want of what the merchant may restore (its credentials,
 * deleted since the key was claimed: a resumed claim skips `reserve`'s check). Answered as the refusal it is
 * (422), but it decides nothing about the capture, which an earlier request with the key may have sent: the
 * key keeps no answer, and the retry with it once the credentials are back resumes the capture.
 */
class CaptureRefusedBeforeSendingError extends DomainError {}

/** A creation's outcome; `keyFinished` when the key's answer was committed with the payment's. */
interface Settled {
  payment: Payment;
  keyFinished: boolean;
}

export interface CreatedPayment {
  payment: Payment;
  replayed: boolean;
}

export function paymentLookup(payment: Payment): PaymentLookup {
  return { paymentId: payment.id, amount: { minor: payment.amountMinor, currency: payment.currency }, providerRef: payment.providerRef ?? null, reference: payment.reference, providerData: payment.providerData };
}

/** What the provider's create is sent for a reserved payment: the same every time, idempotency key included. */
export function creationInput(payment: Payment): CreatePaymentInput {
  return {
    paymentId: payment.id,
    reference: payment.reference,
    amount: { minor: payment.amountMinor, currency: payment.currency },
    idempotencyKey: `payment-${payment.id}`,
    fields: payment.providerData,
  };
}

function newReference(): string {
  let out = '';
  for (let i = 0; i < 12; i += 1) out += REFERENCE_ALPHABET[randomInt(REFERENCE_ALPHABET.length)];
  return out;
}

/** Payments: idempotent creation, reads, capture, and every provider-driven update. */
export class PaymentService {
  constructor(
    private readonly em: EntityManager,
    private readonly config: AppConfig,
    private readonly credentials: CredentialsService,
    private readonly gateway: ProviderGateway,
    private readonly idempotency: IdempotencyKeys,
    private readonly writer: StatusWriter,
    private readonly logger: Logger,
    private readonly hosts: HostResolver,
  ) {}

  /**
   * Creates a payment exactly once per Idempotency-Key (idempotency-keys.ts): the key is claimed in the
   * same statement that writes the payment as `pending` (payment-reservation.ts); the provider is then
   * called with no connection held, with an idempotency key derived from the payment id, and its answer
   * is applied as a transition together with the key's finish (the status writer's `applyCreation`).
   * A concurrent request with the key waits for that answer; a request that finds the first one dead
   * (its lease expired) resumes it with the same provider idempotency key.
   */
  async create(merchantId: string, idempotencyKey: string, body: CreatePaymentBody): Promise<CreatedPayment> {
    const request = normalizePaymentRequest(body, this.gateway.port(body.provider));
    const keyRequest: IdempotentRequest = { scope: 'payment.create', merchantId, key: idempotencyKey, requestHash: request.requestHash, formerHashes: request.formerHashes };
    if (request.refusal) return this.refusedBeforeClaim(keyRequest, request.refusal);
    let creds: unknown;
    try {
      // The operator will call this address: the same policy as the merchant's webhook URL.
      if (request.fields.callback_url) await assertDeliverableUrl(request.fields.callback_url, { allowPrivate: this.config.webhookAllowPrivateUrls, hosts: this.hosts, merchantId }, 'callback_url');
      creds = await this.credentials.require(merchantId, request.provider);
    } catch (err) {
      return this.refusedBeforeClaim(keyRequest, err);
    }
    const acquired = await this.claimAndReserve(keyRequest, request, providerAccountOf(creds));
    if (acquired.state === 'finished') {
      return { payment: await this.em.fork().findOneOrFail(PaymentSchema, { id: acquired.resourceId }), replayed: true };
    }
    const { claim, reserved } = acquired;
    try {
      const { payment, keyFinished } = await this.idempotency.holding(claim, () => this.completeCreation(claim, reserved, creds));
      if (!keyFinished) await this.idempotency.finish(claim, { status: 201 });
      // A first answer (201) also when this request resumed a dead or released claim: the key held no answer
      // (idempotency-keys.ts, `run`), so the merchant was never told of this payment's outcome.
      return { payment, replayed: false };
    } catch (err) {
      // From the claim on the payment is reserved and the provider may have charged it: a failure of ours
      // (no connection free to record the answer) is an unknown outcome, never the 503 "nothing was done".
      // The key is released: a retry resumes the creation, which looks the payment up at the provider
      // before it sends anything again (completeCreation), so it is never charged twice. Neither write
      // may replace the answer: one that fails leaves the lease to run out, and the retry then resumes.
      if (err instanceof DomainError && err.code === 'PROVIDER_ERROR') {
        // The provider refused: the payment is `failed`, and a retry with the key replays that payment.
        await this.idempotency.finish(claim, { status: 201 }).catch(() => undefined);
      } else {
        await this.idempotency.release(claim).catch(() => undefined);
      }
      throw afterProviderMayHaveActed(err);
    }
  }

  /**
   * A create refused before its claim (the credentials deleted since, a callback host this process cannot
   * resolve, an amount written with more decimal places than an earlier release counted): the refusal is the answer only for a key never used. A key already used answers as it did,
   * and one whose first request is still running is waited for like any repeat (its answer, or 409 with
   * Retry-After): that request may still charge, and a final-looking 422 would invite a new key — a second charge.
   * A key whose first request died is not resumed without what was refused: its payment, still pending, is
   * the answer (the status sync settles it), and the key is released for a retry that has what it needs.
   */
  private async refusedBeforeClaim(keyRequest: IdempotentRequest, refusal: unknown): Promise<CreatedPayment> {
    const acquired = await this.idempotency.acquire(keyRequest, async () => {
      throw refusal;
    });
    if (acquired.state === 'claimed') await this.idempotency.release(acquired.claim);
    const paymentId = acquired.state === 'finished' ? acquired.resourceId : acquired.claim.resourceId;
    // Only a key that held an answer replays it; a dead request's claim held none (its payment is a first answer).
    return { payment: await this.em.fork().findOneOrFail(PaymentSchema, { id: paymentId }), replayed: acquired.state === 'finished' };
  }

  /**
   * Claims the key with the payment reserved in one statement; `reserved` is the payment as written
   * (null when a dead request's claim was taken over). A saved card that is not an active card of the
   * merchant is refused — for a new key only: a replay still answers as the first request did. So is a card
   * saved under another provider account (or the same account's other mode) than the stored credentials':
   * its customer and payment method are that account's, and the charge would be refused there ("No such
   * customer") after a payment was written. A card saved before its account was recorded (migration
   * 20261129004101), or credentials whose account could not be read, prove no other account: charged as before.
   */
  private async claimAndReserve(keyRequest: IdempotentRequest, request: NormalizedPaymentRequest, providerAccount: string | null): Promise<Acquired & { reserved?: Payment | null }> {
    const { merchantId, key: idempotencyKey } = keyRequest;
    const providerData: Record<string, unknown> = {};
    const vault = this.gateway.port(request.provider).cards;
    if (vault && request.fields.saved_card_id) {
      const card = await this.em.fork().findOne(SavedCardSchema, { id: request.fields.saved_card_id, merchantId, provider: request.provider, active: true });
      if (!card) {
        return this.idempotency.acquire(keyRequest, async () => {
          throw new DomainError('VALIDATION_ERROR', 'Invalid request: saved_card_id is not an active saved card', [{ field: 'saved_card_id', issue: 'is not an active saved card of this merchant' }]);
        });
      }
      if (card.providerAccount && providerAccount && card.providerAccount !== providerAccount) {
        const issue = `was saved with other ${request.provider} credentials (another account or mode than the stored ones): store those credentials again to charge it, or save the card again with the current ones`;
        return this.idempotency.acquire(keyRequest, async () => {
          throw new DomainError('VALIDATION_ERROR', `Invalid request: saved_card_id ${issue}`, [{ field: 'saved_card_id', issue }]);
        });
      }
      Object.assign(providerData, vault.chargeFields(card));
    }
    for (const [key, value] of Object.entries(request.fields)) if (value !== undefined && key !== 'saved_card_id') providerData[key] ??= value;
    if (request.fields.saved_card_id) providerData.saved_card_id = request.fields.saved_card_id;

    const reservation: PaymentReservation = {
      id: randomUUID(),
      merchantId,
      provider: request.provider,
      amountMinor: request.amountMinor,
      currency: request.currency,
      amount: formatMinorUnits(request.amountMinor, request.currency),
      reference: newReference(),
      idempotencyKey,
      requestHash: request.requestHash,
      providerData,
      metadata: request.metadata,
      // Every pending payment is re-checked with its provider from then on (status sync).
      firstSyncAfterMs: firstCheckAfterMs(this.config.statusSyncScheduleMs),
      // The account of the credentials the create is sent with: the payment is only ever asked about there.
      providerAccount,
    };
    let reserved: Payment | null = null;
    const acquired = await this.idempotency.acquireInOneStatement(keyRequest, reservation.id, async (claim) => {
      const written = await reservePayment(this.em, claim, reservation);
      reserved = written?.payment ?? null;
      return written?.keyId ?? null;
    });
    return { ...acquired, reserved };
  }

  /**
   * The provider call of a reserved payment and the transition its answer makes. A resumed claim first
   * checks what the dead request got done: an answer already applied is not asked for again, and a
   * provider whose create is not idempotent is not asked twice (the status sync and its callback settle it).
   * `keyFinished`: the key's answer was committed with the payment's.
   */
  private async completeCreation(claim: ClaimedKey, reserved: Payment | null | undefined, creds: unknown): Promise<Settled> {
    const paymentId = claim.resourceId;
    const payment = !claim.resumed && reserved ? reserved : await this.em.fork().findOneOrFail(PaymentSchema, { id: paymentId });
    if (claim.resumed) {
      if (payment.status !== 'pending' || payment.providerRef) return { payment, keyFinished: false };
      // What the dead request got done, as the status sync asks it: the create is repeated only while the
      // provider still answers a repeat with the first result (lost-creation.ts), never as a second charge.
      const lost = await recoverLostCreation(this.gateway, payment, paymentLookup(payment));
      if (lost.kind === 'found') return this.settle(payment, toUpdate(lost.result), claim);
      if (lost.kind === 'absent') return this.settle(payment, { status: 'failed', failureReason: lost.reason }, claim);
      if (lost.kind === 'unknown') {
        this.logger.warn({ paymentId, provider: payment.provider, reason: lost.reason }, 'resumed creation: not sent again; left to the status sync');
        await this.markForSync(paymentId, { error: 'the request creating this payment was interrupted' });
        return { payment: await this.em.fork().findOneOrFail(PaymentSchema, { id: paymentId }), keyFinished: false };
      }
    }
    return this.callProvider(payment, creds, claim);
  }

  /**
   * The provider call of a reserved payment and the transition its answer makes, with the key's finish. A
   * payment charging a saved card deleted since it was reserved (a DELETE that committed before this send
   * began, or before a dead request's create is resumed) is not sent (saved-card-sends.ts), and
   * deletedCardVerdict says what it becomes: failed when no create of it was ever sent (nothing charged), else
   * pending for the status sync (a create sent before may have charged, whatever a lookup said).
   */
  private async callProvider(payment: Payment, creds: unknown, claim: ClaimedKey): Promise<Settled> {
    let sent: CreateSend;
    try {
      sent = await sendCreate(this.em, this.gateway, payment, creationInput(payment), cardSendLeaseMs(this.config.providerTimeoutMs), creds);
    } catch (err) {
      return this.handleCreateError(payment, err, claim);
    }
    if (sent.kind === 'sent') return this.settle(payment, toUpdate(sent.result), claim);
    const verdict = deletedCardVerdict(payment, sent);
    if (verdict.kind === 'pending') {
      this.logger.warn({ paymentId: payment.id, provider: payment.provider, savedCardId: sent.cardId, reason: verdict.reason }, 'resumed creation: its saved card was deleted; not sent again; left to the status sync');
      await this.markForSync(payment.id, { error: `the request creating this payment was interrupted; ${verdict.reason}` });
      return { payment: await this.em.fork().findOneOrFail(PaymentSchema, { id: payment.id }), keyFinished: false };
    }
    this.logger.warn({ paymentId: payment.id, provider: payment.provider, savedCardId: sent.cardId }, 'payment creation: its saved card was deleted before any charge of it was sent; not sent, payment failed');
    return this.settle(payment, { status: 'failed', failureReason: verdict.failureReason }, claim);
  }

  /** Applies the creation answer and finishes the key in the same commit. */
  private async settle(payment: Payment, update: PaymentUpdate, claim: ClaimedKey): Promise<Settled> {
    const outcome = await this.writer.applyCreation(payment, update, 'create', this.idempotency.finishing(claim, { status: 201 }));
    return { payment: outcome.payment, keyFinished: true };
  }

  private async handleCreateError(payment: Payment, err: unknown, claim: ClaimedKey): Promise<Settled> {
    if (!(err instanceof ProviderError)) throw err;
    if (claim.resumed && err.kind !== 'declined') {
      // The interrupted first request may have been charged: a refusal of the repeat (e.g. its parameters
      // differ after a configuration change) proves nothing. Keep it pending for the status sync, which
      // finds the charge by our payment id.
      this.logger.warn({ paymentId: payment.id, provider: payment.provider, kind: err.kind }, 'resumed creation refused by the provider; left to the status sync');
      await this.markForSync(payment.id, { error: err.message });
      return { payment: await this.em.fork().findOneOrFail(PaymentSchema, { id: payment.id }), keyFinished: false };
    }
    if (err.kind === 'declined') {
      const update = err.result ? toUpdate(err.result) : { status: 'failed' as const };
      return this.settle(payment, { ...update, status: 'failed', failureReason: err.message }, claim);
    }
    // `unavailable`: the provider was not reached, or answered that it did nothing (a token endpoint down,
    // a subscriber busy with another push); `rate_limited`: its rate limiter answered 429 (nothing created).
    // Neither is a refusal of the payment: kept pending where the status sync repeats the creation (the
    // same idempotency key); elsewhere nothing would ever settle it, so it fails now and the merchant may try again.
    const notDone = err.kind === 'unavailable' || err.kind === 'rate_limited';
    const keepPending = err.kind === 'indeterminate' || (notDone && this.gateway.port(payment.provider).capabilities.replayableCreate);
    if (keepPending) {
      // The provider may have acted: keep the payment pending; a callback or the status sync settles it.
      this.logger.warn({ paymentId: payment.id, provider: payment.provider, kind: err.kind }, 'provider outcome unknown at creation');
      await this.markForSync(payment.id, { error: err.message });
      return { payment: await this.em.fork().findOneOrFail(PaymentSchema, { id: payment.id }), keyFinished: false };
    }
    await this.applyUpdate(payment.id, { status: 'failed', failureReason: err.message, raw: { error: err.message, code: err.providerCode ?? null } }, 'create');
    // A refusal of one of the merchant's fields (cardpay's minimum charge: `amount`) names it, as a 422 would.
    const details = err.field ? [{ field: err.field, issue: err.message }] : undefined;
    throw new DomainError('PROVIDER_ERROR', `${payment.provider} refused the payment: ${err.message}`, details);
  }

  /**
   * Keeps a pending payment for the status sync, with the first re-check after the first interval. One
   * statement, conditional on `pending`: a callback that settled the payment meanwhile keeps its stored
   * response (a read, then a write, could overwrite it).
   */
  async markForSync(paymentId: string, raw: unknown): Promise<void> {
    const first = firstCheckAfterMs(this.config.statusSyncScheduleMs);
    await this.em.fork().execute(
      `UPDATE payments SET provider_response = ?::jsonb, next_sync_at = COALESCE(next_sync_at, now() + make_interval(secs => ?)), updated_at = now()
       WHERE id = ? AND status = 'pending'`,
      [JSON.stringify(raw), first / 1000, paymentId],
      'run',
    );
  }

  /** Applies a provider update through the status writer (its own unit of work). */
  async applyUpdate(paymentId: string, update: PaymentUpdate, trigger: string) {
    return this.writer.applyPayment(paymentId, update, trigger);
  }

  async get(merchantId: string, id: string): Promise<Payment> {
    const payment = await this.em.findOne(PaymentSchema, { id, merchantId });
    if (!payment) throw notFound('payment');
    return payment;
  }

  /**
   * A currency filter is a currency a payment can be made in (the create's rule: XXX is 422, not an empty
   * list); min/max then follow its digits as written, like every amount input (lib/money.ts).
   */
  private checkCurrencyFilter(query: ListPaymentsQuery): void {
    if (!query.currency) return;
    const { digits } = paymentCurrency(query.currency);
    for (const field of ['min_amount', 'max_amount'] as const) {
      const fraction = query[field]?.split('.')[1] ?? '';
      if (fraction.length > digits) {
        const issue = `must have at most ${digits} decimal places for ${query.currency.toUpperCase()}`;
        throw new DomainError('VALIDATION_ERROR', `Invalid request: ${field} ${issue}`, [{ field, issue }]);
      }
    }
  }

  async list(merchantId: string, query: ListPaymentsQuery): Promise<{ items: Payment[]; total: number }> {
    const where: FilterQuery<Payment> = { merchantId };
    if (query.status) where.status = query.status;
    if (query.provider) where.provider = query.provider;
    if (query.currency) where.currency = query.currency.toUpperCase();
    if (query.min_amount !== undefined || query.max_amount !== undefined) {
      where.amount = {
        ...(query.min_amount !== undefined ? { $gte: query.min_amount } : {}),
        ...(query.max_amount !== undefined ? { $lte: query.max_amount } : {}),
      };
    }
    if (query.since !== undefined || query.until !== undefined) {
      const { since, until } = createdWindow(query.since, query.until);
      where.createdAt = { ...(since ? { $gt: since } : {}), ...(until ? { $lt: until } : {}) };
    }
    // interface.md: the mobile-money receipt number or the idempotency key. walletpay keeps its capture id
    // in receipt_number too; that is no receipt, so it is not searched. payments_receipt_idx still serves
    // the receipt branch (provider is checked on the few rows it finds).
    if (query.search) {
      where.$or = [{ provider: 'mobilemoney', receiptNumber: { $in: [query.search.toUpperCase(), query.search] } }, { idempotencyKey: query.search }];
    }
    this.checkCurrencyFilter(query);
    if (query.min_amount !== undefined && query.max_amount !== undefined && compareDecimals(query.min_amount, query.max_amount) > 0) {
      throw new DomainError('VALIDATION_ERROR', 'Invalid request: min_amount must not exceed max_amount', [{ field: 'min_amount', issue: 'must not exceed max_amount' }]);
    }
    // Deferred join: the page's ids come from an index-only scan (the list indexes end in created_at, id)
    // and only those rows are read, so a deep page skips index entries, not heap rows (see bench/).
    // MikroORM takes a sub-query as an `$in` value; its types do not say so, hence the cast.
    const order = { createdAt: 'desc', id: 'desc' } as const;
    const pageIds = this.em
      .createQueryBuilder(PaymentSchema, 'k')
      .select('k.id')
      .where(structuredClone(where))
      .orderBy(order)
      .limit(query.page_size)
      .offset((query.page - 1) * query.page_size);
    // Exact totals: the trigger-kept counters answer merchant/status/provider/currency filters; amount,
    // date and search filters are counted on their indexes.
    const countable = query.min_amount === undefined && query.max_amount === undefined && query.since === undefined && query.until === undefined && query.search === undefined;
    // A deep page of all payments or of one status: the week counts find where it starts.
    const offset = (query.page - 1) * query.page_size;
    const byWeeks = countable && query.provider === undefined && query.currency === undefined && offset >= DEEP_PAGE_OFFSET;
    const ids = byWeeks ? deepPageIds(this.em, merchantId, query.status, offset, query.page_size) : null;
    const [items, total] = await Promise.all([
      ids
        ? ids.then((page) => (page.length ? this.em.find(PaymentSchema, { id: { $in: page } }, { orderBy: order }) : []))
        : this.em.find(PaymentSchema, { id: { $in: pageIds.getKnexQuery() } } as unknown as FilterQuery<Payment>, { orderBy: order }),
      countable
        ? countPayments(this.em, { merchantId, status: query.status, provider: query.provider, currency: query.currency?.toUpperCase() })
        : this.em.count(PaymentSchema, where),
    ]);
    return { items, total };
  }

  /**
   * Captures an approved payment (providers with the capture capability). Wrong status or an unapproved payment is 409. With an
   * Idempotency-Key a retry replays the first answer; a 409 (nothing captured) frees the key for a retry. A capture
   * whose outcome is not final — the provider did not answer (a timeout, a 5xx, its token endpoint down), refused
   * before acting (429, credentials), or the capture was never sent (the read before it failed) — binds the key
   * to no answer: a retry with the key resumes it, sending the capture again with the same provider idempotency
   * key (`capture-<payment id>`), so the provider answers with the first capture if there was one, and captures
   * now if there was none.
   */
  async capture(merchantId: string, id: string, idempotencyKey?: string): Promise<{ payment: Payment; replayed: boolean }> {
    if (idempotencyKey === undefined) return { payment: await this.captureNow(merchantId, id), replayed: false };
    // The id is hashed in lower case (a UUID in either case is one payment); a key stored before
    // 2026-11-28 hashed it as sent, and still matches.
    const requestHash = hashRequest({ payment_id: id.toLowerCase() });
    const formerHashes = id === id.toLowerCase() ? [] : [hashRequest({ payment_id: id })];
    const { value, replayed } = await this.idempotency.run(
      { scope: 'payment.capture', merchantId, key: idempotencyKey, requestHash, formerHashes },
      200,
      {
        reserve: async (uow) => {
          const payment = await uow.tx.findOne(PaymentSchema, { id, merchantId });
          if (!payment) throw notFound('payment');
          this.assertCapturable(payment);
          await assertCredentialsConfigured(uow.tx, merchantId, payment.provider);
          return payment.id;
        },
        act: async (paymentId, resumed) => {
          const payment = await this.em.fork().findOneOrFail(PaymentSchema, { id: paymentId });
          // A resumed capture whose answer was committed is not sent again.
          if (resumed && payment.status !== 'pending') return payment;
          return this.captureNow(merchantId, paymentId);
        },
        load: (paymentId) => this.em.fork().findOneOrFail(PaymentSchema, { id: paymentId }),
        nothingDone: (err) => err.code === 'CONFLICT',
        // Nothing else ever sends the capture again: the merchant's retry with the key resumes it.
        resumable: (err) => err instanceof OutcomeUnknownError || err instanceof CaptureNotSentError || err instanceof CaptureRefusedBeforeSendingError,
        // (Keys stored before captures were resumable:) settled once the payment moved (event or status sync).
        settled: (payment) => payment.status !== 'pending',
      },
    );
    return { payment: value, replayed };
  }

  private async captureNow(merchantId: string, id: string): Promise<Payment> {
    const payment = await this.get(merchantId, id);
    this.assertCapturable(payment);
    await this.credentials.require(merchantId, payment.provider as Provider).catch((err: unknown) => {
      throw err instanceof DomainError ? new CaptureRefusedBeforeSendingError(err.code, err.message, err.details, err.headers) : err;
    });
    const mark = await this.markCaptureMaySend(payment.id);
    try {
      return await this.sendCapture(payment, mark.earlier);
    } catch (err) {
      // Nothing captured (not sent, or a 409: the provider's order shows no capture): the mark is taken back —
      // unless another attempt has marked it since, or had marked it before (that one may still be under way).
      if (!mark.earlier && (err instanceof CaptureNotSentError || (err instanceof DomainError && err.code === 'CONFLICT'))) {
        await this.unmarkCaptureSent(payment.id, mark.at).catch(() => undefined);
      }
      // The capture may have been sent: a failure of ours from here on (its answer not recorded) is an
      // unknown outcome, never the 503 "nothing was done"; the payment stays pending.
      throw afterProviderMayHaveActed(err);
    }
  }

  /**
   * Marks the payment's capture as possibly sent (payments.capture_sent_at), in its own statement before
   * the provider is asked. `earlier`: another attempt had marked it and not taken the mark back — it may have
   * captured, so this attempt's failure to reach the provider is no proof that nothing was captured.
   */
  private async markCaptureMaySend(paymentId: string): Promise<{ at: string; earlier: boolean }> {
    const [row] = await this.em.fork().execute<{ at: string; earlier: boolean }[]>(
      `WITH prev AS (SELECT id, capture_sent_at FROM payments WHERE id = ? FOR UPDATE)
       UPDATE payments p SET capture_sent_at = clock_timestamp() FROM prev WHERE p.id = prev.id
       RETURNING p.capture_sent_at::text AS at, prev.capture_sent_at IS NOT NULL AS earlier`,
      [paymentId],
    );
    return row!;
  }

  /** Takes back this attempt's mark (markCaptureMaySend's `at`): nothing was sent. */
  private async unmarkCaptureSent(paymentId: string, at: string): Promise<void> {
    await this.em.fork().execute('UPDATE payments SET capture_sent_at = NULL WHERE id = ? AND capture_sent_at = ?::timestamptz', [paymentId, at], 'run');
  }

  /**
   * A capture this attempt did not send (or the provider refused before acting): "not sent" (502, no
   * Payments-Outcome), unless an earlier attempt may have captured (`earlier`): then the outcome is unknown.
   */
  private notSent(payment: Payment, earlier: boolean, detail: string): DomainError {
    if (earlier) {
      return new OutcomeUnknownError(
        'PROVIDER_ERROR',
        `${payment.provider} capture: this request sent no capture (${detail}), but an earlier capture request of this payment may have captured it; retry to learn its outcome`,
      );
    }
    return new CaptureNotSentError('PROVIDER_ERROR', `${payment.provider} capture not sent: ${detail}`);
  }

  /** The capture request of a capturable payment, and the transition its answer makes. */
  private async sendCapture(payment: Payment, earlierMayHaveCaptured: boolean): Promise<Payment> {
    let result: ProviderPaymentResult;
    try {
      result = await this.gateway.capture(payment, `capture-${payment.id}`);
    } catch (err) {
      if (err instanceof ProviderError && err.reason === 'amount_mismatch') {
        // Not sent: the provider's object asks for another amount or currency than the payment (changed at the
        // provider after creation). Its report goes through the status writer, which records the mismatch.
        if (err.result) await this.applyUpdate(payment.id, toUpdate(err.result), 'capture');
        const theirs = err.result?.amount ? `${formatMinorUnits(err.result.amount.minor, err.result.amount.currency)} ${err.result.amount.currency.toUpperCase()}` : 'no amount';
        if (err.result?.integrityIssue) {
          // Not the object created (walletpay: more purchase units, another payee or intent), whatever its amount.
          throw conflict(
            `nothing was captured: ${payment.provider}'s ${payment.providerRef} is no longer the one this payment created (${err.result.integrityIssue}; ${theirs} in all), ` +
            `changed at ${payment.provider} after the payment was created, with your ${payment.provider} API credentials; the payment stays pending and is not captured while it differs`,
          );
        }
        throw conflict(
          `nothing was captured: ${payment.provider} holds this payment for ${theirs}, not its ${formatMinorUnits(payment.amountMinor, payment.currency)} ${payment.currency} ` +
          `(changed at ${payment.provider} after the payment was created, with your ${payment.provider} API credentials); the payment stays pending and is not captured while the amounts differ`,
        );
      }
      if (err instanceof ProviderError && err.reason === 'not_sent') {
        // Never sent (the read before it failed): this request captured nothing (no Payments-Outcome: unknown,
        // unless an earlier one may have: notSent), and the payment stays pending. The key is resumable, so a
        // retry with it sends the capture then.
        throw this.notSent(payment, earlierMayHaveCaptured, err.message);
      }
      if (err instanceof ProviderError && err.reason === 'not_approved') {
        // Refused as not approved: also what an order the provider ended (walletpay VOIDED) answers, which
        // no event reports. The order as it stands tells them apart; a final one is applied now.
        const settled = await this.settleUnapproved(payment, err.result);
        if (settled?.status === 'failed') {
          throw conflict(`the payment can no longer be captured and is now failed (${settled.failureReason ?? `${payment.provider} ended it`}); create a new payment if the customer still wants to pay`);
        }
        if (settled) return settled;
        throw conflict('the buyer has not approved this payment yet');
      }
      if (err instanceof ProviderError && err.reason === 'reapprove') {
        // Nothing was captured and the payment stays pending: the buyer approves again (with another funding
        // source) at next_action.url, restored here, and the merchant captures again.
        if (err.result) {
          const { nextAction, data, raw } = err.result;
          await this.applyUpdate(payment.id, { status: 'pending', nextAction: nextAction ?? null, data, raw }, 'capture');
        }
        throw conflict(
          `the buyer's funding source was declined (${err.providerCode ?? 'declined'}): send the buyer to next_action.url to approve again with another one, then capture again`,
        );
      }
      if (err instanceof ProviderError && err.kind === 'declined') {
        // Refused for good (the buyer cannot pay, the transaction was refused): the payment fails, like a declined capture.
        const update = err.result ? toUpdate(err.result) : { status: 'failed' as const };
        return (await this.applyUpdate(payment.id, { ...update, status: 'failed', failureReason: err.result?.failureReason ?? err.message }, 'capture')).payment;
      }
      const expired = err instanceof ProviderError ? expiredAtProvider(this.gateway.port(payment.provider), payment, err) : null;
      if (expired) return (await this.applyUpdate(payment.id, { status: 'failed', failureReason: expired, raw: { error: (err as Error).message } }, 'capture')).payment;
      if (err instanceof ProviderError && err.reason === 'already_captured') {
        // Already captured at the provider (e.g. an earlier capture's answer was lost): settle from its state.
        // While that state cannot be read the outcome is unknown, as for an unanswered capture (pending; retry).
        let current: ProviderPaymentResult;
        try {
          current = await this.gateway.getPayment(payment, paymentLookup(payment));
        } catch (readErr) {
          if (!(readErr instanceof ProviderError)) throw readErr;
          throw new OutcomeUnknownError('PROVIDER_ERROR', `${payment.provider} capture: already captured, but the order could not be read: ${readErr.message}`);
        }
        return (await this.applyUpdate(payment.id, toUpdate(current), 'capture')).payment;
      }
      if (err instanceof ProviderError && (err.kind === 'indeterminate' || err.kind === 'unavailable')) {
        // The capture may have happened: the payment stays pending for the provider's event or the status sync.
        throw new OutcomeUnknownError('PROVIDER_ERROR', `${payment.provider} capture failed: ${err.message}`);
      }
      if (err instanceof ProviderError && (err.kind === 'rate_limited' || err.kind === 'auth')) {
        // Refused before it acted: this request captured nothing (see notSent); the payment stays pending and
        // the capture may be sent again.
        throw this.notSent(payment, earlierMayHaveCaptured, err.message);
      }
      if (err instanceof ProviderError) throw new DomainError('PROVIDER_ERROR', `${payment.provider} capture failed: ${err.message}`);
      throw err;
    }
    return (await this.applyUpdate(payment.id, toUpdate(result), 'capture')).payment;
  }

  /**
   * After a capture refused as not approved: the provider's order, applied through the status writer when
   * it is final (the provider voided it); null while it is still waiting for the buyer (who may have
   * cancelled at the provider's page: that ends nothing, they can still approve), or when the
   * provider cannot be asked now (the payment stays pending for the status sync). `known`: the order as the
   * provider's capture read it (not read again); a pending one is applied too, for the facts it carries
   * (e.g. walletpay's count of refused captures, which gives the next capture a new request id).
   */
  private async settleUnapproved(payment: Payment, known?: ProviderPaymentResult): Promise<Payment | null> {
    let current: ProviderPaymentResult;
    if (known) {
      current = known;
    } else {
      try {
        current = await this.gateway.getPayment(payment, paymentLookup(payment));
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        return null;
      }
    }
    if (current.status === 'pending') {
      if (known) await this.applyUpdate(payment.id, toUpdate(current), 'capture');
      return null;
    }
    return (await this.applyUpdate(payment.id, toUpdate(current), 'capture')).payment;
  }

  private assertCapturable(payment: Payment): void {
    if (!this.gateway.port(payment.provider).capabilities.capture) throw conflict(`${payment.provider} payments are not captured`);
    if (payment.status !== 'pending') throw conflict(`payment is ${payment.status}; only a pending payment can be captured`);
    if (!payment.providerRef) throw conflict('payment has no provider reference to capture yet');
  }
}

/**
 * The failure reason of a payment the provider no longer has because it expired unapproved, or null.
 * Only a `gone` answer about the reference the provider gave us at creation, and only once the payment
 * is older than the provider's expiry: a payment younger than that which the provider does not know
 * (other credentials, another account) is not failed for it.
 */
export function expiredAtProvider(port: ProviderPort, payment: Payment, err: ProviderError, now = Date.now()): string | null {
  const lifetime = port.capabilities.expiresUnapprovedAfterMs;
  if (err.reason !== 'gone' || !lifetime || !payment.providerRef) return null;
  if (now - payment.createdAt.getTime() < lifetime) return null;
  const hours = Math.round(lifetime / 3_600_000);
  return `${payment.provider} no longer has ${payment.providerRef}: it expired unpaid, more than ${hours} h after its creation (never approved by the buyer, or never captured). Nothing was charged; create a new payment if the customer still wants to pay.`;
}

export function toUpdate(result: ProviderPaymentResult): PaymentUpdate {
  return {
    status: result.status,
    providerRef: result.providerRef,
    receiptNumber: result.receiptNumber ?? null,
    failureReason: result.failureReason ?? null,
    nextAction: result.nextAction ?? null,
    raw: result.raw,
    data: result.data,
    reported: result.amount,
    issue: result.integrityIssue ?? null,
    ...(result.refunds?.length ? { refunds: result.refunds } : {}),
  };
}
