import type { Provider } from '../../../contract/index.js';
import { maskSecret } from '../crypto/tokens.js';

/** Fields shown as given in `config_summary`; every other value is a secret and masked. */
const SHOWN_AS_GIVEN: Record<Provider, readonly string[]> = {
  cardpay: [],
  walletpay: ['env', 'webhook_id'],
  mobilemoney: ['env', 'shortcode', 'result_url', 'timeout_url'],
};

export function summarizeCredentials(provider: Provider, credentials: Record<string, unknown>): Record<string, string> {
  const summary: Record<string, string> = {};
  for (const [field, value] of Object.entries(credentials)) {
    if (value === undefined || value === null) continue;
    const text = String(value);
    summary[field] = SHOWN_AS_GIVEN[provider].includes(field) ? text : maskSecret(text);
  }
  return summary;
}
