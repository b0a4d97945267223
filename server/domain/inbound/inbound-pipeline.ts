import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Provider } from '../../../contract/index.js';
import { CALLBACK_UNVERIFIED } from '../../../contract/errors.js';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, RefundSchema, type Payment, type Refund } from '../../persistence/entities/index.js';
import { DomainError } from '../errors.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import { paymentLookup, toUpdate } from '../payments/payment.service.js';
import { OTHER_ACCOUNT, type ProviderGateway } from '../payments/provider-gateway.js';
import type { PaymentUpdate, StatusWriter } from '../payments/status-writer.js';
import {
  MalformedNotificationError, OWNER_NOT_VISIBLE, ProviderError, providerAccountOf,
  type InboundRequest, type Money, type PaymentOutcomeNotification, type ProviderNotification, type ProviderPort, type ProviderRegistry, type RefundOutcomeNotification,
  type ReversalResultNotification, type StatusReportNotification, type Verification,
} from '../ports.js';
import { askForConfirmation } from './confirmation-queries.js';
import { markRefusedInInbox, recordInInbox } from './inbox.js';
import {
  findOurRefund, ourId, recordedAsItsOwn, refundsRecordedOn, referenceConflict, resolvePayment, resolveRefund, resolveStatusQuery, type ReferencedSubject, type StatusQueryRow,
} from './resolve.js';
import { recordQueueTimeout, recordStatusReport } from './status-reports.js';

/**
 * What became of a notification: `applied`; `duplicate` (in the inbox already); `unknown_reference`;
 * `other_account` (verified, but of another provider account or mode than its payment was created on: not applied);
 * `ignored` (a type we do not act on); `confirmed` (unverifiable, so the provider was asked and its
 * answer applied); `confirming` (unverifiable; the provider was asked for a status report, which is
 * applied when it arrives); `unconfirmed` (unverifiable and the provider could not be asked: nothing changed).
 */
export type InboundOutcome = 'applied' | 'duplicate' | 'unknown_reference' | 'other_account' | 'ignored' | 'confirmed' | 'confirming' | 'unconfirmed';

type Actionable = Exclude<ProviderNotification, { kind: 'ignored' }>;

/** Longest sender-written string (event type, event id) put in a log line. */
const MAX_LOGGED_CHARS = 120;
/** At most this many merchants' credentials try to verify a refund notification whose payment may not be known yet. */
const MAX_OWNER_CANDIDATES = 20;
const MAX_BIGINT = 2n ** 63n - 1n;
/** provider_data keys a notification may name (as in resolve.ts): inlined in SQL. */
const DATA_KEY = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
const clip = (text: string): string => (text.length > MAX_LOGGED_CHARS ? `${text.slice(0, MAX_LOGGED_CHARS)}…` : text);

/** The resolved subject of a notification: whose credentials verify it, and the rows it may touch. */
interface Subject {
  merchantId: string;
  /** Our id of the payment, refund or status query (what per-subject tokens are bound to). */
  subjectId: string;
  payment: Payment | null;
  paymentId: string | null;
  refundId: string | null;
  /** The refund a reversal result is about. */
  refund: Refund | null;
  /** The status query a status report answers. */
  query: StatusQueryRow | null;
}

/** A notification about `payment` (a payment or refund notification resolved to it). */
const paymentSubject = (payment: Payment): Subject => ({
  merchantId: payment.merchantId, subjectId: payment.id, payment, paymentId: payment.id, refundId: null, refund: null, query: null,
});

/**
 * Every provider notification, one way: screen → parse (the provider's folder) → resolve (our id
 * first, then the provider's reference) → verify with that merchant's credentials (the provider's
 * scheme) → the reference it names must be the resolved subject's (resolve.ts, referenceConflict)
 * → the one inbox → the status writer → the outbox, the last three in one transaction, the
 * deliveries enqueued after commit. A notification that cannot be verified — or whose verification
 * does not bind it to its subject while the reference it names is not the subject's by record — is
 * never applied as it says: the provider is asked (getPayment) and its answer applied, outside any transaction.
 * A payment is asked about through the gateway (ProviderGateway.getPayment), never through credentials of
 * another provider account than the one it was created under (otherAccount): left pending, as the status sync leaves it.
 * Nor is a verified notification of another account (or mode) than its payment's applied (accountsDiffer).
 */
export class InboundPipeline {
  constructor(
    private readonly em: EntityManager,
    private readonly providers: ProviderRegistry,
    private readonly credentials: CredentialsService,
    private readonly writer: StatusWriter,
    private readonly logger: Logger,
    private readonly gateway: ProviderGateway,
  ) {}

  async handle(provider: Provider, request: InboundRequest): Promise<InboundOutcome> {
    const port = this.providers.get(provider);
    const scheme = port.notifications;
    const refusal = scheme.screen?.(request) ?? null;
    if (refusal) {
      this.logger.warn({ provider, subpath: request.subpath, refusal }, 'notification refused before parsing');
      throw new DomainError('UNAUTHORIZED', `Invalid ${provider} callback: ${refusal}`);
    }
    let notification: ProviderNotification;
    try {
      notification = scheme.parse(request);
    } catch (err) {
      if (err instanceof MalformedNotificationError) throw new DomainError('BAD_REQUEST', err.message);
      throw err;
    }
    // What the sender wrote, logged (and recorded as the transition's trigger) before anything is verified: bounded.
    notification = { ...notification, label: clip(notification.label) };
    if (notification.kind === 'ignored') {
      this.logger.info({ provider, label: notification.label, reason: notification.reason }, 'notification not acted on; acknowledged');
      return 'ignored';
    }
    let subject = await this.resolve(port, notification);
    // Credentials of the subject's merchant that verified the notification already (while its owner was sought).
    let verifiedWith: unknown = null;
    if (!subject && notification.kind === 'refund' && notification.ownerMayBeUnrecorded) {
      const owner = await this.ownerByAsking(port, request, notification);
      if (owner === 'not-ours') return 'unknown_reference';
      if (owner) ({ subject, verifiedWith } = owner);
    }
    if (!subject) {
      this.logger.warn({ provider, label: notification.label, dedupKey: clip(notification.dedupKey) }, 'notification for an unknown reference; acknowledged and ignored');
      return 'unknown_reference';
    }
    const addressee = scheme.addressee?.(request) ?? null;
    if (addressee !== null && addressee !== subject.merchantId) return this.forAnotherMerchant(port, request, notification, subject, addressee);
    const creds = verifiedWith ?? (await this.credentials.find(subject.merchantId, provider));
    const verdict = verifiedWith !== null ? 'verified' : creds === null ? 'invalid' : await this.verify(port, request, creds, subject.subjectId);
    if (verdict === 'invalid') {
      this.logger.warn({ provider, label: notification.label, subjectId: subject.subjectId }, 'notification verification failed');
      throw new DomainError('UNAUTHORIZED', CALLBACK_UNVERIFIED[provider]);
    }
    if (verdict === 'unverifiable') return this.confirm(port, creds, notification, subject);
    // Verified with credentials of another provider account (or mode) than the payment was created on: another
    // account's event — whatever our id its metadata names — is never the payment's, as no lookup is judged
    // there (otherAccount). Acknowledged, since sending it again changes nothing; the payment is left as it is.
    const accounts = await this.accountsDiffer(port, request, creds, subject);
    if (accounts) {
      this.logger.warn(
        { provider, label: notification.label, subjectId: subject.subjectId, paymentId: subject.paymentId, createdOnAccount: accounts.created, eventAccount: accounts.event },
        'verified notification of another provider account than its payment was created on; acknowledged, not applied',
      );
      return 'other_account';
    }
    // A verification may cover only part of the request (a signature over the body, while our id came from
    // its address): what the verified notification names must be the resolved subject's, or it is invalid.
    // (An unverifiable one is never applied as it says: the provider is asked about the subject itself.)
    const atItsAddress = scheme.answersOurRequestAbout?.(request, creds, subject.subjectId) ?? false;
    const conflict = await this.referenceConflict(port, notification, subject, atItsAddress);
    if (conflict) {
      this.logger.warn({ provider, label: notification.label, subjectId: subject.subjectId, conflict }, "notification refused: its provider reference is not its subject's");
      throw new DomainError('UNAUTHORIZED', CALLBACK_UNVERIFIED[provider]);
    }
    // Verified, but perhaps not as ours: a signature over the body proves the provider wrote it, while our id
    // came from an address anyone's request could name (a stranger's push with our payment's address as its
    // CallBackURL). Unless the address is bound to the subject or the reference it names is one the subject
    // recorded, it is confirmed with the provider — asked with the merchant's own credentials — never applied as it says.
    // So is one naming no provider reference of its subject at all (a walletpay capture event without its order,
    // a refund event without its capture): only our id ties it to the subject, and the merchant's own call at
    // the provider can set that (custom_id). A refund cannot be confirmed so: left to the refund sync — unless
    // every provider refund it names is one our refunds recorded (namesNoReference).
    const bound = (scheme.boundToSubject?.(request, creds, subject.subjectId) ?? true) && !(await this.namesNoReference(notification, subject));
    if (!bound && !this.namesItsRecordedReference(notification, subject)) {
      this.logger.warn(
        { provider, label: notification.label, subjectId: subject.subjectId },
        'verified notification not bound to its subject (by its address, or naming no reference) names no reference the subject recorded; confirmed with the provider, not applied as it says',
      );
      const confirmed = await this.confirm(port, creds, notification, subject, true);
      return confirmed === 'confirmed' ? this.applyOnceItsOwn(port, notification, subject, confirmed) : confirmed;
    }
    const verified = await this.withFetchedRefunds(port, creds, notification);
    if (verified.kind === 'refund' && subject.payment?.status === 'pending' && verified.refunds.some((r) => r.status === 'completed')) {
      await this.settleBeforeRefunds(port, creds, subject.payment, verified);
    }
    return this.apply(port, verified, subject);
  }

  /**
   * A verified success not bound to its payment, after confirm(): if the provider's answer completed the
   * payment and made the reference the notification names the payment's own (a live push's signed callback
   * that outran the push's answer), the body is bound by record now and applied as it says — its receipt,
   * which the STK query does not carry, recorded (a refund needs it). Otherwise the confirmation stands.
   */
  private async applyOnceItsOwn(port: ProviderPort, notification: Actionable, subject: Subject, confirmed: InboundOutcome): Promise<InboundOutcome> {
    if (notification.kind !== 'payment' || notification.status !== 'completed' || !subject.payment) return confirmed;
    const payment = await this.em.fork().findOne(PaymentSchema, { id: subject.payment.id });
    if (payment?.status !== 'completed') return confirmed;
    const now = paymentSubject(payment);
    if (!this.namesItsRecordedReference(notification, now) || (await this.referenceConflict(port, notification, now))) return confirmed;
    await this.apply(port, notification, now);
    return confirmed;
  }

  /**
   * A refund of a payment that is still pending here: the provider's events come in no guaranteed order,
   * so the refund (a dashboard refund, say) can arrive before the payment's own success. A refunded
   * charge was paid, so the provider is asked about the payment first (outside any transaction) and its
   * answer applied, as the status sync would — the amount checked as always. If the payment is then
   * completed the refund is recorded on it at once; if it is not, the unit of work refuses the refund
   * without consuming the notification (UnitOfWork.providerRefund), and the provider sends it again.
   */
  private async settleBeforeRefunds(port: ProviderPort, creds: unknown, payment: Payment, notification: Actionable): Promise<void> {
    // A payment whose create answer was lost has no provider reference yet: the verified notification's
    // (checked as no other payment's: referenceConflict) names the provider object to ask about.
    const reference = notification.kind === 'refund' ? notification.payment : null;
    const named = reference && !reference.providerDataKey ? reference.providerRef : null;
    let answer;
    try {
      answer = await this.gateway.getPayment(payment, { ...paymentLookup(payment), providerRef: payment.providerRef ?? named ?? null }, creds);
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      // Not answered now: 5xx, so the provider sends the notification again. Created under another account than
      // the stored credentials': not asked (nor judged) there; it stays pending until its own account's are stored.
      if (err.providerCode === OTHER_ACCOUNT) {
        this.logger.warn({ provider: port.name, paymentId: payment.id, reason: err.message }, 'refund of a pending payment created on another provider account than the stored credentials; not asked about, not applied');
        throw new DomainError('PROVIDER_ERROR', `${port.name} refund event not applied: ${err.message}`);
      }
      throw new DomainError('PROVIDER_ERROR', `${port.name} could not be asked about the refunded payment; retry later`);
    }
    const outcome = await this.writer.applyPayment(payment.id, toUpdate(answer), `confirmed:${notification.label}`);
    this.logger.info({ provider: port.name, paymentId: payment.id, answered: answer.status, status: outcome.payment.status }, 'refund of a pending payment: the provider was asked about the payment first');
  }

  /**
   * A refund notification that resolves to no payment, naming it by a fact stored late (the capture id):
   * it may be of a payment whose capture we have not recorded yet (its answer lost, its event not yet
   * applied), or of a capture made outside the service. Guessing from the pending payments that could
   * own it would refuse, for the provider's whole resend window, every refund made elsewhere at a busy
   * merchant; so the provider is asked instead. The candidates are the merchants with a payment that
   * could own it (the provider's, pending, with a provider reference, without the fact, in the refund's
   * currency and not below its amount); with the credentials of the first of them that verify the
   * notification, the provider says which payment the fact belongs to (NotificationScheme.paymentOwning) —
   * outside any transaction, no connection held. Ours: that payment is the subject, and the notification
   * goes on as if the fact had been known (a refund of a payment still pending here settles the payment
   * first, settleBeforeRefunds). Not ours: acknowledged at once ('not-ours'). Not answered: 5xx, nothing
   * consumed, the provider sends it again. No candidate verifies it: null (an unknown reference) — unless
   * more could own it than are checked, then 409 (the owner may be among the rest).
   */
  private async ownerByAsking(
    port: ProviderPort, request: InboundRequest, notification: RefundOutcomeNotification,
  ): Promise<{ subject: Subject; verifiedWith: unknown } | 'not-ours' | null> {
    const { providerRef, providerDataKey } = notification.payment;
    if (!providerRef || !providerDataKey || !DATA_KEY.test(providerDataKey)) return null;
    const paymentOwning = port.notifications.paymentOwning;
    if (!paymentOwning) throw new Error(`${port.name} notifications name an owner that may be unrecorded but cannot ask the provider for it (paymentOwning)`);
    const reported = notification.refunds.find((r) => r.amount)?.amount ?? null;
    // More than any payment's amount can be (a bigint column): no payment of ours could own it.
    if (reported && reported.minor > MAX_BIGINT) return null;
    const em = this.em.fork();
    const rows = await em.getConnection().execute<{ merchant_id: string }[]>(
      `SELECT DISTINCT merchant_id FROM payments
        WHERE provider = ? AND status = 'pending' AND provider_ref IS NOT NULL AND provider_data->>'${providerDataKey}' IS NULL
          ${reported ? 'AND currency = ? AND amount_minor >= ?' : ''}
        LIMIT ?`,
      [port.name, ...(reported ? [reported.currency.toUpperCase(), reported.minor.toString()] : []), MAX_OWNER_CANDIDATES],
    );
    const log = { provider: port.name, label: notification.label, reference: clip(providerRef) };
    // Candidates whose credentials the provider would not show the object: another account's, or lacking the permission.
    let notVisibleTo = 0;
    for (const { merchant_id: merchantId } of rows) {
      const creds = await this.credentials.find(merchantId, port.name);
      if (creds === null || (await this.verify(port, request, creds, merchantId)) !== 'verified') continue;
      let owningRef: string | null | typeof OWNER_NOT_VISIBLE;
      try {
        owningRef = await paymentOwning.call(port.notifications, creds, providerRef);
      } catch (err) {
        // Not answered now: 5xx, nothing stored, so the provider sends the notification again.
        if (!(err instanceof ProviderError)) throw err;
        this.logger.warn({ ...log, merchantId, kind: err.kind }, 'refund notification for an unknown reference: the provider could not be asked whose it is; refused so that it is sent again');
        throw new DomainError('PROVIDER_ERROR', `${port.name} could not be asked about ${clip(providerRef)}; retry later`);
      }
      // The provider knows no such object for this merchant's account: another candidate's, or none of ours.
      if (owningRef === null) continue;
      if (owningRef === OWNER_NOT_VISIBLE) {
        notVisibleTo += 1;
        continue;
      }
      const payment = await resolvePayment(em, port.name, { ourId: null, providerRef: owningRef });
      if (!payment) {
        this.logger.info({ ...log, merchantId, owner: clip(owningRef) }, 'refund notification for a reference the provider says is not of a payment of ours; acknowledged and ignored');
        return 'not-ours';
      }
      this.logger.info({ ...log, merchantId, paymentId: payment.id }, 'refund notification for a reference not recorded yet: the provider says it is of this payment');
      const subject = paymentSubject(payment);
      // Verified for this merchant; another merchant's payment (one provider account) is verified with its own credentials.
      return { subject, verifiedWith: payment.merchantId === merchantId ? creds : null };
    }
    if (notVisibleTo > 0) {
      // A candidate may not read it — another account's, or its credentials lack the permission (the
      // provider does not say which): it may be that merchant's. An acknowledged refund is never sent
      // again, so it is refused, and the provider resends it (by then the capture may be recorded).
      this.logger.warn({ ...log, notVisibleTo }, 'refund notification for an unknown reference that some candidate merchants\' credentials may not read; refused so that the provider sends it again');
      throw new DomainError('PROVIDER_ERROR', `${port.name} ${clip(providerRef)} could not be read with the credentials of ${notVisibleTo} merchant(s) that could own it; send the notification again later`);
    }
    if (rows.length >= MAX_OWNER_CANDIDATES) {
      // More merchants could own it than are checked: the owner may be among the others, and an
      // acknowledged refund is never sent again. Refused, so the provider resends it (by then fewer
      // payments are pending, or the capture is known).
      this.logger.warn({ ...log, checked: rows.length }, 'refund notification for an unknown capture; more pending payments could own it than were checked; refused so that the provider sends it again');
      throw new DomainError('CONFLICT', `${port.name} ${clip(providerRef)} is not known here yet (more pending payments could own it than were checked): send the notification again later`);
    }
    return null;
  }

  /**
   * A notification sent to `addressee`'s endpoint about another merchant's payment (one provider account,
   * several merchants): acknowledged without effect when it is genuine for that endpoint, refused if not.
   */
  private async forAnotherMerchant(port: ProviderPort, request: InboundRequest, notification: Actionable, subject: Subject, addressee: string): Promise<InboundOutcome> {
    const merchantId = ourId(addressee);
    const creds = merchantId ? await this.credentials.find(merchantId, port.name) : null;
    if (creds === null || (await this.verify(port, request, creds, subject.subjectId)) !== 'verified') {
      this.logger.warn({ provider: port.name, label: notification.label, addressee }, 'notification verification failed');
      throw new DomainError('UNAUTHORIZED', CALLBACK_UNVERIFIED[port.name]);
    }
    this.logger.info({ provider: port.name, label: notification.label, addressee }, "another merchant's notification on a shared provider account; acknowledged and ignored");
    return 'ignored';
  }

  /** A verified notification that names its refunds only by a provider id: the provider lists them (outside any transaction). */
  private async withFetchedRefunds(port: ProviderPort, creds: unknown, notification: Actionable): Promise<Actionable> {
    if (notification.kind !== 'refund' || !notification.fetchRefundsOf || !port.notifications.fetchRefunds) return notification;
    try {
      return { ...notification, refunds: await port.notifications.fetchRefunds(creds, notification.fetchRefundsOf) };
    } catch (err) {
      // Not answered now: 5xx, so the provider sends the notification again.
      if (err instanceof ProviderError) throw new DomainError('PROVIDER_ERROR', `${port.name} could not list the refunds; retry later`);
      throw err;
    }
  }

  /**
   * The account the payment of `subject` was created on and the one the notification verified with `creds` is of
   * (NotificationScheme.accountOf, else the credentials' own), when both are recorded and differ; null otherwise
   * (a payment or credentials that recorded none are not judged, as the gateway does not judge them).
   */
  private async accountsDiffer(port: ProviderPort, request: InboundRequest, creds: unknown, subject: Subject): Promise<{ created: string; event: string } | null> {
    const scheme = port.notifications;
    const event = scheme.accountOf ? scheme.accountOf(request, creds) : providerAccountOf(creds);
    if (!event) return null;
    const payment = subject.payment ?? (subject.paymentId ? await this.em.fork().findOne(PaymentSchema, { id: subject.paymentId }) : null);
    const created = payment?.providerAccount ?? null;
    return created && created !== event ? { created, event } : null;
  }

  private async verify(port: ProviderPort, request: InboundRequest, creds: unknown, subjectId: string): Promise<Verification> {
    try {
      return await port.notifications.verify(request, creds, subjectId);
    } catch (err) {
      // The provider could not be asked to verify: not a verdict. 5xx, so the provider sends it again.
      if (err instanceof ProviderError) throw new DomainError('PROVIDER_ERROR', `${port.name} notification verification is unavailable; retry later`);
      throw err;
    }
  }

  private async resolve(port: ProviderPort, notification: Actionable): Promise<Subject | null> {
    const em = this.em.fork();
    const none = { payment: null, paymentId: null, refundId: null, refund: null, query: null };
    switch (notification.kind) {
      case 'payment': {
        const payment = await resolvePayment(em, port.name, notification.payment);
        return payment ? paymentSubject(payment) : null;
      }
      case 'refund': {
        for (const reported of notification.refunds) {
          const refund = reported.ourRefundId ? await resolveRefund(em, port.name, { ourId: reported.ourRefundId, providerRef: null }) : null;
          if (refund) {
            return paymentSubject(await em.findOneOrFail(PaymentSchema, { id: refund.paymentId }));
          }
        }
        const payment = await resolvePayment(em, port.name, notification.payment);
        return payment ? paymentSubject(payment) : null;
      }
      case 'reversal': {
        const refund = await resolveRefund(em, port.name, notification.refund);
        return refund ? { ...none, merchantId: refund.merchantId, subjectId: refund.id, paymentId: refund.paymentId, refundId: refund.id, refund } : null;
      }
      case 'status-report': {
        const query = await resolveStatusQuery(em, port.name, notification.query);
        return query ? { ...none, merchantId: query.merchant_id, subjectId: query.id, paymentId: query.payment_id, refundId: query.refund_id, query } : null;
      }
    }
  }

  /**
   * The provider reference the notification carries and the subject (resolve.ts) it must be the reference
   * of. `atItsAddress`: it came to the address bound to the subject for the answers to our requests about
   * it (NotificationScheme.answersOurRequestAbout).
   */
  private referenced(notification: Actionable, subject: Subject, atItsAddress = false): { claimed: string | null; about: ReferencedSubject } | null {
    switch (notification.kind) {
      case 'payment':
      case 'refund': {
        const { providerRef, providerDataKey } = notification.payment;
        return subject.payment ? { claimed: providerRef, about: { kind: 'payment', payment: subject.payment, providerDataKey } } : null;
      }
      case 'reversal':
        return subject.refund ? { claimed: notification.refund.providerRef, about: { kind: 'refund', refund: subject.refund, atItsAddress } } : null;
      case 'status-report':
        return subject.query ? { claimed: notification.query.providerRef, about: { kind: 'status-query', query: subject.query } } : null;
    }
  }

  /** Why the provider reference the notification carries is not its resolved subject's (resolve.ts), or null. */
  private async referenceConflict(port: ProviderPort, notification: Actionable, subject: Subject, atItsAddress = false): Promise<string | null> {
    const referenced = this.referenced(notification, subject, atItsAddress);
    return referenced ? referenceConflict(this.em.fork(), port.name, referenced.claimed, referenced.about) : null;
  }

  /**
   * Whether the notification names no provider reference for its subject (only our id ties it to it). A
   * refund notification naming no payment reference (a walletpay refund event without its capture link) is
   * tied by the provider's refund ids when each is recorded on one of this payment's refunds (refundsRecordedOn).
   */
  private async namesNoReference(notification: Actionable, subject: Subject): Promise<boolean> {
    const referenced = this.referenced(notification, subject);
    if (referenced === null || referenced.claimed !== null) return false;
    if (notification.kind !== 'refund' || !subject.paymentId || notification.refunds.length === 0) return true;
    return !(await refundsRecordedOn(this.em.fork(), subject.paymentId, notification.refunds.map((r) => r.providerRefundId)));
  }

  /** Whether the notification names the reference its subject recorded (stored, or a refund's earlier request's). */
  private namesItsRecordedReference(notification: Actionable, subject: Subject): boolean {
    const referenced = this.referenced(notification, subject);
    return referenced !== null && recordedAsItsOwn(referenced.claimed, referenced.about);
  }

  /** A verified notification: inbox, status writer and outbox in one unit of work; deliveries after commit. */
  private async apply(port: ProviderPort, notification: Actionable, subject: Subject): Promise<InboundOutcome> {
    const source = `callback:${notification.label}`;
    return this.writer.commit(async (uow): Promise<InboundOutcome> => {
      const refused = () => markRefusedInInbox(uow.tx, port.name, notification.dedupKey);
      const fresh = await recordInInbox(uow.tx, {
        provider: port.name,
        dedupKey: notification.dedupKey,
        paymentId: subject.paymentId,
        outcome: notification.label,
        windowMs: port.notifications.dedupWindowMs,
      });
      if (!fresh) {
        // The id is used, but a success after a failure with the same id (the operator's failure callback, then
        // the customer paid) is no repeat of what was applied: the charge of a failed payment is recorded (once per source).
        if (notification.kind === 'payment' && notification.status === 'completed') {
          const charged = await uow.chargedButFailed(subject.paymentId!, notification.amount, source, notification.receiptNumber ?? null);
          if (charged) return 'applied';
        }
        return 'duplicate';
      }
      switch (notification.kind) {
        case 'payment': {
          const outcome = await uow.payment(subject.paymentId!, paymentUpdateOf(notification), source);
          if (outcome.mismatch) await refused();
          return 'applied';
        }
        case 'refund':
          for (const refund of notification.refunds) {
            // Our id names our refund only with the provider refund it recorded (findOurRefund): a refund the
            // merchant's own call made with our id is not ours — recorded, never applied to ours.
            const ours = refund.status === 'pending' ? null : await findOurRefund(uow.tx, port.name, subject.paymentId!, refund);
            if (ours?.notOurs) {
              const note = `provider refund ${clip(refund.providerRefundId)} (${refund.status}) names this refund but is not its own (${ours.notOurs}): not applied to it`;
              await uow.refundReportNotOurs(ours.refund.id, refund.status, source, note);
              this.logger.warn({ provider: port.name, refundId: ours.refund.id, providerRefundId: clip(refund.providerRefundId), notOurs: ours.notOurs }, 'provider refund names our refund by our id but is not its own; not applied to it');
            }
            const bound = ours && !ours.notOurs ? ours.refund : null;
            if (refund.status === 'completed') {
              // Not ours: money went back at the provider all the same, taken as a refund made there (UnitOfWork.providerRefund).
              const raw = refund.raw ?? notification.raw;
              const outcome = await uow.providerRefund(subject.paymentId!, { providerRefundId: refund.providerRefundId, reported: refund.amount, ourRefundId: bound?.id ?? null, raw }, source);
              if (outcome?.mismatch) await refused();
            } else if (refund.status === 'failed' && bound) {
              // Only a refund of ours can fail: one made at the provider and failed there never moved money here.
              // One that had completed gives its amount back only for the provider's exact amount and currency.
              const outcome = await uow.refund(bound.id, { status: 'failed', failureReason: refund.failureReason ?? 'refused by the provider', reported: refund.amount, raw: refund.raw ?? notification.raw }, source);
              if (outcome.mismatch) await refused();
            }
          }
          return 'applied';
        case 'reversal': {
          if (notification.succeeded === null) {
            // A queue-timeout notice is no final outcome: the operator may still carry the request out and
            // send its result (failing the refund here would refuse that success while the customer got the
            // money back). Recorded; the refund stays pending until its result, or a status report the refund
            // sync asks for (and, without an outcome, its repeat of the reversal), settles it.
            this.logger.warn({ provider: port.name, refundId: subject.refundId }, 'reversal request timed out in the provider queue; outcome not known, the refund stays pending');
            const request = notification.refund.providerRef;
            const kept = await uow.refund(
              subject.refundId!,
              { status: 'failed', failureReason: `${port.name} sent a queue timeout notice for the reversal request`, reversal: true, raw: notification.raw, request, outcomeUnknown: true },
              source,
            );
            return kept.keptPending ? 'applied' : 'duplicate';
          }
          const outcome = await uow.refund(
            subject.refundId!,
            notification.succeeded
              ? {
                  status: 'completed',
                  reversal: true,
                  raw: notification.raw,
                  reported: await reversedAmount(uow.tx, subject.refundId!, notification.amount),
                  // The request it answers: the refund's reference if its acknowledgement is not recorded (yet).
                  providerRef: notification.refund.providerRef ?? undefined,
                }
              : { status: 'failed', failureReason: notification.failureReason, reversal: true, raw: notification.raw, request: notification.refund.providerRef },
            source,
          );
          if (outcome.mismatch) await refused();
          if (outcome.keptPending) this.keptPending(port, subject.refundId!, notification.refund.providerRef, notification.failureReason);
          return outcome.transitioned || outcome.mismatch || outcome.keptPending ? 'applied' : 'duplicate';
        }
        case 'status-report': {
          if (notification.queueTimeout) return this.queueTimeout(uow.tx, port, notification, subject);
          const about = await recordStatusReport(uow.tx, port.name, subject.query!.id, subject.merchantId, notification);
          // Only a reported completion moves money: a status report never fails or reverses a payment.
          if (!about || !notification.completed) return 'applied';
          const { receipt, amount } = notification.completed;
          const trigger = about.confirms ? `confirmed:${about.confirms}` : source;
          if (about.refundId) {
            // The answer to a reversal's confirmation: the provider's reversal transaction, with its amount — never
            // the payment's own charge, whose amount is the same (the writer refuses a report of the payment's receipt).
            const outcome = await uow.refund(about.refundId, { status: 'completed', reversal: true, reported: amount, transactionReceipt: receipt, raw: notification.raw }, trigger);
            if (outcome.mismatch) await refused();
            return 'applied';
          }
          if (!about.paymentId) return 'applied';
          // A report naming no receipt completes without one (reconciliation supplies it later).
          const outcome = await uow.payment(about.paymentId, { status: 'completed', reported: amount, providerRef: receipt ?? undefined, receiptNumber: receipt, raw: notification.raw }, trigger);
          if (outcome.mismatch) await refused();
          return 'applied';
        }
      }
    });
  }

  /**
   * A status query's queue-timeout notice is no answer: the provider may still carry the query out and send
   * its result (a refund's reversal report, a merchant's check-status). Recorded on the query, which stays
   * open so that result still applies; logged at warn. Until then a confirmation about the same transaction
   * is not asked again (askForConfirmation: it is open), as for a result that is late.
   */
  private async queueTimeout(tx: EntityManager, port: ProviderPort, notice: StatusReportNotification, subject: Subject): Promise<InboundOutcome> {
    const query = subject.query!;
    const recorded = await recordQueueTimeout(tx, query.id, notice);
    this.logger.warn(
      { provider: port.name, queryId: query.id, paymentId: query.payment_id, refundId: query.refund_id, recorded },
      recorded
        ? 'status query timed out in the provider queue; no answer yet: the query stays open for its result'
        : 'status query timed out in the provider queue after its result was applied; nothing changes',
    );
    return 'applied';
  }

  /** A refusal of a reversal sent again: recorded, not applied (UnitOfWork.refund); an operator may look at it. */
  private keptPending(port: ProviderPort, refundId: string, request: string | null, refusal: string | null): void {
    this.logger.warn(
      { provider: port.name, refundId, request, refusal },
      'reversal refused, but it was sent again and another of its requests may have reversed the payment: the refund stays pending (only a success settles it)',
    );
  }

  /**
   * An unverifiable notification (or a verified one not bound to its subject, see handle): what it says
   * is not believed, and it is not stored in the inbox, so a forged one cannot shadow the real one. The
   * provider is asked instead and its answer applied: for a payment its payment lookup (STK query, get
   * intent, get order), at once; for a reversal or a status report a status report of our own (the
   * reversal by the provider's id of our request, the status by the transaction our query named — never
   * by what the notification claims), applied when it arrives. `verifiedBody`: the notification's body is
   * the provider's (verified, just not bound to its subject), so the amount it states is the provider's.
   */
  private async confirm(port: ProviderPort, creds: unknown, notification: Actionable, subject: Subject, verifiedBody = false): Promise<InboundOutcome> {
    if (notification.kind === 'reversal') return this.confirmReversal(port, creds, notification, subject);
    if (notification.kind === 'status-report') return this.confirmStatusReport(port, creds, notification, subject);
    if (notification.kind !== 'payment' || !subject.payment) return this.notConfirmable(port, notification, subject);
    const payment = subject.payment;
    if (payment.status === 'failed' && notification.status === 'completed') return this.confirmChargeOfFailed(port, creds, notification, payment);
    if (payment.status !== 'pending') return 'confirmed';
    // A payment whose create answer was lost has no provider reference, and where creation cannot be
    // repeated (mobile money) nothing but that answer held it: the provider is asked about the reference the
    // notification names (it came to our payment's address) — never one another payment holds — and, asked
    // so, that reference becomes the payment's. The answer (mobile money's STK query) names no amount: it
    // reports ours, sound only for a push we recorded. So the body must be the provider's and state our
    // amount; an unverifiable body may name any paid push on the shortcode (made outside the service, or
    // by another merchant sharing it): nothing is asked, and the payment is left to reconciliation's pull,
    // which lists the charge with its amount under the payment's reference (lost-creation.ts).
    let named: string | null = null;
    if (!payment.providerRef && !port.capabilities.replayableCreate && notification.payment.providerRef) {
      const claimed = notification.amount;
      const unproven = !verifiedBody || claimed === null;
      const otherAmount = claimed !== null && (claimed.minor !== payment.amountMinor || claimed.currency.toUpperCase() !== payment.currency);
      const conflict = unproven || otherAmount ? null : await this.referenceConflict(port, notification, subject);
      if (unproven || conflict || otherAmount) {
        this.logger.warn(
          { provider: port.name, paymentId: payment.id, unproven, conflict, otherAmount },
          'notification names a reference the payment (it has none yet) may not be asked about; not applied, left to reconciliation',
        );
        return 'unconfirmed';
      }
      named = notification.payment.providerRef;
    }
    let answer;
    try {
      answer = await this.gateway.getPayment(payment, { ...paymentLookup(payment), providerRef: payment.providerRef ?? named }, creds);
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      const reason = err.providerCode === OTHER_ACCOUNT ? err.message : undefined;
      this.logger.warn({ provider: port.name, paymentId: payment.id, kind: err.kind, reason }, 'unverifiable notification: the provider could not be asked; the status sync will');
      return 'unconfirmed';
    }
    const update = toUpdate(answer);
    if (named) {
      const key = notification.payment.providerDataKey;
      Object.assign(update, { providerRef: answer.providerRef || named, ...(key ? { data: { ...update.data, [key]: named } } : {}) });
    }
    await this.writer.applyPayment(payment.id, update, `confirmed:${notification.label}`);
    this.logger.info({ provider: port.name, paymentId: payment.id, claimed: notification.status, confirmed: answer.status }, 'unverifiable notification settled by asking the provider');
    return 'confirmed';
  }

  /**
   * An unverifiable success for a payment recorded failed: the customer may have paid after all (an STK query
   * answered 1037, then the customer paid). The provider is asked, as for a pending payment; a completion it
   * confirms goes to the status writer, which keeps the payment failed and records, counts and logs the
   * charge (UnitOfWork.refuseChargeOfFailed). Not confirmed (or the provider could not be asked): recorded
   * in the audit and ignored — reconciliation still finds a real charge in the operator's settled transactions.
   */
  private async confirmChargeOfFailed(port: ProviderPort, creds: unknown, notification: PaymentOutcomeNotification, payment: Payment): Promise<InboundOutcome> {
    let answered = 'had no reference to be asked about';
    if (payment.providerRef) {
      try {
        const answer = await this.gateway.getPayment(payment, paymentLookup(payment), creds);
        if (answer.status === 'completed') {
          await this.writer.applyPayment(payment.id, toUpdate(answer), `confirmed:${notification.label}`);
          return 'confirmed';
        }
        answered = `answered ${answer.status}`;
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        answered = err.providerCode === OTHER_ACCOUNT ? `was not asked (${err.message})` : `could not be asked (${err.kind})`;
      }
    }
    const note = `an unverifiable report that the payment recorded failed was paid; the provider ${answered}: not applied`;
    await this.writer.commit((uow) => uow.unconfirmedReport(payment.id, 'completed', `unconfirmed:${notification.label}`, note));
    this.logger.warn({ provider: port.name, paymentId: payment.id, answered }, 'unverifiable success for a payment recorded failed, not confirmed by the provider; recorded, not applied');
    return 'unconfirmed';
  }

  private notConfirmable(port: ProviderPort, notification: Actionable, subject: { subjectId: string }): InboundOutcome {
    this.logger.warn({ provider: port.name, label: notification.label, subjectId: subject.subjectId }, 'unverifiable notification cannot be confirmed with the provider; not applied');
    return 'unconfirmed';
  }

  /** An unverifiable reversal result: the provider reports on our reversal request (by its id for it); the report completes the refund. */
  private async confirmReversal(port: ProviderPort, creds: unknown, notification: ReversalResultNotification, subject: Subject): Promise<InboundOutcome> {
    const refund = await this.em.fork().findOneOrFail(RefundSchema, { id: subject.refundId! });
    if (refund.status !== 'pending') return 'confirmed';
    // The result outran our record of the request's acknowledgement: 5xx, so the operator sends it again.
    if (!refund.providerRef) throw new DomainError('PROVIDER_ERROR', `${port.name} reversal result arrived before its request was recorded; retry later`);
    return this.askForStatusReport(port, creds, notification, { merchantId: subject.merchantId, paymentId: refund.paymentId, refundId: refund.id, code: refund.providerRef }, { requestRef: refund.providerRef });
  }

  /**
   * An unverifiable status report: only one claiming a completion could change anything. The provider
   * is asked again about the transaction our query named; a confirmation's own answer is never
   * confirmed again (the scheme verifies those, see Verification).
   */
  private async confirmStatusReport(port: ProviderPort, creds: unknown, notification: StatusReportNotification, subject: Subject): Promise<InboundOutcome> {
    const query = subject.query!;
    if (!notification.completed || query.confirms) return this.notConfirmable(port, notification, subject);
    const payment = query.payment_id ? await this.em.fork().findOne(PaymentSchema, { id: query.payment_id }) : null;
    // A payment recorded failed is asked about too: its confirmed completion is a charge of a failed payment (the writer says so).
    if (payment && payment.status !== 'pending' && payment.status !== 'failed') return 'confirmed';
    const transactionId = payment?.receiptNumber ?? query.code;
    return this.askForStatusReport(port, creds, notification, { merchantId: query.merchant_id, paymentId: query.payment_id, refundId: null, code: transactionId }, { transactionId });
  }

  /** Sends a confirmation query (see confirmation-queries.ts); its answer arrives as a status report and is applied then. */
  private async askForStatusReport(
    port: ProviderPort,
    creds: unknown,
    notification: Actionable,
    about: { merchantId: string; paymentId: string | null; refundId: string | null; code: string },
    target: { transactionId: string } | { requestRef: string },
  ): Promise<InboundOutcome> {
    const operations = port.operations;
    if (!operations?.requestStatusReport) return this.notConfirmable(port, notification, { subjectId: about.refundId ?? about.paymentId ?? about.code });
    const queryId = randomUUID();
    try {
      const sent = await askForConfirmation(this.em, { id: queryId, provider: port.name, ...about, confirms: notification.label }, () =>
        operations.requestStatusReport!(creds, { queryId, ...target }));
      if (sent === 'open') return 'confirming';
    } catch (err) {
      if (!(err instanceof ProviderError)) throw err;
      this.logger.warn({ provider: port.name, label: notification.label, kind: err.kind }, 'unverifiable notification: the provider could not be asked; not applied');
      return 'unconfirmed';
    }
    this.logger.info({ provider: port.name, label: notification.label, queryId, paymentId: about.paymentId, refundId: about.refundId }, 'unverifiable notification: the provider was asked to report; its answer will be applied');
    return 'confirming';
  }
}

/** A report that moves money carries the provider's amount to the writer's integrity check; a failure moves none. */
function paymentUpdateOf(n: PaymentOutcomeNotification): PaymentUpdate {
  return {
    status: n.status,
    ...(n.status === 'completed' ? { reported: n.amount } : {}),
    providerRef: n.providerRef ?? undefined,
    receiptNumber: n.receiptNumber ?? null,
    failureReason: n.failureReason ?? null,
    raw: n.raw,
    data: n.data,
  };
}

/** The amount a reversal result reports; 'as-requested' is the refund's own amount (see ReversalResultNotification). */
async function reversedAmount(tx: EntityManager, refundId: string, amount: ReversalResultNotification['amount']): Promise<Money | null> {
  if (amount !== 'as-requested') return amount;
  const refund = await tx.findOneOrFail(RefundSchema, { id: refundId });
  return { minor: refund.amountMinor, currency: refund.currency };
}
