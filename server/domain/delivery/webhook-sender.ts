import dns, { type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { isPublicAddress } from '../merchants/webhook-url-policy.js';

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


/**
 * Resolves like the system resolver, but refuses a non-public address unless private URLs are allowed.
 * The check runs on the address the socket actually connects to, so a DNS answer that changes between
 * the URL check and the request (rebinding) cannot point a delivery at the internal network.
 */
function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as LookupAddress[];
      if (!allowPrivate && (list.length === 0 || !list.every((a) => isPublicAddress(a.address)))) {
        const refused = Object.assign(new Error(`${hostname} resolves to a non-public address`), { code: 'ENOTPUBLIC' });
        return callback(refused, '', 4);
      }
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      const first = list[0]!;
      callback(null, first.address, first.family);
    });
  };
}

/** Idle keep-alive connections are closed after this long. */
const IDLE_SOCKET_MS = 15_000;
const MAX_SOCKETS_PER_ORIGIN = 32;
/** Agents kept at most: past it the least recently used idle ones are destroyed (origins come and go). */
const MAX_AGENTS = 1000;
/** By origin, least recently used first (a Map iterates in insertion order; a use moves it to the end). */
const agents = new Map<string, http.Agent>();

const isIdle = (agent: http.Agent) => Object.keys(agent.sockets).length === 0 && Object.keys(agent.requests).length === 0;

/** How many keep-alive agents this process holds (one per merchant origin recently sent to). */
export const keptAgentCount = (): number => agents.size;

/** Destroys the least recently used agents with nothing in flight until at most MAX_AGENTS remain. */
function evictIdleAgents(): void {
  for (const [key, agent] of agents) {
    if (agents.size <= MAX_AGENTS) return;
    if (!isIdle(agent)) continue;
    agent.destroy();
    agents.delete(key);
  }
}

/**
 * One keep-alive agent per merchant origin (and private-address policy), so consecutive deliveries to a
 * merchant reuse connections instead of a TCP (and TLS) handshake each. Every NEW connection still
 * resolves through the guarded lookup; a reused one is to an address that lookup already accepted.
 */
function agentFor(url: URL, allowPrivate: boolean): http.Agent {
  const key = `${url.protocol}//${url.host}|${allowPrivate ? 'private' : 'public'}`;
  let agent = agents.get(key);
  if (agent) {
    agents.delete(key);
  } else {
    const options = { keepAlive: true, maxSockets: MAX_SOCKETS_PER_ORIGIN, maxFreeSockets: MAX_SOCKETS_PER_ORIGIN, timeout: IDLE_SOCKET_MS, lookup: guardedLookup(allowPrivate) };
    agent = url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
  }
  agents.set(key, agent);
  if (agents.size > MAX_AGENTS) evictIdleAgents();
  return agent;
}

/** Bytes of a response body read (and dropped) before the connection is cut instead. */
const MAX_DISCARDED_BODY_BYTES = 64 * 1024;
/** Time a response body always gets to end, even when the headers came at the very end of the timeout. */
const MIN_BODY_DRAIN_MS = 1_000;

/**
 * Reads a response body and drops it, so its connection can be reused, but only up to a size and a
 * deadline: an endpoint that keeps sending (a byte every few seconds, for ever) would otherwise hold the
 * connection, and a socket of its origin's agent, for as long as it likes. Past either, the connection is cut.
 */
function discardBody(res: http.IncomingMessage, withinMs: number): void {
  let read = 0;
  const deadline = setTimeout(() => res.destroy(), withinMs);
  deadline.unref();
  res.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read > MAX_DISCARDED_BODY_BYTES) res.destroy();
  });
  res.once('close', () => clearTimeout(deadline));
  res.resume();
}

/**
 * Errors that on a reused keep-alive connection, before any response, mean the receiver had closed it
 * (idle) as the request went out: it never read the request.
 */
const STALE_SOCKET_ERRORS = new Set(['ECONNRESET', 'EPIPE']);
/**
 * How soon after it went out such an error must come to be that race: the receiver's close crosses the
 * request on the wire, so the error arrives within a round trip. Later, the receiver may have read the
 * request and then dropped the connection (a crash): that attempt failed and is not sent again at once.
 */
const STALE_SOCKET_WINDOW_MS = 1_000;

/**
 * POSTs the exact body bytes once. Redirects are not followed (a 3xx is a failure: the merchant
 * registers the final address), and the whole exchange up to the response headers is bounded by
 * `timeoutMs`. The response body is discarded unread, within what is left of `timeoutMs` (discardBody).
 * A request that went out on a reused keep-alive connection the receiver had just closed is sent again
 * at once on a new connection, within the same timeout and as the same attempt (Node's documented
 * pattern for `req.reusedSocket`): the receiver did nothing wrong, and it never answered the first. Only
 * when the error comes within STALE_SOCKET_WINDOW_MS: a later one is a failed attempt like any other.
 */
export async function sendWebhook(input: {
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
}): Promise<SendResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const url = new URL(input.url);
  const client = url.protocol === 'https:' ? https : http;
  // An address literal is connected to without a lookup, so the guarded lookup never sees it: check it here.
  const literal = url.hostname.replace(/^\[|\]$/g, '');
  if (!input.allowPrivate && isIP(literal) !== 0 && !isPublicAddress(literal)) {
    return { ok: false, responseStatus: null, error: `request failed: ENOTPUBLIC (${literal} is not a public address)`, durationMs: elapsed() };
  }
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    const finish = (result: SendResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const send = (reuse: boolean): http.ClientRequest => {
      const sentAt = performance.now();
      const req = client.request(
        url,
        {
          method: 'POST',
          headers: { ...input.headers, 'Content-Length': String(Buffer.byteLength(input.body)) },
          lookup: guardedLookup(input.allowPrivate),
          // The resend opens a connection of its own: the agent's other idle ones may be as stale.
          agent: reuse ? agentFor(url, input.allowPrivate) : false,
        },
        (res) => {
          const status = res.statusCode ?? 0;
          const ok = status >= 200 && status < 300;
          const error = ok ? null : status >= 300 && status < 400 ? `redirect (HTTP ${status}) not followed` : `HTTP ${status}`;
          finish({ ok, responseStatus: status, error, durationMs: elapsed() });
          discardBody(res, Math.max(MIN_BODY_DRAIN_MS, input.timeoutMs - elapsed()));
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (settled) return;
        if (reuse && req.reusedSocket && STALE_SOCKET_ERRORS.has(err.code ?? '') && performance.now() - sentAt < STALE_SOCKET_WINDOW_MS) {
          current = send(false);
          return;
        }
        finish({ ok: false, responseStatus: null, error: capError(`request failed: ${err.code ?? err.message}`), durationMs: elapsed() });
      });
      req.end(input.body);
      return req;
    };
    // Bounds the whole exchange up to the response headers (connect, send, wait), a resend included.
    const timer = setTimeout(() => {
      finish({ ok: false, responseStatus: null, error: `no response within ${input.timeoutMs} ms`, durationMs: elapsed() });
      current.destroy();
    }, input.timeoutMs);
    let current = send(true);
  });
}
