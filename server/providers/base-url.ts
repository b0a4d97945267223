import type { Provider } from '../../contract/index.js';
import type { AppConfig } from '../config/config.js';

/** The real upstream addresses, by credential env. */
const UPSTREAM: Record<Provider, { sandbox: string; live: string }> = {
  cardpay: { sandbox: 'https://api.stripe.com', live: 'https://api.stripe.com' },
  walletpay: { sandbox: 'https://api-m.sandbox.paypal.com', live: 'https://api-m.paypal.com' },
  mobilemoney: { sandbox: 'https://sandbox.safaricom.co.ke', live: 'https://api.safaricom.co.ke' },
};

/**
 * Where an adapter sends its calls: the configured override, else the built-in simulator when SANDBOX
 * is on, else the real provider for the credential's env. Read per call: the public address is only
 * known once the server listens.
 */
export function providerBaseUrl(config: AppConfig, provider: Provider, env: 'sandbox' | 'live' = 'sandbox'): string {
  const override = config.providerBaseUrls[provider];
  if (override) return override.replace(/\/$/, '');
  if (config.sandbox) return `${config.publicBaseUrl}/sandbox/${provider}`;
  return UPSTREAM[provider][env];
}

/** Our own callback address for a provider, e.g. `${PUBLIC_BASE_URL}/v1/webhooks/cardpay`. */
export function callbackUrl(config: AppConfig, provider: Provider, subpath = ''): string {
  return `${config.publicBaseUrl}/v1/webhooks/${provider}${subpath}`;
}

