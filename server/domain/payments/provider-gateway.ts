import type { Provider } from '../../../contract/index.js';
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

  async createPayment(payment: Payment, input: CreatePaymentInput): Promise<ProviderPaymentResult> {
    return this.port(payment.provider).createPayment((await this.creds(payment)) as never, input);
  }

  async getPayment(payment: Payment, lookup: PaymentLookup): Promise<ProviderPaymentResult> {
    return this.port(payment.provider).getPayment((await this.creds(payment)) as never, lookup);
  }

  async refund(payment: Payment, input: RefundInput): Promise<ProviderRefundResult> {
    return this.port(payment.provider).refundPayment((await this.creds(payment)) as never, input);
  }

  async capture(payment: Payment, idempotencyKey: string): Promise<ProviderPaymentResult> {
    const walletpay = this.ports.walletpay;
    if (!walletpay) throw new ProviderError('walletpay', 'invalid_request', 'walletpay is not available in this build');
    return walletpay.capturePayment((await this.creds(payment)) as never, { orderId: payment.providerRef!, idempotencyKey });
  }
}
