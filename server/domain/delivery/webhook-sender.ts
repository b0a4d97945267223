import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { isPublicAddress } from '../merchants/webhook-url-policy.js';
import { DNS_TIMEOUT_CODE, DnsTimeoutError, MerchantHostResolver } from '../merchants/merchant-host-resolver.js';

/** What one HTTP attempt produced; `responseStatus` is null when no response arrived. */
export interface SendResult {
  ok: boolean;
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
}

export const USER_AGENT = 'payments-webhooks/1.0';
/** The error code of a connection refused by the address policy (a non-public address, private ones not allowed). */
const NOT_PUBLIC = 'ENOTPUBLIC';

/** Whether an attempt was refused by the address policy (nothing was sent), rather than failed on the wire. */
export function refusedAsNotPublic(result: SendResult): boolean {
  return result.error?.startsWith(`request failed: ${NOT_PUBLIC}`) === true;
}
const MAX_ERROR_LENGTH = 500;

export function capError(text: string): string {
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH - 1)}…` : text;
}

/**
 * A lookup through the merchant's share of the resolver (merchant-host-resolver.ts) that refuses a non-public
 * address unless private URLs are allowed. The check runs on the address the socket actually connects
 * to, so a DNS answer that changes between the URL check and the request (rebinding) cannot point a
 * delivery at the internal network.
 */
function guardedLookup(resolver: MerchantHostResolver, merchantId: string, allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const family = (options as { family?: number }).family;
    resolver.lookup(merchantId, hostname).then(
      (all) => {
        const list = family === 4 || family === 6 ? all.filter((a) => a.family === family) : all;
        if (list.length === 0) return callback(Object.assign(new Error(`${hostname} has no IPv${family} address`), { code: 'ENOTFOUND' }), '', 4);
        if (!allowPrivate && !list.every((a) => isPublicAddress(a.address))) {
          const refused = Object.assign(new Error(`${hostname} resolves to a non-public address`), { code: NOT_PUBLIC });
          return callback(refused, '', 4);
        }
        if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
        const first = list[0]!;
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 4),
    );
  };
}

/** Idle keep-alive connections are closed after this long. */
const IDLE_SOCKET_MS = 15_000;
/** Idle connections a pool keeps for the next attempts (more are closed as their responses end). */
const MAX_IDLE_SOCKETS_PER_POOL = 32;
/** A pool unused this long, with nothing in flight, is let go (its sockets closed IDLE_SOCKET_MS after their last use). */
const IDLE_POOL_MS = 60_000;
/** Pools kept at most: past it the least recently used idle ones are destroyed (merchants and origins come and go). */
const MAX_POOLS = 1000;

const isIdle = (agent: http.Agent) => Object.keys(agent.sockets).length === 0 && Object.keys(agent.requests).length === 0;

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
 * One of a merchant's open requests in this process, held from before the request until its connection is
 * free again (its response read or cut, or the connection closed). Released at most once.
 */
export interface RequestSlot {
  release(): void;
}

/** A merchant's open requests in this process, by merchant: what WebhookSender.reserve admits against. */
class OpenRequests {
  private readonly open = new Map<string, number>();

  count(merchantId: string): number {
    return this.open.get(merchantId) ?? 0;
  }

  take(merchantId: string): RequestSlot {
    this.open.set(merchantId, this.count(merchantId) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const left = this.count(merchantId) - 1;
        if (left > 0) this.open.set(merchantId, left);
        else this.open.delete(merchantId);
      },
    };
  }
}

export interface WebhookRequest {
  /** Whose attempt: its connections are its own (a pool per merchant and origin), as are its lookups. */
  merchantId: string;
  /**
   * A slot reserved for it beforehand (`reserve(merchantId, 'manual')`: a test event or manual retry);
   * without one, the request takes a slot that is never refused (a scheduled attempt). Released by `send`.
   */
  slot?: RequestSlot;
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
}

/**
 * Sends merchant webhooks over keep-alive pools, one per merchant and origin (and private-address
 * policy): consecutive deliveries to a merchant reuse connections instead of a TCP (and TLS) handshake
 * each, and merchants whose URLs are on one host (a platform hosting many shops) do not share sockets.
 * A pool has no socket limit, so a request never waits in its queue while its attempt's timeout runs.
 * Instead, a merchant's open requests in this process are counted (`reserve`): scheduled attempts are
 * always admitted (the workers' claims keep them within WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT), while a test
 * event or manual retry is refused at once past `maxOpenPerMerchant`, so a merchant whose endpoint never
 * answers cannot open sockets without end by sending test events. A response body is drained for the
 * connection's reuse only while the merchant is within that bound; past it the connection is closed.
 * Every NEW connection resolves through the guarded lookup; a reused one is to an address that lookup already accepted.
 */
export class WebhookSender {
  /** By key, least recently used first (a Map iterates in insertion order; a use moves it to the end). */
  private readonly pools = new Map<string, { agent: http.Agent; usedAt: number }>();
  /** Connections whose host lookup is over: until then, an attempt that times out says the lookup did. */
  private readonly resolved = new WeakSet<object>();

  private readonly open = new OpenRequests();

  /** `maxOpenPerMerchant`: a merchant's open requests in this process past which test events and manual retries are refused. */
  constructor(private readonly resolver: MerchantHostResolver, private readonly maxOpenPerMerchant: number) {}

  /**
   * A slot for one of the merchant's requests: always for a scheduled attempt; for a manual one (test
   * event, manual retry) null when the merchant already has `maxOpenPerMerchant` requests open here.
   */
  reserve(merchantId: string, kind: 'scheduled' | 'manual'): RequestSlot | null {
    if (kind === 'manual' && this.open.count(merchantId) >= this.maxOpenPerMerchant) return null;
    return this.open.take(merchantId);
  }

  /** The merchant's open requests in this process. */
  openRequests(merchantId: string): number {
    return this.open.count(merchantId);
  }

  /** How many keep-alive pools this sender holds (one per merchant origin recently sent to). */
  keptPoolCount(): number {
    return this.pools.size;
  }

  /** A keep-alive pool, or (`keepAlive` false) a connection of its own for one request. */
  private newAgent(url: URL, merchantId: string, allowPrivate: boolean, keepAlive: boolean): http.Agent {
    const options: http.AgentOptions = {
      keepAlive, maxSockets: Infinity, maxFreeSockets: MAX_IDLE_SOCKETS_PER_POOL, timeout: IDLE_SOCKET_MS,
      lookup: guardedLookup(this.resolver, merchantId, allowPrivate),
    };
    const agent = url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
    // Marks each new connection once its lookup is over (net emits 'lookup' before connecting).
    const create = agent.createConnection as (...args: unknown[]) => Duplex | null | undefined;
    agent.createConnection = ((...args: unknown[]) => {
      const socket = create.apply(agent, args);
      socket?.once('lookup', () => this.resolved.add(socket));
      return socket;
    }) as typeof agent.createConnection;
    return agent;
  }

  private poolFor(url: URL, merchantId: string, allowPrivate: boolean): http.Agent {
    const key = `${merchantId}|${url.protocol}//${url.host}|${allowPrivate ? 'private' : 'public'}`;
    const now = Date.now();
    const pool = this.pools.get(key) ?? { agent: this.newAgent(url, merchantId, allowPrivate, true), usedAt: now };
    this.pools.delete(key);
    pool.usedAt = now;
    this.pools.set(key, pool);
    this.evictIdlePools(now, key);
    return pool.agent;
  }

  /** Destroys pools with nothing in flight that were unused for IDLE_POOL_MS, or are the oldest past MAX_POOLS; never `inUse`. */
  private evictIdlePools(now: number, inUse: string): void {
    for (const [key, { agent, usedAt }] of this.pools) {
      const stale = now - usedAt > IDLE_POOL_MS;
      if (!stale && this.pools.size <= MAX_POOLS) return;
      if (key === inUse || !isIdle(agent)) continue;
      agent.destroy();
      this.pools.delete(key);
    }
  }

  /**
   * POSTs the exact body bytes once. Redirects are not followed (a 3xx is a failure: the merchant
   * registers the final address), and the whole exchange up to the response headers is bounded by
   * `timeoutMs`. The response body is discarded unread, within what is left of `timeoutMs` (discardBody).
   * A request that went out on a reused keep-alive connection the receiver had just closed is sent again
   * at once on a new connection, within the same timeout and as the same attempt (Node's documented
   * pattern for `req.reusedSocket`): the receiver did nothing wrong, and it never answered the first. Only
   * when the error comes within STALE_SOCKET_WINDOW_MS: a later one is a failed attempt like any other.
   */
  async send(input: WebhookRequest): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const slot = input.slot ?? this.reserve(input.merchantId, 'scheduled')!;
    const url = new URL(input.url);
    const client = url.protocol === 'https:' ? https : http;
    // An address literal is connected to without a lookup, so the guarded lookup never sees it: check it here.
    const literal = url.hostname.replace(/^\[|\]$/g, '');
    if (!input.allowPrivate && isIP(literal) !== 0 && !isPublicAddress(literal)) {
      slot.release();
      return { ok: false, responseStatus: null, error: `request failed: ${NOT_PUBLIC} (${literal} is not a public address)`, durationMs: elapsed() };
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
            // The resend opens a connection of its own: the pool's other idle ones may be as stale.
            agent: reuse ? this.poolFor(url, input.merchantId, input.allowPrivate) : this.newAgent(url, input.merchantId, input.allowPrivate, false),
          },
          (res) => {
            const status = res.statusCode ?? 0;
            const ok = status >= 200 && status < 300;
            const error = ok ? null : status >= 300 && status < 400 ? `redirect (HTTP ${status}) not followed` : `HTTP ${status}`;
            finish({ ok, responseStatus: status, error, durationMs: elapsed() });
            // Its slot is held while the body drains: past the bound, the connection is not worth keeping.
            if (this.open.count(input.merchantId) > this.maxOpenPerMerchant) res.destroy();
            else discardBody(res, Math.max(MIN_BODY_DRAIN_MS, input.timeoutMs - elapsed()));
          },
        );
        // The connection is free (back in its pool, or closed) once the request closes; a resent request's first one is not the last.
        req.once('close', () => {
          if (req === current) slot.release();
        });
        req.on('error', (err: NodeJS.ErrnoException) => {
          if (settled) return;
          if (reuse && req.reusedSocket && STALE_SOCKET_ERRORS.has(err.code ?? '') && performance.now() - sentAt < STALE_SOCKET_WINDOW_MS) {
            current = send(false);
            return;
          }
          const error = err.code === DNS_TIMEOUT_CODE ? err.message : `request failed: ${err.code ?? err.message}`;
          finish({ ok: false, responseStatus: null, error: capError(error), durationMs: elapsed() });
        });
        req.end(input.body);
        return req;
      };
      // Bounds the whole exchange up to the response headers (lookup, connect, send, wait), a resend included.
      const timer = setTimeout(() => {
        const socket = current.socket;
        const resolving = isIP(literal) === 0 && socket !== null && (socket as Socket).connecting && !this.resolved.has(socket);
        const error = resolving ? new DnsTimeoutError(url.hostname).message : `no response within ${input.timeoutMs} ms`;
        finish({ ok: false, responseStatus: null, error, durationMs: elapsed() });
        current.destroy();
      }, input.timeoutMs);
      let current = send(true);
    });
  }
}
