import type { Provider } from '../../../contract/index.js';
import type { Payment } from '../../persistence/entities/index.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import {
  ProviderError, answerAboutSomethingElse, providerAccountOf, type CreatePaymentInput, type PaymentLookup, type ProviderPaymentResult, type ProviderPort, type ProviderRefundResult,
  type ProviderRegistry, type CredentialsIssue, type RefundInput, type RefundLookup,
} from '../ports.js';

/**
 * Routes a payment's provider call to its port with the merchant's decrypted credentials.
 * The domain talks to providers only through here (and the inbound pipeline).
 */
export class ProviderGateway {
  constructor(
    readonly providers: ProviderRegistry,
    private readonly credentials: CredentialsService,
  ) {}

  port(provider: string): ProviderPort {
    const port = this.providers.find(provider);
    if (!port) throw new ProviderError(provider as Provider, 'invalid_request', `${provider} is not available in this build`);
    return port;
  }

  /**
   * Opens (decrypts, or takes from the cache) the merchant's credentials for `provider` without calling
   * it — a request that cannot open them is refused before it writes anything — and says why they cannot
   * be used to refund (ProviderPort.refundCredentialsIssue). null when they can; also when none are
   * stored, which is no error here (the request's own check answers 422).
   */
  async refundCredentialsIssue(merchantId: string, provider: string): Promise<CredentialsIssue | null> {
    const creds = await this.credentials.find(merchantId, provider as Provider);
    return creds ? (this.port(provider).refundCredentialsIssue?.(creds) ?? null) : null;
  }

  /**
   * The merchant's credentials for a call about `payment`. Refused (`auth`, OTHER_ACCOUNT) when the payment
   * was created under another provider account than the one they act on (otherAccount): nothing is sent.
   */
  private async creds(payment: Pick<Payment, 'id' | 'merchantId' | 'provider' | 'providerAccount'>, knownCreds?: unknown): Promise<unknown> {
    const creds = knownCreds ?? (await this.credentials.find(payment.merchantId, payment.provider as Provider));
    if (!creds) throw new ProviderError(payment.provider as Provider, 'auth', `${payment.provider} credentials are no longer configured`);
    const other = otherAccount(payment, creds);
    if (other) throw new ProviderError(payment.provider as Provider, 'auth', other, OTHER_ACCOUNT);
    return creds;
  }

  /**
   * Why `payment` cannot be asked about with the merchant's stored credentials: it was created under
   * another provider account (otherAccount); null when it can (or when none are stored: the call itself says so).
   */
  async accountMismatch(payment: Pick<Payment, 'id' | 'merchantId' | 'provider' | 'providerAccount'>): Promise<string | null> {
    if (!payment.providerAccount) return null;
    const creds = await this.credentials.find(payment.merchantId, payment.provider as Provider);
    return creds ? otherAccount(payment, creds) : null;
  }

  /** `knownCreds`: the caller already decrypted them (payment creation), so they are not read twice. */
  async createPayment(payment: Payment, input: CreatePaymentInput, knownCreds?: unknown): Promise<ProviderPaymentResult> {
    return this.port(payment.provider).createPayment(await this.creds(payment, knownCreds), input);
  }

  /** `knownCreds`: the caller already holds the merchant's credentials (the inbound pipeline, check-status); the account is checked all the same. */
  async getPayment(payment: Payment, lookup: PaymentLookup, knownCreds?: unknown): Promise<ProviderPaymentResult> {
    return this.port(payment.provider).getPayment(await this.creds(payment, knownCreds), lookup);
  }

  /** The payment found at the provider by our id (ProviderPort.findPayment); undefined when the provider cannot look it up so. */
  async findPayment(payment: Payment, lookup: PaymentLookup): Promise<ProviderPaymentResult | null | undefined> {
    const port = this.port(payment.provider);
    return port.findPayment ? port.findPayment(await this.creds(payment), lookup) : undefined;
  }

  /**
   * Cancels a failed payment's provider object, or an abandoned checkout's (ProviderPort.abandonPayment);
   * undefined when the provider has nothing to cancel. An answer naming another provider object than the payment's is none about it
   * (answerAboutSomethingElse, `unavailable`: the cancel is tried again), never applied to it.
   */
  async abandon(payment: Payment, idempotencyKey: string): Promise<ProviderPaymentResult | undefined> {
    const port = this.port(payment.provider);
    if (!port.abandonPayment || !payment.providerRef) return undefined;
    const answer = await port.abandonPayment(await this.creds(payment), { providerRef: payment.providerRef, idempotencyKey });
    if (answer.providerRef !== payment.providerRef) {
      throw answerAboutSomethingElse(port.name, 'unavailable', `the cancel of ${payment.providerRef} answered ${String(answer.providerRef)}`);
    }
    return answer;
  }

  async refund(payment: Payment, input: RefundInput): Promise<ProviderRefundResult> {
    return this.port(payment.provider).refundPayment(await this.creds(payment), input);
  }

  /** The refund sync's lookup (see ProviderPort.findRefund); undefined when the provider cannot look refunds up. */
  async findRefund(payment: Payment, lookup: RefundLookup): Promise<ProviderRefundResult | null | undefined> {
    const port = this.port(payment.provider);
    return port.findRefund ? port.findRefund(await this.creds(payment), lookup) : undefined;
  }

  /** Whether the provider reports on our requests asynchronously (ProviderOperations.requestStatusReport). */
  offersStatusReports(provider: string): boolean {
    return Boolean(this.port(provider).operations?.requestStatusReport);
  }

  /** Asks for a status report about our request `requestRef`; it arrives as a `status-report` notification naming `queryId`. */
  async requestStatusReport(payment: Payment, input: { queryId: string; requestRef: string }): Promise<{ providerQueryRef: string }> {
    const operations = this.port(payment.provider).operations;
    if (!operations?.requestStatusReport) throw new ProviderError(payment.provider as Provider, 'invalid_request', `${payment.provider} offers no status reports`);
    return operations.requestStatusReport(await this.creds(payment), input);
  }

  async capture(payment: Payment, idempotencyKey: string): Promise<ProviderPaymentResult> {
    const port = this.port(payment.provider);
    if (!port.capturePayment) throw new ProviderError(port.name, 'invalid_request', `${payment.provider} payments are not captured`);
    return port.capturePayment(await this.creds(payment), {
      providerRef: payment.providerRef!, idempotencyKey, providerData: payment.providerData, amount: { minor: payment.amountMinor, currency: payment.currency },
    });
  }
}

/** The providerCode of the refusal of a call about a payment through credentials of another provider account. */
export const OTHER_ACCOUNT = 'other_account';

/**
 * Why the provider may not be asked about `payment` through `creds`, or null when it may. A provider's
 * idempotency keys and objects are per account (Stripe's are): through another account's key, a repeat of
 * the payment's create would be a new charge (or refused), a lookup finds nothing, and "not found" would be
 * read as "never charged". So a payment that recorded the account it was created under (payments.provider_account)
 * is not asked about through credentials recorded with another account (or the same account's other
 * mode): it is left pending (the status sync logs why at each check; once its schedule runs out it is
 * counted in payments_unresolved). Credentials whose account could not be read when they were stored (the
 * provider down, a restricted key that may not read it) prove no other account, and are used as before:
 * refusing them would hold every earlier payment and refund of a merchant who rolled their key during an
 * outage. Payments that recorded none (created before the account was recorded, or under such
 * credentials) are asked as before.
 */
export function otherAccount(payment: Pick<Payment, 'id' | 'provider' | 'providerAccount'>, creds: unknown): string | null {
  const created = payment.providerAccount;
  if (!created) return null;
  const stored = providerAccountOf(creds);
  if (!stored || stored === created) return null;
  return (
    `payment ${payment.id} was created on ${payment.provider} account ${created}, and the stored ${payment.provider} credentials are of account ${stored}: ` +
    `it is not looked up, sent again or judged there. It stays pending; store credentials of account ${created} again for it to be settled`
  );
}
