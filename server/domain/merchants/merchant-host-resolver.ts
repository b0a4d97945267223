import dns, { type LookupAddress } from 'node:dns';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { setBounded } from '../../lib/bounded-map.js';

/**
 * Resolves merchants' hosts (webhook URLs, at delivery and when registered; payments' and register-pull's
 * callback_url) without libuv's thread pool. `dns.lookup` (getaddrinfo) runs on that
 * pool's 4 threads, shared with every other lookup of the process (provider calls through fetch too):
 * a merchant whose nameserver never answers would hold threads 5–10 s per lookup and stall everyone's.
 * Here queries go over c-ares (`dns.promises.Resolver`, sockets on the event loop), each bounded by
 * DNS_LOOKUP_TIMEOUT_MS; one host's concurrent lookups share one query, and one merchant has at most
 * MAX_LOOKUPS_PER_MERCHANT hosts being resolved at once. Names in /etc/hosts (localhost in development)
 * are answered from that file, as getaddrinfo would.
 */

/** How long a lookup may take, waiting for its merchant's turn included; then it fails as timed out. */
export const DNS_LOOKUP_TIMEOUT_MS = 5_000;
/** c-ares: two tries, the first waiting 1.5 s, the second longer (it backs off): about 4 s in all, within the lookup's timeout. */
const QUERY_TIMEOUT_MS = 1_500;
const QUERY_TRIES = 2;
/** Hosts one merchant may have being resolved at once (its attempts to one host share a query). */
export const MAX_LOOKUPS_PER_MERCHANT = 2;
/** Once one address family answered, how long the other still gets (a nameserver that drops AAAA queries). */
const OTHER_FAMILY_GRACE_MS = 250;
/** Answers are kept for their TTL, at most this long, for at most MAX_CACHED_HOSTS hosts. */
const MAX_CACHE_MS = 60_000;
const MAX_CACHED_HOSTS = 10_000;
const HOSTS_FILE = '/etc/hosts';
const HOSTS_FILE_REREAD_MS = 30_000;

export const DNS_TIMEOUT_CODE = 'EDNSTIMEOUT';

/** The error of a lookup that got no answer in time; its message is what the attempt log shows. */
export class DnsTimeoutError extends Error {
  readonly code = DNS_TIMEOUT_CODE;
  constructor(host: string) {
    super(`DNS lookup for ${host} timed out`);
  }
}

/** No address: c-ares' code (ESERVFAIL, ECONNREFUSED…), or ENOTFOUND as getaddrinfo says for no such name or no record. */
const noAddress = (host: string, code: string | undefined) =>
  Object.assign(new Error(`DNS lookup for ${host} failed`), { code: code === undefined || code === 'ENODATA' ? 'ENOTFOUND' : code });

type Answer = { addresses: LookupAddress[]; ttlMs: number };
type Query = Promise<{ ok: dns.RecordWithTtl[] } | { err: NodeJS.ErrnoException }>;

/** Names → addresses of a hosts file (`address name [alias…]`, `#` comments). */
export function parseHostsFile(text: string): Map<string, LookupAddress[]> {
  const names = new Map<string, LookupAddress[]>();
  for (const line of text.split('\n')) {
    const [address, ...aliases] = line.replace(/#.*/, '').trim().split(/\s+/);
    const family = isIP(address ?? '');
    if (family === 0) continue;
    for (const name of aliases) {
      const key = name.toLowerCase();
      names.set(key, [...(names.get(key) ?? []), { address: address!, family }]);
    }
  }
  return names;
}

export class MerchantHostResolver {
  private readonly resolver = new dns.promises.Resolver({ timeout: QUERY_TIMEOUT_MS, tries: QUERY_TRIES });
  private readonly cache = new Map<string, { addresses: LookupAddress[]; until: number }>();
  /** The query under way per host: later lookups of it wait for the same answer. */
  private readonly inFlight = new Map<string, Promise<LookupAddress[]>>();
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, Set<() => void>>();
  private hosts = { names: new Map<string, LookupAddress[]>(), readAt: -Infinity };

  /** `servers`: the nameservers to ask (`ip`, `ip:port`, `[ipv6]:port`); the system's by default. */
  constructor(servers?: readonly string[]) {
    if (servers && servers.length > 0) this.resolver.setServers([...servers]);
  }

  /** The addresses of `hostname`, for one of `merchantId`'s connections. */
  async lookup(merchantId: string, hostname: string): Promise<LookupAddress[]> {
    const host = hostname.toLowerCase();
    const listed = this.hostsFile().get(host) ?? (host === 'localhost' ? [{ address: '127.0.0.1', family: 4 }] : undefined);
    if (listed) return listed;
    const cached = this.cached(host);
    if (cached) return cached;
    const deadline = Date.now() + DNS_LOOKUP_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DnsTimeoutError(hostname)), DNS_LOOKUP_TIMEOUT_MS);
    });
    try {
      return await Promise.race([this.answer(merchantId, host, deadline), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A cached answer, the query under way for the host, or a new query once the merchant has a free turn. */
  private async answer(merchantId: string, host: string, deadline: number): Promise<LookupAddress[]> {
    for (;;) {
      const cached = this.cached(host);
      if (cached) return cached;
      const shared = this.inFlight.get(host);
      if (shared) return shared;
      if (Date.now() >= deadline) throw new DnsTimeoutError(host);
      if ((this.running.get(merchantId) ?? 0) < MAX_LOOKUPS_PER_MERCHANT) break;
      await new Promise<void>((resolve) => {
        const wake = this.waiting.get(merchantId) ?? new Set();
        this.waiting.set(merchantId, wake.add(resolve));
        setTimeout(resolve, Math.max(0, deadline - Date.now())).unref();
      });
    }
    this.running.set(merchantId, (this.running.get(merchantId) ?? 0) + 1);
    const done = () => {
      const left = (this.running.get(merchantId) ?? 1) - 1;
      if (left > 0) this.running.set(merchantId, left);
      else this.running.delete(merchantId);
      const wake = this.waiting.get(merchantId);
      this.waiting.delete(merchantId);
      wake?.forEach((resolve) => resolve());
    };
    const query = this.resolve(host, done).then(({ addresses, ttlMs }) => {
      if (ttlMs > 0) this.remember(host, addresses, ttlMs);
      return addresses;
    });
    const shared = query.finally(() => this.inFlight.delete(host));
    this.inFlight.set(host, shared);
    return shared;
  }

  /**
   * A and AAAA at once. Answers as soon as both did, or one gave addresses and the other had
   * OTHER_FAMILY_GRACE_MS more; `settled` runs once both queries are over (the merchant's turn ends then).
   */
  private async resolve(host: string, settled: () => void): Promise<Answer> {
    const settle = (q: Promise<dns.RecordWithTtl[]>): Query => q.then((ok) => ({ ok }), (err: NodeJS.ErrnoException) => ({ err }));
    const queries = [settle(this.resolver.resolve4(host, { ttl: true })), settle(this.resolver.resolve6(host, { ttl: true }))];
    void Promise.all(queries).then(settled);
    const first = await Promise.race(queries);
    const results = 'ok' in first && first.ok.length > 0
      ? await Promise.race([Promise.all(queries), new Promise<null>((r) => setTimeout(() => r(null), OTHER_FAMILY_GRACE_MS).unref())])
        ?? [first]
      : await Promise.all(queries);
    const addresses: LookupAddress[] = [];
    let ttlMs = MAX_CACHE_MS;
    let timedOut = false;
    let failure: string | undefined;
    for (const result of results) {
      if ('err' in result) {
        timedOut ||= result.err.code === 'ETIMEOUT';
        if (result.err.code !== 'ENOTFOUND') failure ??= result.err.code;
        continue;
      }
      for (const record of result.ok) {
        addresses.push({ address: record.address, family: isIP(record.address) });
        ttlMs = Math.min(ttlMs, record.ttl * 1000);
      }
    }
    // IPv4 first: not every network this runs on routes IPv6.
    addresses.sort((a, b) => a.family - b.family);
    if (addresses.length > 0) return { addresses, ttlMs };
    throw timedOut ? new DnsTimeoutError(host) : noAddress(host, failure);
  }

  private cached(host: string): LookupAddress[] | undefined {
    const entry = this.cache.get(host);
    return entry && entry.until > Date.now() ? entry.addresses : undefined;
  }

  private remember(host: string, addresses: LookupAddress[], ttlMs: number): void {
    setBounded(this.cache, host, { addresses, until: Date.now() + ttlMs }, MAX_CACHED_HOSTS);
  }

  /** /etc/hosts, read again at most every HOSTS_FILE_REREAD_MS (a small local file: read at once). */
  private hostsFile(): Map<string, LookupAddress[]> {
    if (Date.now() - this.hosts.readAt > HOSTS_FILE_REREAD_MS) {
      let text = '';
      try {
        text = readFileSync(HOSTS_FILE, 'utf8');
      } catch {
        // No hosts file: every name goes to DNS.
      }
      this.hosts = { names: parseHostsFile(text), readAt: Date.now() };
    }
    return this.hosts.names;
  }
}
