import type { Provider } from '../../contract/index.js';
import { ProviderError } from '../domain/ports.js';

export interface HttpResponse {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

/**
 * Transport error codes raised before a request is written: the connection was refused, the host name did
 * not resolve, or undici's connect timeout fired. A request waits for a connection only when no open one
 * is free; one written on a reused keep-alive connection fails with a reset or "other side closed", never
 * with these. Such a call provably did not reach the provider.
 */
export const NOT_CONNECTED_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * fetch with a hard timeout. A call that never connected (NOT_CONNECTED_CODES) is `unavailable`: nothing
 * was sent. Any other timeout or network failure is `indeterminate` (the provider may have acted): the
 * caller keeps the payment pending and lets a callback or a status sync settle it.
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
    // Our own timeout is `indeterminate` even while connecting: fetch does not say how far it got.
    const cause = (err as { cause?: { code?: unknown } }).cause?.code;
    const timedOut = (err as Error).name === 'TimeoutError';
    const reason = timedOut ? `no answer within ${timeoutMs} ms` : `connection failed${typeof cause === 'string' ? ` (${cause})` : ''}`;
    const notSent = !timedOut && typeof cause === 'string' && NOT_CONNECTED_CODES.has(cause);
    throw new ProviderError(provider, notSent ? 'unavailable' : 'indeterminate', `${provider} ${reason}`);
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
