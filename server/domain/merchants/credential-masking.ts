import { maskSecret } from '../crypto/tokens.js';

/** `config_summary`: the provider's non-secret fields (ProviderPort.publicCredentialFields) as given, every other value masked. */
export function summarizeCredentials(credentials: Record<string, unknown>, shownAsGiven: readonly string[]): Record<string, string> {
  const summary: Record<string, string> = {};
  for (const [field, value] of Object.entries(credentials)) {
    if (value === undefined || value === null) continue;
    const text = String(value);
    summary[field] = shownAsGiven.includes(field) ? text : maskSecret(text);
  }
  return summary;
}
