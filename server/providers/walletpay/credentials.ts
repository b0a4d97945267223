import type { WalletpayCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { callbackUrl } from '../base-url.js';
import type { WalletpayAdapter } from './adapter.js';

/**
 * The walletpay credential preparer (see CredentialPreparer): credentials stored without `webhook_id`
 * get the service's callback URL registered with the provider, and keep the returned webhook id, which
 * inbound events are then verified against. A refusal (bad client credentials, provider down) is
 * thrown as the adapter's ProviderError and nothing is stored.
 */
export function prepareWalletpayCredentials(
  adapter: WalletpayAdapter,
  config: AppConfig,
): (merchantId: string, credentials: WalletpayCredentials) => Promise<WalletpayCredentials> {
  return async (_merchantId, credentials) => {
    if (credentials.webhook_id) return credentials;
    const { webhookId } = await adapter.registerWebhook(credentials, callbackUrl(config, 'walletpay'));
    return { ...credentials, webhook_id: webhookId };
  };
}
