/** What one HTTP attempt produced; `responseStatus` is null when no response arrived. */
export interface SendResult {
  ok: boolean;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
}

export const USER_AGENT = 'payments-webhooks/1.0';
const MAX_ERROR_LENGTH = 500;

export function capError(text: string): string {
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH - 1)}…` : text;
}

function describeNetworkError(err: unknown, timeoutMs: number): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return `no response within ${timeoutMs} ms`;
  const cause = e?.cause?.code ?? e?.cause?.message;
  return cause ? `request failed: ${cause}` : `request failed: ${e?.message ?? 'unknown error'}`;
}

/**
 * POSTs the exact body bytes once. Redirects are not followed (a 3xx is a failure: the merchant
 * registers the final address), and the whole exchange up to the response headers is bounded by
 * `timeoutMs`. The response body is discarded unread.
 */
export async function sendWebhook(input: { url: string; body: string; headers: Record<string, string>; timeoutMs: number }): Promise<SendResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  try {
    const res = await fetch(input.url, {
      method: 'POST',
      body: input.body,
      headers: input.headers,
      redirect: 'manual',
      signal: AbortSignal.timeout(input.timeoutMs),
    });
    await res.body?.cancel().catch(() => undefined);
    const ok = res.status >= 200 && res.status < 300;
    const error = ok ? null : res.status >= 300 && res.status < 400 ? `redirect (HTTP ${res.status}) not followed` : `HTTP ${res.status}`;
    return { ok, responseStatus: res.status, error, durationMs: elapsed() };
  } catch (err) {
    return { ok: false, responseStatus: null, error: capError(describeNetworkError(err, input.timeoutMs)), durationMs: elapsed() };
  }
}
