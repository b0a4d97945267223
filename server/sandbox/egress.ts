import type { EgressAnswer, SandboxDeps } from './module.js';

/** A URL as logged: no query string or fragment (a token or a merchant id may ride there), no user or password. */
export function loggableUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(not a URL)';
  }
}

/**
 * POSTs one webhook or callback of `provider`'s simulator through the service's egress (SandboxDeps.egress).
 * A send the address policy refuses is a failed delivery like a connection error (the simulator retries
 * it on its schedule, then gives up), and is logged as a warning naming the URL without its query.
 */
export async function postOut(
  deps: Pick<SandboxDeps, 'egress' | 'logger'>,
  provider: string,
  url: string,
  request: { headers: Record<string, string>; body: string; timeoutMs: number },
): Promise<EgressAnswer> {
  let answer: EgressAnswer;
  try {
    answer = await deps.egress.post(url, request);
  } catch {
    answer = { status: null, failure: 'connection failed' };
  }
  if (answer.failure === 'refused') {
    deps.logger.warn(
      { provider, url: loggableUrl(url) },
      'sandbox callback refused: its address is not public (private, loopback, link-local…) and WEBHOOK_ALLOW_PRIVATE_URLS is off; counted as a failed delivery',
    );
  }
  return answer;
}
