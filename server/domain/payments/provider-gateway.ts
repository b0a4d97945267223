import type { MobilemoneyCredentials, Provider } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { signedCallbackUrl } from '../mobilemoney/callback-urls.js';
import type { Payment } from '../../persistence/entities/index.js';
import {
  ProviderError, type CreatePaymentInput, type PaymentLookup, type ProviderPaymentResult, type ProviderPorts, type ProviderRefundResult, type RefundInput,
} from '../../providers/types.js';
import type { CredentialsService } from '../merchants/credentials.service.js';

/**
 * Routes a payment's provider call to its adapter with the merchant's decrypted credentials.
 * The domain talks to providers only through here.
 */
export class ProviderGateway {
  constructor(
    readonly ports: ProviderPorts,
    private readonly credentials: CredentialsService,
    private readonly config: AppConfig,
  ) {}

  private port(provider: string) {
    const port = this.ports[provider as Provider];
    if (!port) throw new ProviderError(provider as Provider, 'invalid_request', `${provider} is not available in this build`);
    return port;
  }

  private async creds(payment: Pick<Payment, 'merchantId' | 'provider'>) {
    const creds = await this.credentials.find(payment.merchantId, payment.provider as Provider);
    if (!creds) throw new ProviderError(payment.provider as Provider, 'auth', `${payment.provider} credentials are no longer configured`);
    return creds;
  }

  /** `knownCreds`: the caller already decrypted them (payment creation), so they are not read twice. */
  async createPayment(payment: Payment, input: CreatePaymentInput, knownCreds?: unknown): Promise<ProviderPaymentResult> {
    const creds = knownCreds ?? (await this.creds(payment));
    if (payment.provider === 'mobilemoney') {
      // Our push callback carries the payment id and its token, unless the merchant chose another address.
      const callback = typeof input.fields.callback_url === 'string'
        ? input.fields.callback_url
        : signedCallbackUrl(this.config, creds as MobilemoneyCredentials, '', payment.id);
      const result = await this.port('mobilemoney').createPayment(creds as never, { ...input, callbackUrl: callback });
      return { ...result, data: { ...result.data, checkoutRequestId: result.providerRef } };
    }
    return this.port(payment.provider).createPayment(creds as never, input);
  }

  /** Whether an interrupted creation may be resumed by sending the create again (same idempotency key). */
  repeatsCreateSafely(provider: string): boolean {
    return this.ports[provider as Provider]?.repeatsCreateSafely === true;
  }

  async getPayment(payment: Payment, lookup: PaymentLookup): Promise<ProviderPaymentResult> {
    return this.port(payment.provider).getPayment((await this.creds(payment)) as never, lookup);
  }

  async refund(payment: Payment, input: RefundInput): Promise<ProviderRefundResult> {
    const creds = await this.creds(payment);
    if (payment.provider === 'mobilemoney') {
      const mm = creds as MobilemoneyCredentials;
      input = {
        ...input,
        resultUrl: signedCallbackUrl(this.config, mm, '/reversal/result', input.refundId),
        timeoutUrl: signedCallbackUrl(this.config, mm, '/reversal/timeout', input.refundId),
      };
    }
    return this.port(payment.provider).refundPayment(creds as never, input);
  }

  async capture(payment: Payment, idempotencyKey: string): Promise<ProviderPaymentResult> {
    const walletpay = this.ports.walletpay;
    if (!walletpay) throw new ProviderError('walletpay', 'invalid_request', 'walletpay is not available in this build');
    return walletpay.capturePayment((await this.creds(payment)) as never, { orderId: payment.providerRef!, idempotencyKey });
  }
}
