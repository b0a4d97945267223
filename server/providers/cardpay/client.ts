import http from 'node:http';
import https from 'node:https';
import Stripe from 'stripe';
import { setBounded } from '../../lib/bounded-map.js';

/** The API version this adapter is written against (the one stripe-node 22.5 pins). */
export const CARDPAY_API_VERSION = '2026-07-29.dahlia' as const;

/**
 * How long the provider keeps an idempotency key and its answer: "keys are pruned after at least 24 hours"
 * (docs.stripe.com/api/idempotent_requests). A request repeated after that is a new request.
 */
export const IDEMPOTENCY_KEY_RETENTION_MS = 24 * 3_600_000;

/**
 * No automatic retries. A retry of a write whose first attempt timed out or lost its connection gets an
 * answer that may say nothing about that first attempt — a 429 from the rate limiter, a 401, a 409 "in
 * progress" all come before the provider replays the key — yet it would be read as the outcome (a charge
 * made by the first attempt written `failed`). Without a retry such a write is `indeterminate` and the
 * status sync / refund sync resume it with the same idempotency key, where the answer is a lookup.
 */
const MAX_NETWORK_RETRIES = 0;
/** stripe-node retries these transport errors once even with no retries configured (see BasePathHttpClient). */
const CONNECTION_CLOSED_CODES = new Set(['ECONNRESET', 'EPIPE']);
/** Clients kept per (base URL, timeout, key); bounded so a long-running process cannot grow without limit. */
const MAX_CACHED_CLIENTS = 200;
/**
 * How long an idle keep-alive connection is kept. The SDK's default agent has no idle timeout, and Node
 * honours a server's `Keep-Alive: timeout=N` hint (closing a second early) only when the agent has one;
 * without it a request can take a connection the provider is closing at that moment and fail with
 * ECONNRESET — retried once for a read, never for a write (BasePathHttpClient), so it would leave the write indeterminate.
 */
const IDLE_SOCKET_MS = 30_000;
const agents = {
  http: new http.Agent({ keepAlive: true, timeout: IDLE_SOCKET_MS }),
  https: new https.Agent({ keepAlive: true, timeout: IDLE_SOCKET_MS }),
};

/**
 * stripe-node sends every request to `<host>/v1/...` and has no base-path option, while the simulator
 * lives under `/sandbox/cardpay`. This client prefixes the base path (if any) and otherwise is the SDK's
 * own Node client on our agent, so everything else (headers, form encoding, retries, error classes)
 * stays the SDK's.
 */
class BasePathHttpClient implements Stripe.HttpClient {
  private readonly inner: Stripe.HttpClient;

  constructor(
    private readonly basePath: string,
    agent: http.Agent,
  ) {
    this.inner = Stripe.createNodeHttpClient(agent);
  }

  getClientName(): string {
    return this.inner.getClientName();
  }

  /**
   * stripe-node retries a first attempt that failed with ECONNRESET/EPIPE whatever `maxNetworkRetries`
   * says. For a read that is harmless (a keep-alive connection closed under it). A write (any method but
   * GET) may have reached the provider before its connection dropped, so it is not retried: its error
   * reaches the caller under another code and is `indeterminate` (errors.ts).
   */
  async makeRequest(...[host, port, path, method, headers, requestData, protocol, timeout]: Parameters<Stripe.HttpClient['makeRequest']>) {
    try {
      return await this.inner.makeRequest(host, port, `${this.basePath}${path}`, method, headers, requestData, protocol, timeout);
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      if (method === 'GET' || typeof code !== 'string' || !CONNECTION_CLOSED_CODES.has(code)) throw err;
      throw Object.assign(new Error(`connection lost during a write (${code}); not retried`, { cause: err }), { code: `${code}_WRITE` });
    }
  }
}

function createClient(baseUrl: string, secretKey: string, timeoutMs: number): Stripe {
  const url = new URL(baseUrl);
  const protocol = url.protocol === 'http:' ? 'http' : 'https';
  const basePath = url.pathname.replace(/\/+$/, '');
  return new Stripe(secretKey, {
    apiVersion: CARDPAY_API_VERSION,
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : protocol === 'http' ? 80 : 443,
    protocol,
    timeout: timeoutMs,
    maxNetworkRetries: MAX_NETWORK_RETRIES,
    telemetry: false,
    httpClient: new BasePathHttpClient(basePath, agents[protocol]),
  });
}

/** One SDK client per key and address (the adapter is otherwise stateless). */
export class CardpayClients {
  private readonly clients = new Map<string, Stripe>();

  for(baseUrl: string, secretKey: string, timeoutMs: number): Stripe {
    const cacheKey = `${baseUrl}\n${timeoutMs}\n${secretKey}`;
    let client = this.clients.get(cacheKey);
    if (!client) {
      client = createClient(baseUrl, secretKey, timeoutMs);
      setBounded(this.clients, cacheKey, client, MAX_CACHED_CLIENTS);
    }
    return client;
  }
}
