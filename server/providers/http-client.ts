import type { Provider } from '../../contract/index.js';
import { ProviderError } from '../domain/ports.js';

export interface HttpResponse {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

/**
 * fetch with a hard timeout. A timeout or a network failure is `indeterminate` (the provider may have
 * acted): the caller keeps the payment pending and lets a callback or a status sync settle it.
 */
export async function httpRequest(
  provider: Provider,
  url: string,
  init: RequestInit & { timeoutMs: number },
): Promise<HttpResponse> {
  const { timeoutMs, ...rest } = init;
  let response: Response;
  try {
    response = await fetch(url, { ...rest, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    // fetch's own error says only "fetch failed": the socket's code (ECONNRESET, ECONNREFUSED, …) is its cause.
    const cause = (err as { cause?: { code?: unknown } }).cause?.code;
    const reason = (err as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : `connection failed${typeof cause === 'string' ? ` (${cause})` : ''}`;
    throw new ProviderError(provider, 'indeterminate', `${provider} ${reason}`);
  }
  let text: string;
  try {
    text = await response.text();
  } catch {
    throw new ProviderError(provider, 'indeterminate', `${provider} response could not be read`);
  }
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: response.status, headers: response.headers, text, json };
}
