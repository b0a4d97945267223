import type { CheckStatusAck, CreatePaymentBody, Provider } from '../../contract/index.js';

/**
 * The seams the domain declares and others implement. Providers implement ProviderPort (one folder per
 * provider under server/providers, listed in server/providers/registry.ts); jobs/ implements
 * DeliveryQueue. This file imports nothing but the contract's types, so a provider folder may import
 * it and nothing else of the domain.
 */

/** What the domain needs from the job runner; implemented in jobs/ on Agenda. */
export interface DeliveryQueue {
  /**
   * Called after a transaction committed `count` deliveries due now (new outbox rows, deliveries put
   * back in the queue). Returns without waiting for the workers to hear of them; if they never do, the
   * sweeper finds the rows.
   */
  enqueue(count: number): Promise<void>;
}

/* ------------------------------------------------------------------------------------------------
 * Values crossing the provider seam
 * ---------------------------------------------------------------------------------------------- */

export type ServicePaymentStatus = 'pending' | 'completed' | 'failed';

export interface Money {
  /** Integer minor units (ISO 4217 exponent of `currency`). */
  minor: bigint;
  /** Upper-case ISO 4217 code. */
  currency: string;
}

export interface ProviderPaymentResult {
  /** The provider's id for the payment: intent id, order id, CheckoutRequestID. */
  providerRef: string;
  /** Already mapped through the provider's status table. */
  status: ServicePaymentStatus;
  /** The amount the provider reports for this payment, when its answer carries one (integrity check). */
  amount?: Money | null;
  nextAction?: { type: 'redirect'; url: string } | null;
  failureReason?: string | null;
  /** e.g. the mobile-money receipt number once known, the walletpay capture id. */
  receiptNumber?: string | null;
  /** Facts later calls need (capture id, customer id, …), merged into payment.provider_data. */
  data?: Record<string, unknown>;
  /** The raw provider response with secrets removed; shown as `provider_response`. */
  raw: unknown;
  /**
   * What makes the provider's object another than the payment was created as, besides its amount (walletpay:
   * several purchase units or captures, another payee, another intent). Set, the report is refused as an
   * integrity mismatch, as one of another amount is: nothing moves, and a capture is not sent.
   */
  integrityIssue?: string | null;
  /**
   * Refunds the provider lists with the payment (walletpay: its capture's, on the order). When this report
   * completes a pending payment, the completed ones are recorded as refunds made at the provider
   * (UnitOfWork.providerRefund, as their refund event would be).
   */
  refunds?: RefundReport[];
  /**
   * Set by abandonPayment on a failed answer when that cancel alone ended the object (ours, sent now or at
   * an earlier attempt), nothing having failed it before: why it failed is the canceller's to say (an
   * abandoned checkout's reason). Unset, it failed on its own account (a decline, a cancel by someone else)
   * and failureReason says how.
   */
  endedByOurCancel?: boolean;
}

export interface ProviderRefundResult {
  providerRef: string | null;
  status: 'pending' | 'completed' | 'failed';
  /** The amount the provider reports as refunded by this refund, when its answer carries one. */
  amount?: Money | null;
  failureReason?: string | null;
  raw: unknown;
}

/** What the provider must know about the payment being created. */
export interface CreatePaymentInput {
  paymentId: string;
  /** 12-character unique reference (bill / account reference). */
  reference: string;
  amount: Money;
  /** Derived from the payment id: a retried call can never double-charge. */
  idempotencyKey: string;
  /** The provider's request fields as its normaliseRequest returned them, plus what the domain added (saved card). */
  fields: Record<string, unknown>;
}

export interface PaymentLookup {
  paymentId: string;
  /** The payment's amount: what we asked the provider to charge (a lookup whose answer names none reports it). */
  amount?: Money;
  providerRef: string | null;
  reference: string;
  providerData: Record<string, unknown>;
}

export interface RefundInput {
  refundId: string;
  payment: PaymentLookup & { amount: Money; receiptNumber: string | null };
  /** Always sent as it is, never "what remains": the provider refunds exactly this or refuses. */
  amount: Money;
  idempotencyKey: string;
}

/** What the refund sync knows of one of our refunds when it asks the provider about it. */
export interface RefundLookup {
  refundId: string;
  /** The provider's id of the refund; null when the answer to our request was lost. */
  providerRef: string | null;
  payment: PaymentLookup;
}

/** A refund as the provider lists it (made by the service or directly at the provider). */
export interface ProviderRefundRecord {
  providerRef: string;
  status: ProviderRefundResult['status'];
  /** null when the provider's amount is no exact amount of ours (then it is refused like a wrong one). */
  amount: Money | null;
  /** Our refund id when the service made it (sent as metadata). */
  ourRefundId: string | null;
  /** The provider's reason, when the refund failed. */
  failureReason: string | null;
  raw: unknown;
}

export interface SavedCardDetails {
  paymentMethodId: string;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

/** A field-level problem with a merchant's request (the domain answers 422 with these). */
export interface RequestIssue {
  field: string;
  issue: string;
}

/**
 * Why stored credentials cannot be used for an operation (ProviderPort.refundCredentialsIssue,
 * ProviderOperations.statusReportCredentialsIssue): `merchant` — a field of them the merchant did not store
 * (`field` names it within the provider's credentials);
 * `operator` — something this service's own configuration lacks for them (e.g. the operator certificate a
 * password is encrypted with), the operator's to fix, neither the merchant's doing nor a provider's refusal.
 */
export type CredentialsIssue = { merchant: RequestIssue } | { operator: string };

/** Classified provider failure. `indeterminate` means the outcome is unknown (timeout, 5xx): keep pending. */
export const PROVIDER_ERROR_KINDS = ['declined', 'invalid_request', 'auth', 'rate_limited', 'unavailable', 'indeterminate'] as const;
export type ProviderErrorKind = (typeof PROVIDER_ERROR_KINDS)[number];

/**
 * Provider-neutral reasons the domain acts on: capture before approval, capture twice; `reapprove` — the
 * buyer must approve again (with another funding source) before a capture can succeed; `gone` — the
 * provider says the payment it created for us (its reference) does not exist (any more), e.g. a wallet
 * order that expired unapproved (see ProviderCapabilities.expiresUnapprovedAfterMs); `amount_mismatch` — the
 * provider's object is for another amount or currency than the payment, so nothing was sent to move money
 * (the error's result is the object as the provider reported it); `not_sent` — a request the operation
 * makes first failed (e.g. walletpay's read of the order before its capture), so the request that would
 * move money was never sent: nothing happened, and it may be sent again.
 */
export type ProviderErrorReason = 'not_approved' | 'already_captured' | 'gone' | 'reapprove' | 'amount_mismatch' | 'not_sent';

export class ProviderError extends Error {
  constructor(
    readonly provider: Provider,
    readonly kind: ProviderErrorKind,
    message: string,
    /** The provider's own code (decline_code, issue, errorCode). */
    readonly providerCode?: string,
    /** A result the provider returned along with the error (e.g. the declined intent). */
    readonly result?: ProviderPaymentResult,
    readonly reason?: ProviderErrorReason,
    /** The merchant's request field the provider refused (`amount`, `currency`), when it named one of ours. */
    readonly field?: 'amount' | 'currency',
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

/**
 * A provider's answer about something else than was asked (another intent, order, capture or refund: a
 * cache or proxy mixing answers up): never applied. `unavailable` for a read (nothing can be concluded;
 * asked again later), `indeterminate` for a write's answer (the write may have happened: outcome unknown).
 */
export function answerAboutSomethingElse(provider: Provider, kind: 'unavailable' | 'indeterminate', what: string): ProviderError {
  return new ProviderError(provider, kind, `${provider} answered about something else than was asked: ${what}`);
}

/* ------------------------------------------------------------------------------------------------
 * Inbound notifications
 * ---------------------------------------------------------------------------------------------- */

/** An inbound provider request exactly as received. */
export interface InboundRequest {
  /** Path below /v1/webhooks/<provider>, e.g. '' or '/reversal/result'. */
  subpath: string;
  headers: Record<string, string | undefined>;
  rawBody: Buffer;
  body: unknown;
  query: Record<string, string | undefined>;
  sourceIp: string;
}

/**
 * How to find what a notification is about: our id stamped at the provider first (metadata, custom_id,
 * the callback URL's `ref`), then the provider's reference. `providerDataKey` names a fact the provider
 * stored in payment.provider_data at creation (e.g. a capture id) that the reference may also be.
 */
export interface PaymentReference {
  ourId: string | null;
  providerRef: string | null;
  providerDataKey?: string;
}

export interface RefundReference {
  ourId: string | null;
  providerRef: string | null;
}

/** Facts common to every actionable notification. */
interface NotificationBase {
  /** The provider's id for this message: the inbox de-duplicates by (provider, dedupKey). */
  dedupKey: string;
  /** What the provider calls it (event type, callback kind): audit trigger and logs. */
  label: string;
  raw: unknown;
}

/** A payment reached an outcome (card intent succeeded, wallet capture completed, push answered). */
export interface PaymentOutcomeNotification extends NotificationBase {
  kind: 'payment';
  payment: PaymentReference;
  status: ServicePaymentStatus;
  amount: Money | null;
  providerRef?: string | null;
  receiptNumber?: string | null;
  failureReason?: string | null;
  data?: Record<string, unknown>;
}

/** One refund as a provider reports it (made by the service or directly at the provider). */
export interface RefundReport {
  providerRefundId: string;
  /**
   * Ours when the service made it (stamped as metadata / custom_id). A provider that reports refunds this
   * way must echo it for every refund the service made: a report without it (and without a provider id
   * we stored) is taken as a refund made at the provider, never matched to ours by amount.
   */
  ourRefundId: string | null;
  status: 'pending' | 'completed' | 'failed';
  amount: Money | null;
  failureReason?: string | null;
  /** This refund's own raw object, when the provider sent or listed it separately. */
  raw?: unknown;
}

/** Refunds of a payment made or settled at the provider. */
export interface RefundOutcomeNotification extends NotificationBase {
  kind: 'refund';
  payment: PaymentReference;
  refunds: RefundReport[];
  /**
   * Set when the notification names its refunds only by this provider id (a refunded charge): once it
   * is verified, the pipeline asks the provider (NotificationScheme.fetchRefunds) before the unit of work.
   */
  fetchRefundsOf?: string;
  /**
   * Set when `payment` names the payment only by a fact the service may not have stored yet (walletpay:
   * the capture id, stored once the capture's answer, its event or the status sync is applied). Such a
   * notification that resolves to no payment is not taken for another's while a payment that could own
   * it is pending here (the provider's, with a provider reference, without that fact, in the refund's
   * currency and not below its amount): with the credentials of that payment's merchant, when they
   * verify it, the provider is asked whose it is (NotificationScheme.paymentOwning, required with this
   * flag). See InboundPipeline.ownerByAsking.
   */
  ownerMayBeUnrecorded?: boolean;
}

/** The answer to a reversal (a full refund that arrives asynchronously), or its queue timeout. */
export interface ReversalResultNotification extends NotificationBase {
  kind: 'reversal';
  refund: RefundReference;
  /** null: timed out in the provider's queue, nothing decided (the refund stays pending). */
  succeeded: boolean | null;
  /**
   * The reversed amount as the provider reports it; 'as-requested' when it confirms the whole amount we
   * asked to reverse without naming it (e.g. "already reversed": reversals are of whole transactions).
   */
  amount: Money | 'as-requested' | null;
  failureReason: string | null;
}

/** The answer to a status query we sent (see ProviderOperations.requestStatusReport), or its timeout. */
export interface StatusReportNotification extends NotificationBase {
  kind: 'status-report';
  /** Our query id (stamped in the result URL) or the provider's id of the query. */
  query: { ourId: string | null; providerRef: string | null };
  resultCode: string;
  /**
   * A queue-timeout notice, not an answer: the query expired in the provider's queue, which may still
   * carry it out and send its result ("timeout callbacks are not the same as final failure"). Recorded;
   * the query stays open for that result.
   */
  queueTimeout: boolean;
  /** Set when the provider reports the transaction completed; `receipt` null when the report names none. */
  completed: { receipt: string | null; amount: Money | null } | null;
}

export interface IgnoredNotification {
  kind: 'ignored';
  label: string;
  reason: string;
}

export type ProviderNotification =
  | PaymentOutcomeNotification
  | RefundOutcomeNotification
  | ReversalResultNotification
  | StatusReportNotification
  | IgnoredNotification;

/**
 * The verdict of a provider's scheme: `verified` — apply as it says; `invalid` — a signature or token
 * that does not match: refuse (401); `unverifiable` — the provider sent nothing to check (e.g. a live
 * operator callback without a signature): never applied as it says, the pipeline asks the provider —
 * its payment lookup for a payment, a status report (ProviderOperations.requestStatusReport) for a
 * reversal or a status report. A status report answers a question we asked; the scheme verifies it by
 * what binds it to that question (e.g. a token in the address only the provider was given).
 */
export type Verification = 'verified' | 'invalid' | 'unverifiable';

/** Thrown by parse for a body that is not the provider's notification at all (400). */
export class MalformedNotificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedNotificationError';
  }
}

export interface NotificationScheme<C> {
  /**
   * Checks that need no merchant and cost nothing (the source address allowlist, the shape of the
   * signature headers): the reason to refuse (401), or null.
   */
  screen?(request: InboundRequest): string | null;
  /**
   * Whether `sourceIp` (the client address as TRUST_PROXY defines it) is one of the provider's own, whose
   * callbacks the per-address callback limit (CALLBACK_RATE_LIMIT_PER_MINUTE) does not count: for a provider
   * that does not send a refused callback again, a 429 at its peak would lose the result. A pure check of the
   * address, asked before anything is counted or looked up. Absent: every address is counted (a provider that
   * retries on 429 slows down instead).
   */
  uncountedSource?(sourceIp: string): boolean;
  /** Reads the body into a notification; throws MalformedNotificationError. */
  parse(request: InboundRequest): ProviderNotification;
  /**
   * The merchant whose endpoint the callback was sent to, when its URL names one (null otherwise). A
   * provider account several merchants share sends every endpoint of the account every event, each
   * signed for that endpoint: one that resolves to another merchant is verified with the addressee's
   * credentials and acknowledged without effect (that merchant's own endpoint receives it too).
   */
  addressee?(request: InboundRequest): string | null;
  /**
   * Verifies with the credentials of the merchant the notification resolved to. `subjectId` is our id
   * of the resolved payment / refund / query (schemes that bind a token to it check it). A provider that
   * could not be asked throws ProviderError (the pipeline answers 5xx and the provider retries).
   */
  verify(request: InboundRequest, creds: C, subjectId: string): Promise<Verification>;
  /**
   * Whether the request came to the address we gave the provider for its answers to our own requests
   * about `subjectId` (bound to it by a token only we and the provider know): then it answers one of
   * those requests, whatever provider reference it names. Checked apart from verify, which may rest on a
   * signature over the body alone. Absent: no such address.
   */
  answersOurRequestAbout?(request: InboundRequest, creds: C, subjectId: string): boolean;
  /**
   * Whether the request is bound to `subjectId` by something only we and the provider know (a token in
   * its address), for a scheme that takes our id from an unsigned part of the request (mobilemoney's
   * `?ref=`) while its signature covers the body only. An unbound, verified notification that names a
   * reference its subject has not recorded proves only that the provider wrote it, not that it is about
   * our request: it is confirmed with the provider like an unverifiable one. Absent: our id is covered by
   * the verification (it is inside the signed body).
   */
  boundToSubject?(request: InboundRequest, creds: C, subjectId: string): boolean;
  /**
   * The provider account (PROVIDER_ACCOUNT_FIELD's form, with its mode) a notification verified with
   * `creds` is of, when the notification says so itself (cardpay: an event's livemode, or the connected
   * account it names); null when its account is not known. Absent: the credentials' account
   * (providerAccountOf). The pipeline applies nothing of another account than its payment was created on.
   */
  accountOf?(request: InboundRequest, creds: C): string | null;
  /** The refunds of `ref` as the provider lists them, oldest first (see RefundOutcomeNotification.fetchRefundsOf). */
  fetchRefunds?(creds: C, ref: string): Promise<RefundReport[]>;
  /**
   * The provider reference (payment.provider_ref) of the payment that `ref` — the fact a notification
   * named (see RefundOutcomeNotification.ownerMayBeUnrecorded) — belongs to, as the provider answers with
   * these credentials; null when the provider knows no such object; OWNER_NOT_VISIBLE when it exists but
   * these credentials may not read it (another account's, or credentials lacking the permission: the
   * provider does not say which). A provider that could not be asked throws ProviderError (the pipeline
   * answers 5xx and the provider retries).
   */
  paymentOwning?(creds: C, ref: string): Promise<string | null | typeof OWNER_NOT_VISIBLE>;
  /** How long a notification id is remembered: null = for ever; otherwise a repeat after it is applied again. */
  dedupWindowMs: number | null;
}

/* ------------------------------------------------------------------------------------------------
 * The provider port
 * ---------------------------------------------------------------------------------------------- */

export interface ProviderCapabilities {
  /** Payments complete with a merchant capture after the buyer approved (capturePayment). */
  capture: boolean;
  /** Refunds may be partial; false = the full amount only, one at a time (reversals). */
  partialRefunds: boolean;
  /**
   * Creation may be repeated with the same idempotency key and answers the original result: the status
   * sync re-sends a creation whose answer was lost. false: it finds the payment by reconciliation.
   */
  replayableCreate: boolean;
  /**
   * How long after the first request a repeated create is still answered with the original result: the
   * provider's idempotency-key retention (cardpay: 24 h), when a repeat after it would be a new payment
   * that charges again. null: no limit applies (a repeated create cannot charge by itself, or creation
   * is not replayable at all). See lost-creation.ts.
   */
  createReplayWindowMs: number | null;
  /**
   * A payment the buyer has not approved (or authenticated) this long after its creation is over. Where the
   * provider lets it expire (walletpay: PayPal's order), the provider then no longer knows its reference
   * (ProviderError reason `gone`): it is failed, nothing having been charged. Where the provider would keep
   * it payable for days (cardpay: an intent awaiting 3-D Secure, confirmable with its client secret), the
   * service ends it: the status sync's check due then cancels it (abandonPayment) while it still awaits the
   * customer (abandoned-checkout.ts). Either way the schedule keeps a check due just after it
   * (nextExpiryCheck). Absent: payments do not expire so, and `gone` proves nothing.
   */
  expiresUnapprovedAfterMs?: number;
  /**
   * The longest such a payment can still live at the provider (walletpay: PayPal keeps an order 3 h by
   * default, 3 h more once the buyer is sent to approve it, and an account can be set to 24/48/72 h): while
   * it is still there, it is checked again every expiresUnapprovedAfterMs until this long after creation.
   */
  livesUnapprovedAtMostMs?: number;
}

/** What a provider's transaction list answered (ProviderOperations.listTransactions). */
export interface ListedTransactions {
  transactions: { receipt: string; reference: string | null; amount: Money }[];
  /** `receipt` when the entry names one; `type` the provider's transaction type, when that is why it was skipped. */
  skipped: { receipt: string | null; reason: 'unreadable' | 'not_a_payment'; type?: string }[];
}

/** Operations some providers offer beyond the payment lifecycle (mobile money: status report, pull). */
export interface ProviderOperations<C> {
  /**
   * Asks the provider to report a transaction's status asynchronously; the answer arrives as a
   * `status-report` notification naming `queryId`. The transaction is named by the provider's id for it
   * (`transactionId`, e.g. a receipt) or by the provider's id of a request we made (`requestRef`, e.g.
   * a reversal's), which is how an unverifiable reversal result is confirmed (see NotificationScheme.verify).
   */
  requestStatusReport?(creds: C, input: { queryId: string } & ({ transactionId: string } | { requestRef: string })): Promise<{ providerQueryRef: string; ack: CheckStatusAck }>;
  /**
   * Why the merchant's stored credentials cannot send a status report request at all (CredentialsIssue),
   * asked before it is recorded or sent; null: they can. Absent: any stored credentials can.
   */
  statusReportCredentialsIssue?(creds: C): CredentialsIssue | null;
  /**
   * Whether `code` is of the kind the provider names one of our payment requests by (mobilemoney: a
   * CheckoutRequestID), which its status report cannot look up: it is answered from the payment it names.
   */
  namesPaymentRequest?(code: string): boolean;
  /**
   * The provider_data key that keeps the provider's id for one of our payment requests (mobilemoney:
   * 'checkoutRequestId'), by which a status check also finds the payment once provider_ref is its receipt.
   */
  paymentRequestKey?: string;
  /**
   * Settled incoming transactions in a window, for reconciliation; `skipped`: listed entries that settle
   * nothing (unreadable, or not a customer payment), set aside so the others still do.
   */
  listTransactions?(creds: C, window: { since: Date; until: Date }): Promise<ListedTransactions>;
  /** One-time registration for listTransactions; returns issues when the request lacks what it needs. */
  registerTransactionFeed?(creds: C, input: Record<string, string | undefined>): Promise<{ issues: RequestIssue[] } | { result: Record<string, unknown> }>;
}

/** A payment method as the provider has it, read before anything is made for saving it. */
export interface VaultPaymentMethod {
  /** The provider's type of payment method (`card`, `us_bank_account`, `sepa_debit`…): only a card is saved. */
  type: string;
  /** The card, when it is one. */
  card: SavedCardDetails | null;
  /** The customer it is attached to, and the saved card that customer was made for (createCustomer's `savedCardId`), if any. */
  customer: { id: string; savedCardId: string | null } | null;
}

/** Saved cards: a provider customer with the payment method attached. */
export interface CardVault<C> {
  /** The payment method `paymentMethodId` names (a test token reads as a fresh one, attached to no customer). */
  paymentMethod(creds: C, paymentMethodId: string): Promise<VaultPaymentMethod>;
  /** A customer made for the saved card `savedCardId`, which it records (customersOfSavedCard finds it by it). */
  createCustomer(creds: C, input: { email?: string; name?: string; savedCardId: string; idempotencyKey: string }): Promise<{ customerId: string }>;
  attachPaymentMethod(creds: C, input: { paymentMethodId: string; customerId: string; idempotencyKey: string }): Promise<SavedCardDetails>;
  /**
   * The customers made for the saved card `savedCardId` that the provider can find (a search index may
   * trail its writes: a customer made a moment ago may be missing), most recent first.
   */
  customersOfSavedCard(creds: C, savedCardId: string): Promise<string[]>;
  /** The cards attached to the customer. */
  cardsOf(creds: C, customerId: string): Promise<SavedCardDetails[]>;
  /** Deletes a customer (one that is gone already counts as deleted). */
  deleteCustomer(creds: C, customerId: string): Promise<void>;
  /**
   * Detaches the payment method from its customer. 'detached': it is attached to no customer now (detached
   * now, or it already was: not attached). 'missing': the credentials' account has no such payment method —
   * proof that it is detached only if that account is the one the card was saved under.
   */
  detachPaymentMethod(creds: C, paymentMethodId: string): Promise<'detached' | 'missing'>;
  /** The request fields that charge a saved card off-session. */
  chargeFields(card: { customerRef: string; paymentMethodToken: string }): Record<string, unknown>;
}

/**
 * One provider. Adapters are stateless: they get the merchant's decrypted credentials per call and
 * return normalised results; the domain owns persistence, the state machine and the inbox.
 */
export interface ProviderPort<C = unknown> {
  readonly name: Provider;
  readonly capabilities: ProviderCapabilities;
  /** Credential fields that are not secret: shown as given in `config_summary`; every other one is masked. */
  readonly publicCredentialFields: readonly string[];
  /**
   * Credential fields that name an address of this service, each with the routes below
   * `${PUBLIC_BASE_URL}/v1/webhooks/<provider>` it may be. Checked when stored (CredentialsService).
   */
  readonly serviceAddressFields?: Readonly<Record<string, readonly string[]>>;
  /**
   * The provider's own request rules (currency, limits, phone format, required fields), after the
   * domain checked the amount. Returns the fields the provider's createPayment reads, or the issues.
   */
  normaliseRequest(body: CreatePaymentBody, amount: Money): { fields: Record<string, string | undefined> } | { issues: RequestIssue[] };
  /** Why the provider cannot refund `amount` (an issue for the request's amount field), or null; absent: any amount it can charge. */
  refundAmountIssue?(amount: Money): string | null;
  /**
   * Why the provider cannot be asked to refund this completed payment yet (the message of a 409 CONFLICT:
   * nothing is written, nothing sent), or null; absent: a provider reference is all a refund needs.
   */
  refundConflict?(payment: { providerRef: string | null; receiptNumber: string | null }): string | null;
  /**
   * Why the merchant's stored credentials cannot be used to refund at all (CredentialsIssue), asked
   * before a refund is reserved, so that nothing is written or sent; null: they can. Absent: any stored
   * credentials can.
   */
  refundCredentialsIssue?(creds: C): CredentialsIssue | null;
  createPayment(creds: C, input: CreatePaymentInput): Promise<ProviderPaymentResult>;
  getPayment(creds: C, lookup: PaymentLookup): Promise<ProviderPaymentResult>;
  /**
   * A payment whose creation's answer was lost (no provider reference yet), found at the provider by our
   * payment id (sent with the create). null: the provider has no payment of ours by that id. Absent: the
   * provider cannot find a payment without its own reference.
   */
  findPayment?(creds: C, lookup: PaymentLookup): Promise<ProviderPaymentResult | null>;
  refundPayment(creds: C, input: RefundInput): Promise<ProviderRefundResult>;
  /**
   * The refund sync's question: one of our refunds as the provider has it now — by the provider's id,
   * or without one by our refund id (sent with the request). null: the provider has no such refund (our
   * request never reached it). Absent: refunds cannot be looked up (the sync asks for a status report).
   */
  findRefund?(creds: C, lookup: RefundLookup): Promise<ProviderRefundResult | null>;
  /**
   * Captures an approved payment. `providerData`: the facts earlier answers stored (e.g. the approval link,
   * how many captures were refused). A refusal that sends the buyer back to approve again (their funding
   * source was declined) is reason `reapprove`, with a pending result carrying the approval link; one that
   * ends the payment is kind `declined`, with a failed result. `amount`: the payment's; a provider whose
   * object's amount can change after creation refuses to capture another one (reason `amount_mismatch`).
   * A refusal as not approved may carry the provider's object as it stood (result), so it is not read again.
   */
  capturePayment?(creds: C, input: { providerRef: string; idempotencyKey: string; providerData: Record<string, unknown>; amount: Money }): Promise<ProviderPaymentResult>;
  /**
   * A payment we recorded `failed` whose provider object may still be completed later (cardpay: a declined
   * intent stays confirmable in requires_payment_method): cancelled at the provider so that nothing can
   * charge it any more. Also a pending one still awaiting its customer past expiresUnapprovedAfterMs (an
   * abandoned checkout). Answers the payment as the provider has it afterwards — failed (cancelled;
   * endedByOurCancel when this cancel alone ended it),
   * completed when it had been charged after all (a late success), or pending when the provider refused to
   * cancel it while it is under way. Absent: nothing to cancel.
   */
  abandonPayment?(creds: C, input: { providerRef: string; idempotencyKey: string }): Promise<ProviderPaymentResult>;
  /**
   * Completes credentials before they are stored (e.g. registers our callback URL, keeps its secret).
   * `previous`: the merchant's credentials for this provider stored now, if any.
   */
  prepareCredentials?(merchantId: string, creds: C, previous: C | null): Promise<PreparedCredentials<C>>;
  /**
   * Undoes at the provider what was set up there for the merchant's credentials (e.g. deletes our webhook
   * endpoint), once `creds` were deleted here: events sent to it could only be refused from now on. Best
   * effort: an error is logged as a warning and the removal stands.
   */
  afterCredentialsRemoved?(merchantId: string, creds: C): Promise<void>;
  readonly notifications: NotificationScheme<C>;
  readonly cards?: CardVault<C>;
  readonly operations?: ProviderOperations<C>;
}

/**
 * The field of stored credentials naming the provider account they act on, when a provider's preparation
 * recorded it (cardpay: the Stripe account's id). Not the merchant's to give (the contract's credentials
 * refuse unknown fields) and not shown in the credentials' summary. Every payment records the account of the
 * credentials it was created under (payments.provider_account); ProviderGateway refuses to call the provider
 * about it under credentials of another account.
 */
export const PROVIDER_ACCOUNT_FIELD = 'provider_account';

/** The provider account stored credentials act on (PROVIDER_ACCOUNT_FIELD), or null when none was recorded. */
export function providerAccountOf(creds: unknown): string | null {
  const value = creds && typeof creds === 'object' ? (creds as Record<string, unknown>)[PROVIDER_ACCOUNT_FIELD] : undefined;
  return typeof value === 'string' && value !== '' ? value : null;
}

/** What ProviderPort.prepareCredentials answers. */
export interface PreparedCredentials<C> {
  /** What is stored. */
  credentials: C;
  /**
   * Runs once the credentials are committed, and only while they are still the stored ones (a store that
   * replaced them meanwhile does its own): e.g. deleting what the previous credentials used at the
   * provider, which must keep working until then. Best effort: an error is logged as a warning and the
   * store stands.
   */
  afterStored?: () => Promise<void>;
}

/** Wraps a provider's adapter where the registry builds it (e.g. to time every call); the adapter knows nothing of it. */
export type AdapterDecorator = <T extends object>(provider: string, adapter: T) => T;

/** Every provider of this build, by name (server/providers/registry.ts). */
export interface ProviderRegistry {
  get(provider: Provider): ProviderPort;
  /** undefined for a name that is not a provider of this build. */
  find(provider: string): ProviderPort | undefined;
  all(): readonly ProviderPort[];
}

/** Counts merchant webhook attempts by the delivery's status after each; implemented by a prom-client counter. */
export interface DeliveryAttemptCounter {
  inc(labels: { status: string }): void;
}

/** Counts deliveries given back unsent because their signing secret cannot be opened; a prom-client counter. */
export interface UnreadableSecretCounter {
  inc(): void;
}

/** Counts provider reports the integrity check refused; implemented by a prom-client counter. */
export interface IntegrityCounter {
  inc(labels: { provider: string; source: string }): void;
}

/** NotificationScheme.paymentOwning's answer for an object the credentials may not read (PayPal's 403 PERMISSION_DENIED). */
export const OWNER_NOT_VISIBLE = Symbol('owner not visible to these credentials');
