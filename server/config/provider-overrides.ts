import type { Provider } from '../../contract/index.js';

/** The variable that overrides each provider's upstream address (AppConfig.providerBaseUrls). */
export const PROVIDER_BASE_URL_VARS: Record<Provider, string> = {
  cardpay: 'CARDPAY_BASE_URL',
  walletpay: 'WALLETPAY_BASE_URL',
  mobilemoney: 'MOBILEMONEY_BASE_URL',
};

/**
 * Why an override cannot be used, or null. An override receives every call of its provider, live and
 * sandbox credentials alike (the API keys and tokens in their headers): in production only over https.
 */
export function providerOverrideProblem(provider: Provider, url: string | undefined, production: boolean): string | null {
  if (url === undefined || !production || new URL(url).protocol === 'https:') return null;
  return `${PROVIDER_BASE_URL_VARS[provider]} must be an https URL when NODE_ENV=production: every ${provider} call, with its credentials, goes there instead of the provider`;
}

/** The overrides set, each with its variable and origin (scheme, host and port: never a URL's user or password). */
export function providerOverrides(urls: Partial<Record<Provider, string>>): { variable: string; provider: Provider; origin: string }[] {
  return (Object.keys(PROVIDER_BASE_URL_VARS) as Provider[])
    .filter((provider) => urls[provider] !== undefined)
    .map((provider) => ({ variable: PROVIDER_BASE_URL_VARS[provider], provider, origin: new URL(urls[provider]!).origin }));
}
