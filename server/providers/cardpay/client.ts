import http from 'node:http';
import https from 'node:https';
import Stripe from 'stripe';

/** The API version this adapter is written against (the one stripe-node 22.5 pins). */
export const CARDPAY_API_VERSION = '2026-07-29.dahlia' as const;

/**
 * How long the provider keeps an idempotency key and its answer: "keys are pruned after at least 24 hours"
 * (docs.stripe.com/api/idempotent_requests). A request repeated after that is a new request.
 */
export const IDEMPOTENCY_KEY_RETENTION_MS = 24 * 3_600_000;

/** At most one automatic retry, always with the caller's idempotency key (stripe-node re-sends the same headers). */
const MAX_NETWORK_RETRIES = 1;
/** Clients kept per (base URL, timeout, key); bounded so a long-running process cannot grow without limit. */
const MAX_CACHED_CLIENTS = 200;
/**
 * How long an idle keep-alive connection is kept. The SDK's default agent has no idle timeout, and Node
 * honours a server's `Keep-Alive: timeout=N` hint (closing a second early) only when the agent has one;
 * without it a request can take a connection the provider is closing at that moment and fail with
 * ECONNRESET, which stripe-node retries only on a first attempt.
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

  makeRequest(...[host, port, path, method, headers, requestData, protocol, timeout]: Parameters<Stripe.HttpClient['makeRequest']>) {
    return this.inner.makeRequest(host, port, `${this.basePath}${path}`, method, headers, requestData, protocol, timeout);
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
      if (this.clients.size >= MAX_CACHED_CLIENTS) this.clients.delete(this.clients.keys().next().value!);
      this.clients.set(cacheKey, client);
    }
    return client;
  }
}
