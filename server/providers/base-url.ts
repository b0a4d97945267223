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
 * is on, else the real provider for the credential's env. The simulator is this process's own (its API
 * listener, or a worker's WORKER_PORT one: config.localSimulatorsBaseUrl), not PUBLIC_BASE_URL: a worker
 * serves nothing there (its default is the api's port on localhost), and an api need not loop out
 * through the public address to reach itself. Their state is in the database, so any process's
 * simulators answer alike. Read per call: the address is only known once the server listens.
 */
export function providerBaseUrl(config: AppConfig, provider: Provider, env: 'sandbox' | 'live' = 'sandbox'): string {
  const override = config.providerBaseUrls[provider];
  if (override) return override.replace(/\/$/, '');
  if (config.sandbox) return `${config.localSimulatorsBaseUrl ?? config.publicBaseUrl}/sandbox/${provider}`;
  return UPSTREAM[provider][env];
}

/**
 * The provider's address as it names itself in what it sends (walletpay's certificate URLs): the
 * simulator names its own under PUBLIC_BASE_URL, wherever this process reaches it; otherwise the
 * address calls go to.
 */
export function providerNamedBaseUrl(config: AppConfig, provider: Provider, env: 'sandbox' | 'live' = 'sandbox'): string {
  if (config.sandbox && !config.providerBaseUrls[provider]) return `${config.publicBaseUrl}/sandbox/${provider}`;
  return providerBaseUrl(config, provider, env);
}

/**
 * Who the provider is, for what is kept per provider and shared by every process (mobilemoney's one
 * OAuth token per consumer key, which the operator revokes whenever it issues another): the override,
 * else (SANDBOX) the built-in simulators — one operator, whichever process's listener answers (their
 * state is the database's) — else the real provider for the credential's env. Never the address a call
 * goes to: with SANDBOX that is each process's own listener, and PUBLIC_BASE_URL's default differs
 * between an api and a worker too, so keying by either gives each role its own token, and each role's
 * token fetch revokes the other's.
 */
export function providerIdentity(config: AppConfig, provider: Provider, env: 'sandbox' | 'live' = 'sandbox'): string {
  const override = config.providerBaseUrls[provider];
  if (override) return override.replace(/\/$/, '');
  if (config.sandbox) return `built-in simulator: ${provider}`;
  return UPSTREAM[provider][env];
}

/** Our own callback address for a provider, e.g. `${PUBLIC_BASE_URL}/v1/webhooks/cardpay`. */
export function callbackUrl(config: AppConfig, provider: Provider, subpath = ''): string {
  return `${config.publicBaseUrl}/v1/webhooks/${provider}${subpath}`;
}

