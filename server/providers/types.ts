import type { CardpayCredentials, MobilemoneyCredentials, Provider, WalletpayCredentials } from '../../contract/index.js';

/**
 * The seam between the domain and the providers. Each provider is one folder (adapter.ts for transport
 * and flows, transformers.ts for wire types and the ONE status-mapping table, webhook.ts for inbound
 * callbacks). Adapters are stateless: they get credentials per call and return normalised results;
 * the domain owns persistence and the state machine.
 */

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
  nextAction?: { type: 'redirect'; url: string } | null;
  failureReason?: string | null;
  /** e.g. the mobile-money receipt number once known, the walletpay capture id. */
  receiptNumber?: string | null;
  /** Facts later calls need (capture id, customer id, …), merged into payment.provider_data. */
  data?: Record<string, unknown>;
  /** The raw provider response with secrets removed; shown as `provider_response`. */
  raw: unknown;
  /**
   * The amount and currency the provider reports for this payment (intent amount, order or capture
   * amount, callback Amount). The status writer moves money only when it equals the payment's.
   */
  amount?: Money | null;
}

export interface ProviderRefundResult {
  providerRef: string | null;
  status: 'pending' | 'completed' | 'failed';
  failureReason?: string | null;
  raw: unknown;
  /** The refunded amount and currency the provider reports; must equal the refund's to complete it. */
  amount?: Money | null;
}

/** What the provider must know about the payment being created. */
export interface CreatePaymentInput {
  paymentId: string;
  /** 12-character unique reference (bill / account reference). */
  reference: string;
  amount: Money;
  /** Derived from the payment id: a retried call can never double-charge. */
  idempotencyKey: string;
  /** Where the provider calls us back for this payment (already carries any per-payment token). */
  callbackUrl: string;
  /** Provider-specific request fields, as validated by the contract. */
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
  amount: Money;
  /** True when `amount` is what remains of the payment. */
  full: boolean;
  idempotencyKey: string;
  /** Where asynchronous results go (mobile-money reversals). */
  resultUrl: string;
  timeoutUrl: string;
}

/** Classified provider failure. `indeterminate` means the outcome is unknown (timeout, 5xx): keep pending. */
export type ProviderErrorKind = 'declined' | 'invalid_request' | 'auth' | 'rate_limited' | 'unavailable' | 'indeterminate';

export class ProviderError extends Error {
  constructor(
    readonly provider: Provider,
    readonly kind: ProviderErrorKind,
    message: string,
    /** The provider's own code (decline_code, issue, errorCode). */
    readonly providerCode?: string,
    /** A result the provider returned along with the error (e.g. the declined intent). */
    readonly result?: ProviderPaymentResult,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

/** An inbound provider request exactly as received. */
export interface InboundCallback {
  /** Path below /v1/webhooks/<provider>, e.g. '' or '/reversal/result'. */
  subpath: string;
  headers: Record<string, string | undefined>;
  rawBody: Buffer;
  body: unknown;
  query: Record<string, string | undefined>;
  sourceIp: string;
}

export type ProviderCredentialsMap = {
  cardpay: CardpayCredentials;
  walletpay: WalletpayCredentials;
  mobilemoney: MobilemoneyCredentials;
};

/** Every provider can create, look up and refund a payment. */
export interface PaymentProviderPort<C> {
  /**
   * True when a repeated create with the same idempotency key returns the first result instead of
   * charging again: an interrupted creation may then be resumed by calling create once more.
   */
  readonly repeatsCreateSafely: boolean;
  createPayment(creds: C, input: CreatePaymentInput): Promise<ProviderPaymentResult>;
  getPayment(creds: C, lookup: PaymentLookup): Promise<ProviderPaymentResult>;
  refundPayment(creds: C, input: RefundInput): Promise<ProviderRefundResult>;
}

export interface SavedCardDetails {
  paymentMethodId: string;
  brand: string;
  last4: string;
  expMonth: number;
  expYear: number;
}

/** A refund as the provider reports it (made by the service or directly at the provider). */
export interface ProviderRefundRecord {
  providerRef: string;
  status: ProviderRefundResult['status'];
  amount: Money;
  /** Our refund id when the service made it (sent as metadata). */
  ourRefundId: string | null;
  raw: unknown;
}

/** cardpay also keeps customers and their payment methods (saved cards). */
export interface CardpayPort extends PaymentProviderPort<CardpayCredentials> {
  /** Every refund of a charge (GET /v1/refunds?charge=), newest first. */
  listChargeRefunds(creds: CardpayCredentials, chargeId: string): Promise<ProviderRefundRecord[]>;
  createCustomer(creds: CardpayCredentials, input: { email?: string; name?: string; idempotencyKey: string }): Promise<{ customerId: string }>;
  attachPaymentMethod(creds: CardpayCredentials, input: { paymentMethodId: string; customerId: string; idempotencyKey: string }): Promise<SavedCardDetails>;
  detachPaymentMethod(creds: CardpayCredentials, paymentMethodId: string): Promise<void>;
}

/** walletpay payments complete with a capture after the buyer approves. */
export interface WalletpayPort extends PaymentProviderPort<WalletpayCredentials> {
  capturePayment(creds: WalletpayCredentials, input: { orderId: string; idempotencyKey: string }): Promise<ProviderPaymentResult>;
}

export interface ProviderPorts {
  cardpay: CardpayPort;
  walletpay?: WalletpayPort;
  mobilemoney?: PaymentProviderPort<MobilemoneyCredentials>;
}
