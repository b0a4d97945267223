import { X509Certificate, createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import type { RateLimitRule } from '../domain/auth/rate-limiter.js';
import { parseDurationMs, parseSchedule } from './duration.js';
import { parseAllowlistEntry } from '../lib/ip-allowlist.js';
import { AES_KEY_FORMAT, decodeAesKey } from '../lib/aes-key.js';
import { providerOverrideProblem } from './provider-overrides.js';

const booleanFlag = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/**
 * A variable set to the empty string is unset, whatever its type: `VAR=` in a .env file and compose's
 * `${VAR:-}` both mean "no value", so it takes its default (or stays undefined) instead of failing
 * validation ("" is no 16-character token) or coercing to 0 (PORT="" would be a random port).
 */
function emptyIsUnset(env: unknown): unknown {
  if (typeof env !== 'object' || env === null) return env;
  return Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
}

/** True when every percent-encoded part of a connection URL decodes, as the pg driver decodes them. */
function percentDecodes(url: string): boolean {
  try {
    const u = new URL(url);
    for (const part of [u.username, u.password, u.pathname]) decodeURIComponent(part);
    return true;
  } catch {
    return false;
  }
}

/**
 * A URL starting with one of `schemes` and `://`, with a host unless `hostOptional`. `z.string().url()`
 * alone only runs `new URL()`, which takes `pay.example.com:443` or `localhost:3000` for a URL whose
 * scheme is `pay.example.com:` or `localhost:`: callbacks were registered at
 * `pay.example.com:443/v1/webhooks/…`, an address nothing can call.
 */
function urlVar(schemes: readonly string[], example: string, options: { hostOptional?: boolean } = {}) {
  const prefix = new RegExp(`^(${schemes.join('|')})://`, 'i');
  const hasHost = (value: string) => options.hostOptional === true || new URL(value).hostname !== '';
  return z
    .string()
    .refine((value) => prefix.test(value) && URL.canParse(value) && hasHost(value), `must be a URL starting with ${schemes.map((scheme) => `${scheme}://`).join(' or ')}${options.hostOptional ? '' : ', with a host'} (${example})`);
}
const httpUrlVar = (example: string) => urlVar(['http', 'https'], example);

/**
 * Upper bounds of the settings that end up in a timer (setTimeout, setInterval, AbortSignal.timeout, a
 * socket timeout). Node holds a timer's delay in 31 bits: past 2^31-1 ms (about 24.8 days) it warns and
 * fires after 1 ms, so WEBHOOK_TIMEOUT_MS=3000000000 made every webhook attempt fail at once. Each bound is
 * far below that, and far above any useful value.
 */
export const MAX_TIMER_MS = 2_147_483_647;
/** WEBHOOK_TIMEOUT_MS, PROVIDER_TIMEOUT_MS, DATABASE_ACQUIRE_TIMEOUT: 5 minutes. */
export const MAX_REQUEST_TIMEOUT_MS = 300_000;
/** SHUTDOWN_TIMEOUT_MS (SHUTDOWN_DELAY_MS is shorter than it): 1 hour. */
export const MAX_SHUTDOWN_TIMEOUT_MS = 3_600_000;
/** IDEMPOTENCY_LEASE (renewed by a timer every third of it): 1 hour. */
export const MAX_IDEMPOTENCY_LEASE_MS = 3_600_000;
/** DELIVERY_SWEEP_INTERVAL (a running sweep checks its lock every interval): 1 day. */
export const MAX_SWEEP_INTERVAL_MS = 86_400_000;

/** SANDBOX_CALLBACK_DELAY_MS, SANDBOX_LATENCY_MS: 2 minutes, past any provider's callback or answer a test waits for. */
const MAX_SANDBOX_DELAY_MS = 120_000;
const SANDBOX_DELAY_BOUND = `must be at most ${MAX_SANDBOX_DELAY_MS} (2 minutes)`;

/** A whole number of milliseconds from 1 to `max`, for a variable used in a timer. */
const timerMs = (max: number, what: string) =>
  z.coerce.number().int().positive().max(max, `must be at most ${max} (${what}): it is used in a timer`);

/** The NODE_ENV values a process accepts. */
const NODE_ENVS = ['development', 'test', 'production'] as const;

const EnvSchema = z.preprocess(emptyIsUnset, z.object({
  // Anything but `production` runs as development (simulators on, private webhook URLs allowed, no rate
  // limits): a `Production` or `prod` meant for live money must stop the boot, not run as development.
  NODE_ENV: z
    .enum(NODE_ENVS, { errorMap: () => ({ message: `must be ${NODE_ENVS.join(', ')} (unset: development); any other value would run as development` }) })
    .default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).optional(),
  WORKER_PORT: z.coerce.number().int().min(0).max(65535).default(3001),
  METRICS_TOKEN: z.string().min(16, 'METRICS_TOKEN must be at least 16 characters').optional(),
  MIGRATE_ON_BOOT: booleanFlag.default('true'),
  SHUTDOWN_TIMEOUT_MS: timerMs(MAX_SHUTDOWN_TIMEOUT_MS, '1 hour').default(30_000),
  SHUTDOWN_DELAY_MS: z.coerce.number().int().min(0).default(0),
  // No host: the default one, or a Unix socket's directory in `?host=`.
  DATABASE_URL: urlVar(['postgres', 'postgresql'], 'postgres://user:password@host:5432/payments', { hostOptional: true })
    // The pg driver percent-decodes the user, password and database name; a stray `%` failed at connect, unnamed.
    .refine((url) => percentDecodes(url), 'the user, password or database name holds a % that is not percent-encoding (write % as %25)')
    .optional(),
  DATABASE_POOL_MAX: z.coerce.number().int().min(2).max(1000).default(20),
  DATABASE_ACQUIRE_TIMEOUT: z.string().default('5s'),
  IDEMPOTENCY_LEASE: z.string().default('60s'),
  IDEMPOTENCY_KEY_RETENTION: z.string().default('24h'),
  IDEMPOTENCY_KEY_PRUNE_INTERVAL: z.string().default('1h'),
  PUBLIC_BASE_URL: httpUrlVar('https://pay.example.com').optional(),
  ENCRYPTION_KEY: z.string().optional(),
  DECRYPTION_KEYS: z.string().optional(),
  ROLE: z.enum(['all', 'api', 'worker']).default('all'),
  SANDBOX: booleanFlag.optional(),
  SANDBOX_CONTROLS: booleanFlag.optional(),
  // Both end up in timers and in `now() + delay` timestamps: a huge delay threw RangeError (Invalid Date) at the first callback.
  SANDBOX_CALLBACK_DELAY_MS: z.coerce.number().int().min(0).max(MAX_SANDBOX_DELAY_MS, SANDBOX_DELAY_BOUND).default(1000),
  SANDBOX_LATENCY_MS: z.coerce.number().int().min(0).max(MAX_SANDBOX_DELAY_MS, SANDBOX_DELAY_BOUND).default(0),
  CARDPAY_BASE_URL: httpUrlVar('https://proxy.internal:8443').optional(),
  WALLETPAY_BASE_URL: httpUrlVar('https://proxy.internal:8443').optional(),
  MOBILEMONEY_BASE_URL: httpUrlVar('https://proxy.internal:8443').optional(),
  WEBHOOK_RETRY_SCHEDULE: z.string().default('30s,2m,10m,30m,2h'),
  WEBHOOK_TIMEOUT_MS: timerMs(MAX_REQUEST_TIMEOUT_MS, '5 minutes').default(30_000),
  WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: z.coerce.number().int().positive().default(16),
  WEBHOOK_ALLOW_PRIVATE_URLS: booleanFlag.optional(),
  WEBHOOK_DNS_SERVERS: z.string().optional(),
  MOBILEMONEY_CALLBACK_ALLOWLIST: z.string().optional(),
  MOBILEMONEY_CERT_PATH: z.string().optional(),
  MOBILEMONEY_SANDBOX_CERT_PATH: z.string().optional(),
  MOBILEMONEY_LIVE_CERT_PATH: z.string().optional(),
  TRUST_PROXY: z.string().optional(),
  PROVIDER_TIMEOUT_MS: timerMs(MAX_REQUEST_TIMEOUT_MS, '5 minutes').default(15_000),
  DELIVERY_SWEEP_INTERVAL: z.string().default('30s'),
  EVENT_RETENTION: z.string().default('30d'),
  EVENT_PRUNE_INTERVAL: z.string().default('1h'),
  PROVIDER_EVENT_RETENTION: z.string().default('30d'),
  PAYMENT_COUNT_FOLD_INTERVAL: z.string().default('5s'),
  STATUS_SYNC_SCHEDULE: z.string().default('1m,5m,15m,1h,6h,24h,48h'),
  STATUS_SYNC_POLL_INTERVAL: z.string().default('30s'),
  MOBILEMONEY_RECONCILE_INTERVAL: z.string().default('15m'),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(0).optional(),
  RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(0).optional(),
  CALLBACK_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(0).optional(),
  FAILED_AUTH_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(0).optional(),
  RATE_LIMIT_PRUNE_INTERVAL: z.string().default('1m'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATA_DIR: z.string().default('.data'),
}));

/** The operator's published callback sources (community-sourced list; configurable). */
const DEFAULT_MOBILEMONEY_ALLOWLIST = [
  '196.201.214.200', '196.201.214.206', '196.201.214.207', '196.201.214.208',
  '196.201.213.114', '196.201.213.44', '196.201.212.127', '196.201.212.129',
  '196.201.212.136', '196.201.212.138', '196.201.212.74', '196.201.212.69',
];

export interface AppConfig {
  env: string;
  production: boolean;
  port: number;
  /** Address the HTTP servers bind: loopback by default while the sandbox is on, every interface otherwise. */
  host: string;
  /** Port of the worker role's health, readiness and metrics server. */
  workerPort: number;
  /** When set, GET /metrics requires `Authorization: Bearer <token>`. */
  metricsToken: string | undefined;
  /** Apply pending migrations at boot (otherwise boot refuses to run on an out-of-date schema). */
  migrateOnBoot: boolean;
  /** After SIGTERM/SIGINT, exit (code 1) if the graceful stop has not finished by then. */
  shutdownTimeoutMs: number;
  /**
   * After SIGTERM/SIGINT, how long the process goes on listening (and working) while /readyz answers 503
   * before it stops: the time an orchestrator takes to stop routing new connections to it. Part of shutdownTimeoutMs.
   */
  shutdownDelayMs: number;
  databaseUrl: string | undefined;
  /** Most connections the process's ORM pool opens (Agenda's pool takes at most 8, the scheduling lock pool 2). */
  databasePoolMax: number;
  /** How long a query waits for a free pooled connection; past it the request is answered 503. */
  databaseAcquireTimeoutMs: number;
  /**
   * How long an idempotency key's claim stays exclusive. Longer than a provider call can take, so a
   * live request is never taken over; after it, a retry resumes a request that died.
   */
  idempotencyLeaseMs: number;
  /** How long an idempotency key replays after its last change; a key past it is pruned and is new again (payment-creation keys excepted). */
  idempotencyKeyRetentionMs: number;
  /** How often a worker prunes idempotency keys past the retention period. */
  idempotencyKeyPruneIntervalMs: number;
  /** Address providers call back on; filled from the listening port when not configured. */
  publicBaseUrl: string;
  /** Whether PUBLIC_BASE_URL was given (else publicBaseUrl is the listening address, filled in at listen). */
  publicBaseUrlConfigured: boolean;
  /**
   * Where this process serves the simulators itself (SANDBOX on): its API listener, or a worker's
   * WORKER_PORT one, on this machine; set at listen, null until then. Its provider calls go there
   * (providers/base-url.ts), not out through PUBLIC_BASE_URL, where a worker serves nothing.
   */
  localSimulatorsBaseUrl: string | null;
  encryptionKey: string | undefined;
  /** More keys that open secrets sealed with them (a rotation's old key, or the next one), never sealing. */
  decryptionKeys: string[];
  role: 'all' | 'api' | 'worker';
  sandbox: boolean;
  /**
   * Whether the simulators serve their test controls (`/sandbox/<provider>/_control/…`: outages, lost and
   * held answers, misreports), which take no credentials and act for every merchant: off under
   * NODE_ENV=production unless SANDBOX_CONTROLS=true, on elsewhere. Off, each answers as a path the
   * simulated provider does not have.
   */
  sandboxControls: boolean;
  sandboxCallbackDelayMs: number;
  /** Every simulator request waits this long before it is answered: a slow provider network. */
  sandboxLatencyMs: number;
  providerBaseUrls: { cardpay?: string; walletpay?: string; mobilemoney?: string };
  providerTimeoutMs: number;
  webhookRetryScheduleMs: number[];
  webhookTimeoutMs: number;
  /** Webhook attempts one merchant may have in flight at once across all workers: a slow endpoint cannot take every slot. */
  webhookMaxInFlightPerMerchant: number;
  /** Nameservers merchant webhook hosts are resolved with (`ip`, `ip:port`, `[ipv6]:port`); undefined: the system's (/etc/resolv.conf). */
  webhookDnsServers: string[] | undefined;
  webhookAllowPrivateUrls: boolean;
  deliverySweepIntervalMs: number;
  /** How long events (GET /v1/events) and their deliveries are kept (EventLog.prune says which are kept longer). */
  eventRetentionMs: number;
  /** How often a worker prunes events past the retention period. */
  eventPruneIntervalMs: number;
  providerEventRetentionMs: number;
  /** How often a worker folds the payments' count changes into the folded counts. */
  paymentCountFoldIntervalMs: number;
  statusSyncScheduleMs: number[];
  /** How often a worker looks for pending payments due a status sync. */
  statusSyncPollMs: number;
  /** Automatic mobile-money reconciliation interval per merchant. */
  mobilemoneyReconcileIntervalMs: number;
  /** Requests per API key per window; a limit of 0 turns rate limiting off. */
  rateLimit: RateLimitRule;
  /** Provider-callback requests per source address per window (callbacks carry no API key). */
  callbackRateLimit: RateLimitRule;
  /** Failed authentications (missing, unknown or revoked API key) per source address per window. */
  failedAuthRateLimit: RateLimitRule;
  /** How often a worker deletes the rate-limit windows that have ended. */
  rateLimitPruneIntervalMs: number;
  mobilemoneyCallbackAllowlist: string[];
  mobilemoneyCertPath: string | undefined;
  /** The operator's X.509 certificates that initiator passwords are encrypted with (SecurityCredential), per credential env. */
  mobilemoneySecurityCertPaths: { sandbox?: string; live?: string };
  /** Express's `trust proxy`: which proxies' X-Forwarded-For is believed for the client address (off by default). */
  trustProxy: TrustProxy;
  logLevel: string;
  dataDir: string;
}

export class ConfigError extends Error {}

/**
 * Production's per-key default: 100 requests a second, the card provider's own live limit per account
 * (a key sending more would only collect the provider's 429s). Off elsewhere unless configured.
 */
export const DEFAULT_RATE_LIMIT_PER_SECOND = 100;
/** Production's per-source-address default for provider callbacks: 20 a second sustained, per address. */
export const DEFAULT_CALLBACK_LIMIT_PER_MINUTE = 1200;
/**
 * Production's per-source-address default for failed authentications: one a second sustained, plenty for
 * a client whose key was just rotated, far too few to try keys.
 */
export const DEFAULT_FAILED_AUTH_LIMIT_PER_MINUTE = 60;

function apiKeyRateLimit(perMinute: number | undefined, perSecond: number | undefined, production: boolean): RateLimitRule {
  if (perMinute !== undefined && perSecond !== undefined) throw new ConfigError('set RATE_LIMIT_PER_MINUTE or RATE_LIMIT_PER_SECOND, not both');
  if (perSecond !== undefined) return { limit: perSecond, windowMs: 1000 };
  if (perMinute !== undefined) return { limit: perMinute, windowMs: 60_000 };
  return production ? { limit: DEFAULT_RATE_LIMIT_PER_SECOND, windowMs: 1000 } : { limit: 0, windowMs: 60_000 };
}

/** false (the socket's address is the client's), a hop count, or trusted addresses/subnets. */
export type TrustProxy = false | number | string[];

/** WEBHOOK_DNS_SERVERS: comma-separated `ip`, `ip:port` or `[ipv6]:port` (the forms c-ares' setServers takes). */
export function parseDnsServers(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const entries = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const entry of entries) {
    const match = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry) ?? /^([^:]+)(?::(\d+))?$/.exec(entry) ?? [entry, entry, undefined];
    const [, address, port] = match;
    const portOk = port === undefined || (Number(port) >= 1 && Number(port) <= 65_535);
    const addressOk = isIP(address ?? '') !== 0 && !(entry.startsWith('[') && isIP(address!) !== 6);
    if (!addressOk || !portOk) {
      throw new ConfigError(`invalid WEBHOOK_DNS_SERVERS entry "${entry}": use comma-separated IP addresses, each with an optional port (9.9.9.9, 10.0.0.2:5353, [2620:fe::fe]:53)`);
    }
  }
  if (entries.length === 0) throw new ConfigError('WEBHOOK_DNS_SERVERS lists no server: leave it unset for the system\'s nameservers');
  return entries;
}

/**
 * TRUST_PROXY: unset/false, a hop count ("1"), or a comma-separated list ("loopback, 10.0.0.0/8").
 * Not `true`: Express would then take the left-most X-Forwarded-For entry, which the client writes, so
 * anyone could pass the mobile-money allowlist and spread over the per-address limits.
 */
export function parseTrustProxy(raw: string | undefined): TrustProxy {
  const value = raw?.trim() ?? '';
  if (value === '' || /^(false|0|no)$/i.test(value)) return false;
  if (/^(true|yes)$/i.test(value)) {
    throw new ConfigError(
      'TRUST_PROXY=true would believe the client-written left-most X-Forwarded-For entry: set the number of proxies in front (1 behind one load balancer) or their addresses/subnets',
    );
  }
  if (/^\d{1,2}$/.test(value)) return Number(value);
  const list = value.split(',').map((s) => s.trim()).filter(Boolean);
  const named = ['loopback', 'linklocal', 'uniquelocal'];
  for (const entry of list) {
    if (!named.includes(entry) && !isProxyAddress(entry)) {
      throw new ConfigError(`invalid TRUST_PROXY entry "${entry}": use a hop count, or IP addresses/subnets (or loopback, linklocal, uniquelocal)`);
    }
  }
  return list;
}

/**
 * An address or subnet Express's `trust proxy` (proxy-addr) compiles: an entry it refuses ("10.0.0.0/33",
 * "1.2.3", "::1/200", a /0) would throw only when the API sets it, after listening and migrating, with a
 * message that does not name TRUST_PROXY. Stricter where proxy-addr is lax: IPv4 in four decimal parts
 * ("010.0.0.1" is octal to it), a prefix length rather than a dotted netmask.
 */
function isProxyAddress(entry: string): boolean {
  const slash = entry.lastIndexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const ipv4 = ipaddr.IPv4.isValidFourPartDecimal(address);
  if (!ipv4 && !ipaddr.IPv6.isValid(address)) return false;
  if (slash === -1) return true;
  const prefix = entry.slice(slash + 1);
  return /^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (ipv4 ? 32 : 128);
}

/**
 * MOBILEMONEY_CALLBACK_ALLOWLIST: comma-separated addresses and CIDRs. Every entry must parse as the
 * callback check parses it: a typo ("1.2.3.4 5.6.7.8", "10.0.0.0/33") would otherwise match nothing
 * and every live callback would be refused.
 */
export function parseCallbackAllowlist(raw: string | undefined): string[] {
  if (raw === undefined) return DEFAULT_MOBILEMONEY_ALLOWLIST;
  const entries = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const entry of entries) {
    try {
      parseAllowlistEntry(entry);
    } catch {
      throw new ConfigError(`invalid MOBILEMONEY_CALLBACK_ALLOWLIST entry "${entry}": use comma-separated IP addresses or CIDRs (196.201.214.200, 196.201.212.0/24)`);
    }
  }
  if (entries.length === 0) throw new ConfigError('MOBILEMONEY_CALLBACK_ALLOWLIST lists no address: leave it unset for the operator\'s published addresses');
  return entries;
}

const DURATION_HINT = 'a number with a unit: 250ms, 30s, 5m, 1h, 30d';

/**
 * An interval, timeout or retention period: longer than 0. At 0 an interval would spin (a worker querying
 * the database hundreds of times a second), Agenda's every(0) would make a repeating job a one-shot job,
 * a retention of 0 would delete events as they are written.
 */
function durationVar(name: string, text: string, max?: { ms: number; text: string }): number {
  let ms: number;
  try {
    ms = parseDurationMs(text);
  } catch {
    throw new ConfigError(`${name}: "${text}" is not a duration (${DURATION_HINT})`);
  }
  if (ms <= 0) throw new ConfigError(`${name} must be longer than 0 (${DURATION_HINT})`);
  // One used in a timer (see MAX_TIMER_MS).
  if (max && ms > max.ms) throw new ConfigError(`${name} must be at most ${max.text}: it is used in a timer`);
  return ms;
}

/**
 * An AES-256 key as `openssl rand -base64 32` prints it. Checked here, before any connection, so that a
 * hex key or a truncated one stops every process (migrate, admin, api, worker) with exit 2 naming the
 * variable, instead of a migrate that succeeds and processes that then fail after connecting.
 */
function aesKeyVar(name: string, value: string): void {
  if (!decodeAesKey(value)) throw new ConfigError(`${name} must be ${AES_KEY_FORMAT}`);
}

/** A comma-separated list of delays: 0 is allowed in it (the next try at once), the list being finite. */
function scheduleVar(name: string, text: string): number[] {
  try {
    return parseSchedule(text);
  } catch (err) {
    throw new ConfigError(`${name}: ${(err as Error).message} (${DURATION_HINT})`);
  }
}

/**
 * A mobilemoney operator certificate file, read and parsed at boot as it is used later: a wrong path or
 * a file that is no certificate stops the process here, naming the variable, instead of booting ready
 * and failing at the first live reversal or status query, or answering signed callbacks 500.
 * `x509`: an X.509 certificate, PEM or DER (SecurityCredential); `public-key`: PEM, a certificate or a
 * public key (callback signatures).
 */
function certificateFile(name: string, file: string | undefined, kind: 'x509' | 'public-key'): string | undefined {
  if (file === undefined) return undefined;
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new ConfigError(`${name}: ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  try {
    if (kind === 'x509') new X509Certificate(bytes);
    else createPublicKey(bytes.toString('utf8'));
  } catch {
    throw new ConfigError(`${name}: ${file} is not ${kind === 'x509' ? 'an X.509 certificate (PEM or DER)' : 'a PEM certificate or public key'}`);
  }
  return file;
}

/**
 * Reads and validates the environment once, at boot; a bad value stops the process with a clear message.
 * `encryptionKeyOptional`: for the admin CLI's commands that never use the key (`key revoke` from a
 * bastion shell with DATABASE_URL alone); an ENCRYPTION_KEY that is set is still checked.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: { encryptionKeyOptional?: boolean } = {}): AppConfig {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new ConfigError(`invalid configuration: ${issues}`);
  }
  const e = parsed.data;
  const production = e.NODE_ENV === 'production';
  if (production && !e.ENCRYPTION_KEY && !options.encryptionKeyOptional) throw new ConfigError('ENCRYPTION_KEY is required when NODE_ENV=production');
  // Without it a production process would start the development database (embedded, in ./.data) for live money.
  if (production && !e.DATABASE_URL) throw new ConfigError('DATABASE_URL is required when NODE_ENV=production (the embedded PostgreSQL is for development and tests)');
  if (e.ENCRYPTION_KEY !== undefined) aesKeyVar('ENCRYPTION_KEY', e.ENCRYPTION_KEY);
  const decryptionKeys = (e.DECRYPTION_KEYS ?? '').split(',').map((k) => k.trim()).filter(Boolean);
  for (const key of decryptionKeys) aesKeyVar('each of DECRYPTION_KEYS', key);
  const schedule = scheduleVar('WEBHOOK_RETRY_SCHEDULE', e.WEBHOOK_RETRY_SCHEDULE);
  const statusSync = scheduleVar('STATUS_SYNC_SCHEDULE', e.STATUS_SYNC_SCHEDULE);
  const acquireTimeoutMs = durationVar('DATABASE_ACQUIRE_TIMEOUT', e.DATABASE_ACQUIRE_TIMEOUT, { ms: MAX_REQUEST_TIMEOUT_MS, text: '5m' });
  const leaseMs = durationVar('IDEMPOTENCY_LEASE', e.IDEMPOTENCY_LEASE, { ms: MAX_IDEMPOTENCY_LEASE_MS, text: '1h' });
  const keyRetentionMs = durationVar('IDEMPOTENCY_KEY_RETENTION', e.IDEMPOTENCY_KEY_RETENTION);
  // A claim's lease is renewed every third of its length while its provider calls run (IdempotencyKeys.holding),
  // so it need not cover the longest path (walletpay capture: up to 8 requests with token fetches and a 401's
  // repeat; mobilemoney: a token wait of up to 2 timeouts first). Twice the timeout leaves every renewal
  // ample time to land even while one provider request is at its timeout.
  if (leaseMs <= 2 * e.PROVIDER_TIMEOUT_MS) {
    throw new ConfigError('IDEMPOTENCY_LEASE must be longer than twice PROVIDER_TIMEOUT_MS, or a live request could be taken over');
  }
  // A key must outlive the time a concurrent request may wait on it and the lease of the request holding it.
  if (keyRetentionMs <= leaseMs) throw new ConfigError('IDEMPOTENCY_KEY_RETENTION must be longer than IDEMPOTENCY_LEASE');
  // Shorter than the providers' own redelivery (3 days) would let a retried notification's id be forgotten.
  const providerEventRetentionMs = durationVar('PROVIDER_EVENT_RETENTION', e.PROVIDER_EVENT_RETENTION);
  if (providerEventRetentionMs < 4 * 24 * 3_600_000) throw new ConfigError('PROVIDER_EVENT_RETENTION must be at least 4d (providers redeliver a notification for up to 3 days)');
  if (e.SHUTDOWN_DELAY_MS >= e.SHUTDOWN_TIMEOUT_MS) throw new ConfigError('SHUTDOWN_DELAY_MS must be shorter than SHUTDOWN_TIMEOUT_MS (the delay is part of the stop\'s budget)');
  // What a stop leaves the requests under way: one that has just sent its provider call must get the answer
  // (or the timeout) and record it, or the stop cuts a payment left pending with its key leased.
  if (e.SHUTDOWN_TIMEOUT_MS - e.SHUTDOWN_DELAY_MS <= e.PROVIDER_TIMEOUT_MS) {
    throw new ConfigError(
      'SHUTDOWN_TIMEOUT_MS less SHUTDOWN_DELAY_MS (what a stop leaves the requests under way) must be longer than PROVIDER_TIMEOUT_MS, or a stop could cut a payment in the middle of its provider call: raise SHUTDOWN_TIMEOUT_MS (and the orchestrator\'s grace period with it), or lower SHUTDOWN_DELAY_MS or PROVIDER_TIMEOUT_MS',
    );
  }
  const sandbox = e.SANDBOX ?? !production;
  // The simulators call the service back at the address the api registered (its PUBLIC_BASE_URL), and the
  // worker's jobs send those callbacks: with private addresses refused (production), only the sender's own
  // PUBLIC_BASE_URL is let through (container.ts sandboxEgress). Unset, each role has its own default (the
  // api its listening address, a worker http://localhost:$PORT), so every callback a worker sent would be refused.
  if (production && sandbox && e.ROLE !== 'all' && !e.PUBLIC_BASE_URL) {
    throw new ConfigError(
      `PUBLIC_BASE_URL is required when NODE_ENV=production with SANDBOX on and ROLE=${e.ROLE}: the api and the worker must name the same address (the simulators' callbacks, sent by the worker, go to the one the api registered; the address must reach the api from the worker)`,
    );
  }
  const providerBaseUrls = { cardpay: e.CARDPAY_BASE_URL, walletpay: e.WALLETPAY_BASE_URL, mobilemoney: e.MOBILEMONEY_BASE_URL };
  for (const [provider, url] of Object.entries(providerBaseUrls) as [keyof typeof providerBaseUrls, string | undefined][]) {
    const problem = providerOverrideProblem(provider, url, production);
    if (problem) throw new ConfigError(problem);
  }
  return {
    env: e.NODE_ENV,
    production,
    port: e.PORT,
    // The simulators accept any credentials: with them mounted, only this machine may reach the service.
    host: e.HOST ?? (sandbox ? '127.0.0.1' : '0.0.0.0'),
    workerPort: e.WORKER_PORT,
    metricsToken: e.METRICS_TOKEN,
    migrateOnBoot: e.MIGRATE_ON_BOOT,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    shutdownDelayMs: e.SHUTDOWN_DELAY_MS,
    databaseUrl: e.DATABASE_URL,
    databasePoolMax: e.DATABASE_POOL_MAX,
    databaseAcquireTimeoutMs: acquireTimeoutMs,
    idempotencyLeaseMs: leaseMs,
    idempotencyKeyRetentionMs: keyRetentionMs,
    idempotencyKeyPruneIntervalMs: durationVar('IDEMPOTENCY_KEY_PRUNE_INTERVAL', e.IDEMPOTENCY_KEY_PRUNE_INTERVAL),
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/$/, ''),
    publicBaseUrlConfigured: e.PUBLIC_BASE_URL !== undefined,
    localSimulatorsBaseUrl: null,
    encryptionKey: e.ENCRYPTION_KEY,
    decryptionKeys,
    role: e.ROLE,
    sandbox,
    sandboxControls: e.SANDBOX_CONTROLS ?? !production,
    sandboxCallbackDelayMs: e.SANDBOX_CALLBACK_DELAY_MS,
    sandboxLatencyMs: e.SANDBOX_LATENCY_MS,
    providerBaseUrls,
    providerTimeoutMs: e.PROVIDER_TIMEOUT_MS,
    webhookRetryScheduleMs: schedule,
    webhookTimeoutMs: e.WEBHOOK_TIMEOUT_MS,
    webhookMaxInFlightPerMerchant: e.WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT,
    webhookDnsServers: parseDnsServers(e.WEBHOOK_DNS_SERVERS),
    webhookAllowPrivateUrls: e.WEBHOOK_ALLOW_PRIVATE_URLS ?? !production,
    deliverySweepIntervalMs: durationVar('DELIVERY_SWEEP_INTERVAL', e.DELIVERY_SWEEP_INTERVAL, { ms: MAX_SWEEP_INTERVAL_MS, text: '24h' }),
    eventRetentionMs: durationVar('EVENT_RETENTION', e.EVENT_RETENTION),
    eventPruneIntervalMs: durationVar('EVENT_PRUNE_INTERVAL', e.EVENT_PRUNE_INTERVAL),
    providerEventRetentionMs,
    paymentCountFoldIntervalMs: durationVar('PAYMENT_COUNT_FOLD_INTERVAL', e.PAYMENT_COUNT_FOLD_INTERVAL),
    statusSyncScheduleMs: statusSync,
    statusSyncPollMs: durationVar('STATUS_SYNC_POLL_INTERVAL', e.STATUS_SYNC_POLL_INTERVAL),
    mobilemoneyReconcileIntervalMs: durationVar('MOBILEMONEY_RECONCILE_INTERVAL', e.MOBILEMONEY_RECONCILE_INTERVAL),
    rateLimit: apiKeyRateLimit(e.RATE_LIMIT_PER_MINUTE, e.RATE_LIMIT_PER_SECOND, production),
    callbackRateLimit: { limit: e.CALLBACK_RATE_LIMIT_PER_MINUTE ?? (production ? DEFAULT_CALLBACK_LIMIT_PER_MINUTE : 0), windowMs: 60_000 },
    failedAuthRateLimit: { limit: e.FAILED_AUTH_RATE_LIMIT_PER_MINUTE ?? (production ? DEFAULT_FAILED_AUTH_LIMIT_PER_MINUTE : 0), windowMs: 60_000 },
    rateLimitPruneIntervalMs: durationVar('RATE_LIMIT_PRUNE_INTERVAL', e.RATE_LIMIT_PRUNE_INTERVAL),
    mobilemoneyCallbackAllowlist: parseCallbackAllowlist(e.MOBILEMONEY_CALLBACK_ALLOWLIST),
    mobilemoneyCertPath: certificateFile('MOBILEMONEY_CERT_PATH', e.MOBILEMONEY_CERT_PATH, 'public-key'),
    mobilemoneySecurityCertPaths: {
      sandbox: certificateFile('MOBILEMONEY_SANDBOX_CERT_PATH', e.MOBILEMONEY_SANDBOX_CERT_PATH, 'x509'),
      live: certificateFile('MOBILEMONEY_LIVE_CERT_PATH', e.MOBILEMONEY_LIVE_CERT_PATH, 'x509'),
    },
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    logLevel: e.LOG_LEVEL,
    dataDir: e.DATA_DIR,
  };
}
