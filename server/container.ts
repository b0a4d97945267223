import { hostname } from 'node:os';
import type { Router } from 'express';
import type { Agenda } from 'agenda';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { AppConfig } from './config/config.js';
import type { Provider } from '../contract/index.js';
import { resolveEncryptionKey } from './config/encryption-key.js';
import { ApiKeyService } from './domain/auth/api-key.service.js';
import { RateLimiter } from './domain/auth/rate-limiter.js';
import { RateLimitRetention } from './domain/auth/rate-limit-retention.js';
import { StoredSecretsCensus } from './domain/crypto/stored-secrets.js';
import { SecretBox } from './domain/crypto/secret-box.js';
import { DeliveryService } from './domain/delivery/delivery.service.js';
import { WebhookSender, refusedAsNotPublic } from './domain/delivery/webhook-sender.js';
import { EventLog } from './domain/events/event-log.js';
import { CredentialsService } from './domain/merchants/credentials.service.js';
import { MerchantHostResolver } from './domain/merchants/merchant-host-resolver.js';
import { MerchantService } from './domain/merchants/merchant.service.js';
import { createAgenda } from './jobs/agenda.js';
import { AgendaDeliveryQueue } from './jobs/delivery-queue.js';
import { alignReconciliation } from './jobs/reconcile-transactions.job.js';
import type { ReconciliationScheduling } from './jobs/job-context.js';
import type { Logger } from './observability/logger.js';
import { instrumentProvider } from './observability/instrument-provider.js';
import { Metrics } from './observability/metrics.js';
import { registerStoreMetrics } from './observability/store-metrics.js';
import { answerWithin, openOrm } from './persistence/orm.js';
import { deadlineSteps } from './lib/within-deadline.js';
import { KeyLock } from './persistence/key-lock.js';
import { Leases } from './persistence/leases.js';
import { ChangeNotifications } from './persistence/change-notifications.js';
import { NotifiedCache } from './persistence/notified-cache.js';
import type { Principal } from './domain/auth/api-key.service.js';
import { createProviderRegistry } from './providers/registry.js';
import type { ProviderRegistry } from './domain/ports.js';
import { InboundPipeline } from './domain/inbound/inbound-pipeline.js';
import { ProviderOperationsService } from './domain/operations/provider-operations.service.js';
import { SavedCardService } from './domain/cards/saved-card.service.js';
import { CardDetachService } from './domain/cards/card-detach.service.js';
import { IdempotencyKeys } from './domain/payments/idempotency-keys.js';
import { IdempotencyKeyRetention } from './domain/payments/idempotency-key-retention.js';
import { InboxRetention } from './domain/inbound/inbox-retention.js';
import { StatusQueryRetention } from './domain/inbound/status-query-retention.js';
import { PaymentHistory } from './domain/payments/payment-history.js';
import { PaymentService } from './domain/payments/payment.service.js';
import { ProviderGateway } from './domain/payments/provider-gateway.js';
import { StatusSyncService } from './domain/payments/status-sync.service.js';
import { AbandonFailedService } from './domain/payments/abandon-failed.service.js';
import { StatusWriter } from './domain/payments/status-writer.js';
import { RefundService } from './domain/refunds/refund.service.js';
import { RefundSyncService } from './domain/refunds/refund-sync.service.js';
import { sandboxModules } from './sandbox/index.js';
import { withLatency } from './sandbox/controls.js';
import { HeldAnswers } from './sandbox/held-answers.js';
import { createSandboxPool } from './sandbox/sql.js';
import type { EgressAnswer, SandboxDeps, SandboxEgress } from './sandbox/module.js';

/** Connections of the advisory-lock pool (per process). */
export const KEY_LOCK_POOL_MAX = 2;

/**
 * API keys and decrypted credentials are cached per process while the change listener vouches for them
 * (persistence/notified-cache.ts): a change anywhere reaches every process within a second.
 */
const ACCESS_CACHE = { ttlMs: 60_000, maxEntries: 10_000 };
/**
 * How long a job taken by a worker stays its own: a worker killed mid-job leaves it locked this long,
 * then any worker takes it again (the job gauges count it as waiting from then: store-metrics.ts).
 */
const AGENDA_LOCK_LIFETIME_MS = 10 * 60_000;

/**
 * /readyz's database checks give up after this: a database that does not answer (a dead host, a path
 * that died without a reset) makes it answer 503 at once instead of hanging with the requests.
 */
const READINESS_QUERY_TIMEOUT_MS = 3_000;
/**
 * Whether this session can write, in the readiness check's one round trip: a failover can leave
 * DATABASE_URL on a hot standby, and default_transaction_read_only can be set on the database or role;
 * either answers reads while every payment, callback and job write fails.
 */
const SESSION_WRITABLE_SQL = "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off' AS writable";

export interface Services {
  apiKeys: ApiKeyService;
  rateLimiter: RateLimiter;
  callbackRateLimiter: RateLimiter;
  failedAuthRateLimiter: RateLimiter;
  rateLimitRetention: RateLimitRetention;
  merchants: MerchantService;
  credentials: CredentialsService;
  deliveries: DeliveryService;
  events: EventLog;
  idempotencyKeyRetention: IdempotencyKeyRetention;
  inboxRetention: InboxRetention;
  statusQueryRetention: StatusQueryRetention;
  payments: PaymentService;
  paymentHistory: PaymentHistory;
  refunds: RefundService;
  savedCards: SavedCardService;
  cardDetach: CardDetachService;
  statusSync: StatusSyncService;
  abandonFailed: AbandonFailedService;
  refundSync: RefundSyncService;
  inbound: InboundPipeline;
  operations: ProviderOperationsService;
}

/** Everything the roles need, wired once. Concrete providers are named only in providers/registry.ts. */
export interface Container {
  config: AppConfig;
  logger: Logger;
  metrics: Metrics;
  orm: MikroORM;
  agenda: Agenda;
  /** The domain's DeliveryQueue: first attempts woken by a NOTIFY after the commit, retries as Agenda jobs. */
  deliveryQueue: AgendaDeliveryQueue;
  /** Cross-process advisory locks for per-merchant job scheduling (a database-only critical section). */
  keyLock: KeyLock;
  /** What keeps each merchant's automatic reconciliation job in line with its credentials (alignReconciliation). */
  reconcileScheduling: ReconciliationScheduling;
  /** This process's LISTEN connection: drops cached keys and credentials that changed anywhere. */
  accessChanges: ChangeNotifications;
  providers: ProviderRegistry;
  secrets: SecretBox;
  /** Which of this process's keys opens the stored secrets: the boot's check and the stored_secrets gauge. */
  secretKeyCensus: StoredSecretsCensus;
  /** Resolves merchants' hosts for deliveries and URL checks (one per process: its per-merchant bound is the process's). */
  merchantHosts: MerchantHostResolver;
  services: Services;
  sandboxMounts: { path: string; router: Router }[];
  sandboxDeps: SandboxDeps;
  /** The simulators' boot work (SandboxModule.prepare); nothing when SANDBOX is off. Needs the migrated schema. */
  prepareSandboxes(): Promise<void>;
  /** /readyz's checks (`database`: it answers and takes writes), and why the process is not ready if it is not. */
  readiness(): Promise<{ checks: { database: boolean; job_runner: boolean }; reason?: string }>;
  /**
   * Set by the graceful stop: /readyz answers 503 and every response closes its connection, so
   * keep-alive clients (and load balancers) move to another process instead of holding this one open.
   */
  draining: boolean;
  /**
   * Closes the listeners and pools; with a `deadline` (ms since the epoch: the stop's), a step still
   * under way then is logged and left open, and close() resolves.
   */
  close(deadline?: number): Promise<void>;
}

export interface ContainerOptions {
  databaseUrl: string;
  logger: Logger;
  agendaProcessEveryMs?: number;
  agendaLockLifetimeMs?: number;
}

/**
 * The simulators' way out (sandbox/module.ts SandboxEgress): the merchant webhook sender's rules
 * (domain/delivery/webhook-sender.ts) — every new connection's address checked as it is made (a DNS
 * answer that changes, a host that rebinds, cannot reach the internal network), no redirect followed —
 * with private addresses allowed only when WEBHOOK_ALLOW_PRIVATE_URLS is on, or on the service's own
 * origin (PUBLIC_BASE_URL, read per send: it is filled in at listen), where the simulators call the
 * service back (an api and a worker must name the same one: in production with SANDBOX on, config.ts
 * requires it of ROLE=api and ROLE=worker processes). Lookups and connections are pooled by destination host, as if each were a merchant.
 */
function sandboxEgress(config: AppConfig, hosts: MerchantHostResolver): SandboxEgress {
  const sender = new WebhookSender(hosts, Number.MAX_SAFE_INTEGER);
  const ownOrigin = (url: URL) => URL.canParse(config.publicBaseUrl) && new URL(config.publicBaseUrl).origin === url.origin;
  return {
    async post(raw, request): Promise<EgressAnswer> {
      if (!URL.canParse(raw)) return { status: null, failure: 'connection failed' };
      const url = new URL(raw);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return { status: null, failure: 'connection failed' };
      const result = await sender.send({
        merchantId: `sandbox ${url.host}`,
        url: raw,
        body: request.body,
        headers: request.headers,
        timeoutMs: request.timeoutMs,
        allowPrivate: config.webhookAllowPrivateUrls || ownOrigin(url),
      });
      if (result.responseStatus !== null) return { status: result.responseStatus, failure: null };
      if (refusedAsNotPublic(result)) return { status: null, failure: 'refused' };
      return { status: null, failure: /no response within|timed out/.test(result.error ?? '') ? 'timeout' : 'connection failed' };
    },
  };
}

export async function createContainer(config: AppConfig, options: ContainerOptions): Promise<Container> {
  const metrics = new Metrics();
  const roundTrips = (pool: 'service' | 'jobs' | 'sandbox' | 'listener') => {
    const counter = metrics.dbRoundTrips.labels(pool);
    return () => counter.inc();
  };
  const orm = await openOrm(options.databaseUrl, config.databasePoolMax, config.databaseAcquireTimeoutMs, roundTrips('service'));
  const secrets = new SecretBox(await resolveEncryptionKey(config), config.decryptionKeys);
  const em = orm.em;
  const lockLifetimeMs = options.agendaLockLifetimeMs ?? AGENDA_LOCK_LIFETIME_MS;
  const { agenda, closePool: closeAgendaPool, answers: agendaPoolAnswers } = createAgenda({
    databaseUrl: options.databaseUrl,
    // The host too: in containers every node is PID 1, so `worker-1` would name every worker alike.
    name: `${config.role}-${hostname()}-${process.pid}`,
    processEveryMs: options.agendaProcessEveryMs ?? 5000,
    lockLifetimeMs,
    poolMax: Math.min(8, config.databasePoolMax),
    onQuery: roundTrips('jobs'),
    onListenerQuery: roundTrips('listener'),
    onError: (message) => options.logger.warn(message),
    onDeaf: (message) => options.logger.error(message),
  });
  let agendaReady = false;
  agenda.on('ready', () => (agendaReady = true));

  const logger = options.logger;
  // Merchants' hosts (webhook URLs, callback URLs) are resolved here, never on libuv's thread pool.
  const merchantHosts = new MerchantHostResolver(config.webhookDnsServers);
  const merchants = new MerchantService(em, secrets, config.webhookAllowPrivateUrls, merchantHosts);
  const deliveryQueue = new AgendaDeliveryQueue(agenda, em, logger);
  // Scheduling is rare and brief: two connections are plenty (idempotency needs none of its own).
  const keyLock = new KeyLock(options.databaseUrl, KEY_LOCK_POOL_MAX);

  const accessChanges = new ChangeNotifications(options.databaseUrl, {
    channel: 'access_changed',
    onError: (message) => logger.warn(message),
    onDeaf: (message) => logger.error(message),
    onQuery: roundTrips('listener'),
  });
  await accessChanges.start();
  const principalCache = new NotifiedCache<Principal>(accessChanges, { ...ACCESS_CACHE, tables: ['api_keys'], merchantOf: (_hash, principal) => principal.merchantId });
  const credentialCache = new NotifiedCache<unknown>(accessChanges, {
    ...ACCESS_CACHE,
    tables: ['provider_credentials'],
    merchantOf: (key) => key.slice(0, key.indexOf(':')),
  });

  const secretKeyCensus = new StoredSecretsCensus(orm.em, secrets);
  registerStoreMetrics(metrics.registry, (sql) => orm.em.getConnection().execute(sql), () => secretKeyCensus.take(), {
    jobLockLifetimeMs: lockLifetimeMs,
    webhookMaxInFlightPerMerchant: config.webhookMaxInFlightPerMerchant,
  });
  // The providers (named only in providers/registry.ts). Each adapter is wrapped so every call to its
  // provider is timed (provider_call_duration_seconds); the adapters know nothing of it.
  const providers = createProviderRegistry(config, em, (provider, adapter) => instrumentProvider(provider, adapter, metrics.providerCalls));
  const reconciles = (provider: string) => Boolean(providers.find(provider)?.operations?.listTransactions);
  // Automatic reconciliation exists exactly while the merchant has credentials of a provider that lists its transactions.
  const reconcileScheduling: ReconciliationScheduling = {
    agenda,
    keyLock,
    intervalMs: config.mobilemoneyReconcileIntervalMs,
    hasCredentials: (merchantId, provider) => operations.hasCredentials(merchantId, provider),
  };
  const alignReconciliationOf = async (merchantId: string, provider: Provider) => {
    if (reconciles(provider)) await alignReconciliation(reconcileScheduling, provider, merchantId);
  };
  const credentials = new CredentialsService(em, secrets, providers, {
    hooks: {
      // Cards whose detach waits for credentials (of their account) are tried again at once.
      stored: async (merchantId, provider) => {
        try {
          await cardDetach.credentialsStored(merchantId, provider);
        } finally {
          await alignReconciliationOf(merchantId, provider);
        }
      },
      removed: alignReconciliationOf,
    },
    cache: credentialCache,
    logger,
    leases: new Leases(em.getKnex()),
    // A store's longest step: up to four provider calls (a webhook endpoint's creation, its retry, its
    // read, a re-creation), or the clean-up's list and deletes; a crashed store blocks re-stores this long.
    storeLeaseMs: 6 * config.providerTimeoutMs,
    publicBaseUrl: () => config.publicBaseUrl,
  });
  const gateway = new ProviderGateway(providers, credentials);
  const writer = new StatusWriter(em, deliveryQueue, metrics.integrityMismatches, logger);
  const idempotency = new IdempotencyKeys(em, writer, config.idempotencyLeaseMs);
  const payments = new PaymentService(em, config, credentials, gateway, idempotency, writer, logger, merchantHosts);
  const refunds = new RefundService(em, config, gateway, writer, idempotency, logger);
  const cardDetach = new CardDetachService(em, credentials, providers, logger);
  const operations = new ProviderOperationsService(em, config, providers, credentials, writer, logger, merchantHosts, gateway);
  const services: Services = {
    apiKeys: new ApiKeyService(em, principalCache),
    rateLimiter: new RateLimiter(em, config.rateLimit),
    callbackRateLimiter: new RateLimiter(em, config.callbackRateLimit),
    failedAuthRateLimiter: new RateLimiter(em, config.failedAuthRateLimit),
    rateLimitRetention: new RateLimitRetention(em),
    merchants,
    credentials,
    deliveries: new DeliveryService(
      em,
      merchants,
      {
        retryScheduleMs: config.webhookRetryScheduleMs,
        timeoutMs: config.webhookTimeoutMs,
        allowPrivateUrls: config.webhookAllowPrivateUrls,
        maxInFlightPerMerchant: config.webhookMaxInFlightPerMerchant,
      },
      deliveryQueue,
      logger,
      metrics.webhookDeliveryAttempts,
      metrics.webhookSecretUnreadable,
      merchantHosts,
    ),
    events: new EventLog(em, config.eventRetentionMs),
    idempotencyKeyRetention: new IdempotencyKeyRetention(em, config.idempotencyKeyRetentionMs),
    inboxRetention: new InboxRetention(em, config.providerEventRetentionMs),
    statusQueryRetention: new StatusQueryRetention(em, config.providerEventRetentionMs),
    payments,
    paymentHistory: new PaymentHistory(em),
    refunds,
    savedCards: new SavedCardService(em, credentials, providers, idempotency, cardDetach, logger),
    cardDetach,
    // A lost push is judged by reconciliation's pull (lost-creation.ts).
    statusSync: new StatusSyncService(em, config, gateway, payments, logger, operations.reconcileWindow.bind(operations)),
    abandonFailed: new AbandonFailedService(em, gateway, writer, logger),
    refundSync: new RefundSyncService(em, config, gateway, refunds, logger),
    inbound: new InboundPipeline(em, providers, credentials, writer, logger, gateway),
    operations,
  };

  // Created always (a pool opens no connection until used): a worker runs the simulators' jobs.
  const sandboxPool = createSandboxPool(options.databaseUrl, Math.min(10, config.databasePoolMax), roundTrips('sandbox'));
  const sandboxDeps: SandboxDeps = {
    config, em, pool: sandboxPool, agenda, logger: options.logger, heldAnswers: new HeldAnswers(), egress: sandboxEgress(config, merchantHosts),
  };
  const sandboxMounts = config.sandbox ? sandboxModules.map((m) => ({ path: m.path, router: withLatency(m.router(sandboxDeps), config.sandboxLatencyMs) })) : [];

  return {
    config,
    logger: options.logger,
    metrics,
    orm,
    agenda,
    deliveryQueue,
    keyLock,
    reconcileScheduling,
    accessChanges,
    providers,
    secrets,
    secretKeyCensus,
    merchantHosts,
    services,
    sandboxMounts,
    sandboxDeps,
    async prepareSandboxes() {
      if (!config.sandbox) return;
      await Promise.all(sandboxModules.map((m) => m.prepare?.({ ...sandboxDeps, em: orm.em.fork() })));
    },
    async readiness() {
      const session = await answerWithin(orm, SESSION_WRITABLE_SQL, READINESS_QUERY_TIMEOUT_MS);
      const writable = session?.writable === true;
      // On Agenda's own pool, where its jobs get their connections: one used up (by whatever holds them)
      // runs no job, however well the ORM's pool answers.
      const jobRunner = writable && agendaReady ? await agendaPoolAnswers('SELECT 1 FROM agenda_jobs LIMIT 1', READINESS_QUERY_TIMEOUT_MS) : false;
      const checks = { database: writable, job_runner: jobRunner };
      if (!session) return { checks, reason: `the database does not answer within ${READINESS_QUERY_TIMEOUT_MS / 1000} s` };
      if (!writable) return { checks, reason: 'the database is read-only (a hot standby, or default_transaction_read_only on): every write would fail' };
      if (!jobRunner) {
        return { checks, reason: `the job runner (Agenda's own connections) got no answer from the database within ${READINESS_QUERY_TIMEOUT_MS / 1000} s: jobs do not run` };
      }
      return { checks };
    },
    draining: false,
    async close(deadline = Number.POSITIVE_INFINITY) {
      // Each step waits until the stop's deadline at most: one that would outlive it is said and left
      // open (the process exits without it), and the others still close.
      const step = deadlineSteps(options.logger, deadline);
      // The wake-ups first: they query the pools closed next.
      await Promise.all([step('the access-change listener', () => accessChanges.stop()), step('the delivery wake-ups', () => deliveryQueue.close())]);
      await Promise.all([
        step('the scheduling-lock pool', () => keyLock.close()),
        step("Agenda's pool", closeAgendaPool),
        step("the simulators' pool", () => sandboxPool.end()),
        step("the ORM's pool", () => orm.close(true)),
      ]);
    },
  };
}
