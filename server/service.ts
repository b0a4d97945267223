import http from 'node:http';
import ipaddr from 'ipaddr.js';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { AppConfig } from './config/config.js';
import { providerOverrides } from './config/provider-overrides.js';
import { createContainer, type Container } from './container.js';
import { createApp, createWorkerApp } from './http/app.js';
import { refuseMalformedRequest } from './http/client-error.js';
import { DeliveryDrainer } from './jobs/delivery-drainer.js';
import { DELIVERIES_DUE_CHANNEL } from './jobs/delivery-queue.js';
import { drainAgenda } from './jobs/agenda.js';
import { deadlineSteps } from './lib/within-deadline.js';
import { defineJobs, scheduleRecurringJobs } from './jobs/index.js';
import { gracefulCloser } from './net/graceful-close.js';
import { createLogger, type Logger } from './observability/logger.js';
import type { EmbeddedDatabase } from './persistence/embedded-postgres.js';
import { ChangeNotifications } from './persistence/change-notifications.js';
import { migrate, migrationsPendingError, pendingMigrations } from './persistence/orm.js';
import { withSchemaLock } from './persistence/schema-lock.js';

/**
 * A worker's webhook drain loop: attempts in flight at once, and the pause after a failed claim. Four
 * times the default per-merchant share: endpoints that hang hold a slot until their timeout, so three
 * merchants' hanging at once still leave a quarter of the slots to everyone else.
 */
const DRAINER_OPTIONS = { maxInFlight: 64, retryMs: 1000 };
/** Attempts recorded before the drain loop claims again for merchants a claim left at their share. */
const MIN_RECLAIM = 8;
/**
 * The drain loop's listening connection is checked this often (a SELECT 1 answered within 2 s): one
 * that died silently is replaced, and the new one looks once for what became due meanwhile.
 */
const DUE_LISTENER_HEARTBEAT_MS = 5_000;
/**
 * Longer than the idle timeout of the load balancers in front (AWS ALB 60 s, nginx 60 s): the balancer
 * closes an idle connection first, instead of sending a request on one this server is closing (a 502).
 */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** False for a URL on this machine only (localhost, 127.0.0.0/8, ::1, 0.0.0.0), which no provider can call. */
function reachableFromOutside(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === 'localhost' || host.endsWith('.localhost')) return false;
  if (!ipaddr.isValid(host)) return true;
  const range = ipaddr.process(host).range();
  return range !== 'loopback' && range !== 'unspecified';
}
/**
 * How long running jobs get to finish on shutdown: the shutdown budget, less a little to record their
 * results and close the pools before main.ts's deadline exits the process.
 */
const agendaDrainMs = (shutdownTimeoutMs: number): number => Math.max(1_000, shutdownTimeoutMs - 3_000);
/** The stop's own steps end this long before main.ts's deadline, so a stop that left one behind still exits 0. */
const STOP_MARGIN_MS = 500;

export interface RunningService {
  container: Container;
  /** The HTTP server when the role serves the API. */
  server: http.Server | null;
  baseUrl: string;
  /** A worker's health/readiness/metrics address (ROLE=worker only). */
  opsUrl: string | null;
  stop(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /** Agenda polling interval; tests use a short one. */
  agendaProcessEveryMs?: number;
  agendaLockLifetimeMs?: number;
  /**
   * Aborted when a stop is asked for (main.ts's signal handler), possibly while the boot is still under
   * way. From then on the process drains: /readyz answers 503 and every response closes its connection,
   * whatever the boot's stage (a listener opened before the signal included). The boot finishes its
   * schema work but starts nothing more (no listening, jobs or webhook deliveries): main.ts's exit
   * deadline counts from the signal, so work started after it could be cut by that deadline (and its
   * jobs left locked for their lock lifetime).
   */
  stopSignal?: AbortSignal;
}

/**
 * Boots one process in its role: migrations, then the API (HTTP + simulators + docs) and/or the worker
 * (Agenda jobs). `stop()` is the graceful shutdown: stop taking requests and jobs, let the ones under
 * way finish, close the pools.
 */
export async function startService(config: AppConfig, options: StartOptions = {}): Promise<RunningService> {
  const logger = options.logger ?? createLogger(config.logLevel);
  let embedded: EmbeddedDatabase | null = null;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    logger.info({ dir: path.join(config.dataDir, 'postgres') }, 'no DATABASE_URL: starting embedded PostgreSQL');
    // Loaded only here: a service on DATABASE_URL never needs it.
    const { startEmbeddedPostgres } = await import('./persistence/embedded-postgres.js');
    embedded = await startEmbeddedPostgres(path.join(config.dataDir, 'postgres'), { log: (line) => logger.info(line) });
    databaseUrl = embedded.url;
  }
  // Schema work is serialised across processes (Agenda's table too is made by a migration).
  const url = databaseUrl;
  const { container, applied } = await withSchemaLock(url, async () => {
    const created = await createContainer(config, {
      databaseUrl: url,
      logger,
      agendaProcessEveryMs: options.agendaProcessEveryMs,
      agendaLockLifetimeMs: options.agendaLockLifetimeMs,
    });
    await created.agenda.ready;
    if (config.migrateOnBoot) return { container: created, applied: await migrate(created.orm) };
    const pending = await pendingMigrations(created.orm);
    if (pending.length > 0) {
      await created.close();
      throw migrationsPendingError(pending, 'MIGRATE_ON_BOOT is off');
    }
    return { container: created, applied: [] as string[] };
  }, {
    // Otherwise silent until the holder (a migration, a stray session) lets go.
    onWaiting: (waitedMs, holder) => logger.warn({ waitedMs, holder }, 'waiting for the schema lock held by another process (a migration, or a session that holds it): the boot goes on once it is released'),
  });
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');

  const servesApi = config.role === 'all' || config.role === 'api';
  const runsJobs = config.role === 'all' || config.role === 'worker';
  // Asked before each start below: a signal can arrive while an earlier one is awaited.
  const stopRequested = () => options.stopSignal?.aborted ?? false;

  // When this process began draining: the signal, if one arrives during the boot; otherwise the stop's start.
  let drainingSince: number | null = null;
  const beginDraining = (): number => {
    if (drainingSince === null) {
      drainingSince = Date.now();
      // From here every response closes its connection and /readyz answers 503 (draining).
      container.draining = true;
    }
    return drainingSince;
  };
  // A signal during the boot drains at once, whatever the boot is doing: a listener opened before it
  // must not go on answering /readyz 200 and keeping connections alive (an orchestrator would go on
  // routing here) until the rest of the boot (Agenda, recurring jobs, the drain loop) is done.
  if (stopRequested()) beginDraining();
  else options.stopSignal?.addEventListener('abort', () => beginDraining(), { once: true });

  let server: http.Server | null = null;
  let baseUrl = config.publicBaseUrl;
  let opsUrl: string | null = null;
  const closers: ((deadlineMs: number) => Promise<void>)[] = [];
  let drainer: DeliveryDrainer | null = null;
  let dueDeliveries: ChangeNotifications | null = null;

  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('shutting down');
      const since = beginDraining();
      // The simulators' held answers ("hang" mode) end with their process, as a provider's would.
      container.sandboxDeps.heldAnswers.releaseAll();
      // Still listening and working while the orchestrator sees /readyz 503 and stops routing here (on
      // Kubernetes endpoint removal races the signal: a listener closed at once refuses what still arrives).
      // Counted from the start of the draining (a signal during the boot: the signal); nothing to wait for
      // when nothing listens (a stop asked for before the boot listened).
      const delayLeftMs = since + config.shutdownDelayMs - Date.now();
      if (delayLeftMs > 0 && closers.length > 0) await new Promise((resolve) => setTimeout(resolve, delayLeftMs));
      // What is left of SHUTDOWN_TIMEOUT_MS since the draining began (main.ts's deadline counts from the signal).
      const budgetMs = Math.max(0, since + config.shutdownTimeoutMs - Date.now());
      // Every step but the HTTP listeners' (whose requests under way keep main.ts's exit code 1 past the
      // budget) ends by then at the latest: a step still under way is logged and left open, the rest close,
      // and the process exits 0 before main.ts's deadline.
      const deadline = since + config.shutdownTimeoutMs - STOP_MARGIN_MS;
      const step = deadlineSteps(logger, deadline);
      // HTTP and jobs stop side by side: busy keep-alive connections no longer hold the job drain back.
      // Agenda stops taking jobs while the drain loop finishes its attempts, not after: a retry job started
      // during the drain loop's wait would be cut by the shutdown deadline (and sent again after its lease).
      await Promise.all([
        ...closers.map((close) => close(budgetMs)),
        step('the webhook drain loop', async () => {
          await dueDeliveries?.stop();
          await drainer?.stop();
        }),
        step('the job drain', () => drainAgenda(container.agenda, agendaDrainMs(budgetMs))),
      ]);
      // Nothing left to do after a drain; it still unlocks what a drain that failed part-way had not.
      await step("Agenda's stop", () => container.agenda.stop());
      await container.close(deadline);
      if (embedded) await step('the embedded PostgreSQL', () => embedded!.stop());
    })());

  try {
    // Said at boot, not at a merchant's first failing request: stored secrets this process cannot open.
    const storedSecrets = await container.secretKeyCensus.take().catch(() => null);
    if (storedSecrets?.unknown) {
      logger.error({ storedSecrets }, 'stored secrets sealed with a key this process does not have: requests that need them fail until ENCRYPTION_KEY or DECRYPTION_KEYS holds it');
    }

    await container.prepareSandboxes();

    if (servesApi && !stopRequested()) {
      server = http.createServer();
      server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
      server.on('clientError', refuseMalformedRequest(logger));
      closers.push(gracefulCloser(server));
      await listen(server, config.port, config.host);
      const port = (server.address() as AddressInfo).port;
      if (!config.publicBaseUrlConfigured) config.publicBaseUrl = `http://${urlHost(config.host)}:${port}`;
      baseUrl = `http://${urlHost(config.host)}:${port}`;
      // This process's provider calls go to its own simulators (providers/base-url.ts).
      if (config.sandbox) config.localSimulatorsBaseUrl = baseUrl;
      server.on('request', createApp(container));
    }
    warnAboutProductionSettings(config, logger);
    // A worker serves nothing else, so it gets its own small server for probes and scraping, and (SANDBOX
    // on) for the simulators its own jobs call: nothing of the api need be reachable from it.
    if (config.role === 'worker' && !stopRequested()) {
      const opsServer = http.createServer(createWorkerApp(container));
      opsServer.on('clientError', refuseMalformedRequest(logger));
      closers.push(gracefulCloser(opsServer));
      await listen(opsServer, config.workerPort, config.host);
      opsUrl = `http://${urlHost(config.host)}:${(opsServer.address() as AddressInfo).port}`;
      if (config.sandbox) config.localSimulatorsBaseUrl = opsUrl;
    }
    if (runsJobs) defineJobs(container);
    const takesJobs = !stopRequested();
    // Started in every role: a started Agenda sends NOTIFY when it schedules a job, so workers pick
    // jobs up at once; with no job definitions (api role) it processes nothing.
    if (takesJobs) await container.agenda.start();
    if (runsJobs && takesJobs) await scheduleRecurringJobs(container);
    // The drain loop sleeps until the database NOTIFYs a due delivery, on a connection of its own; it is
    // also woken when that connection is (re)made, for whatever became due while no worker listened, and
    // claims at least once per sweep interval whatever happens to the wake-ups.
    drainer = runsJobs && !stopRequested() ? new DeliveryDrainer(container, {
          ...DRAINER_OPTIONS,
          pollMs: config.deliverySweepIntervalMs,
          reclaimAfterRecorded: Math.min(MIN_RECLAIM, config.webhookMaxInFlightPerMerchant),
        }) : null;
    const wake = drainer;
    dueDeliveries = wake
      ? new ChangeNotifications(url, {
          channel: DELIVERIES_DUE_CHANNEL,
          name: 'payments-deliveries-listener',
          heartbeatIntervalMs: DUE_LISTENER_HEARTBEAT_MS,
          onError: (message) => logger.warn(message),
          onDeaf: (message) => logger.error(message),
        })
      : null;
    dueDeliveries?.subscribe(() => wake!.notifyDue());
    drainer?.start();
    await dueDeliveries?.start();
  } catch (err) {
    // A step after the listening (or after the pools opened) failed: the requests already being served
    // get their answers, as in a stop, and what had started is released before main.ts exits with code 1
    // (bounded by SHUTDOWN_TIMEOUT_MS, as a stop is).
    logger.error({ err: { message: (err as Error).message } }, 'boot failed: stopping what had started');
    await stopWithin(stop(), config.shutdownTimeoutMs, logger);
    throw err;
  }
  if (stopRequested()) logger.info({ role: config.role }, 'boot finished after a stop was requested: requests, jobs and webhook deliveries not yet started stay off');
  else logger.info({ role: config.role, baseUrl, ...(opsUrl ? { opsUrl } : {}), host: config.host, sandbox: config.sandbox }, 'payments service started');

  return { container, server, baseUrl, opsUrl, stop };
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** Where this machine reaches a server bound to `host` (every interface: through loopback). */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/** Settings allowed in production but likely mistakes there, said once at boot. */
function warnAboutProductionSettings(config: AppConfig, logger: Logger): void {
  // Allowed (a demo or staging deployment), but a SANDBOX=true left over in a production .env would let the
  // simulators complete live payments with no money moved; the warnings below are skipped meanwhile.
  if (config.production && config.sandbox) {
    logger.warn(
      { sandbox: true },
      'SANDBOX is on with NODE_ENV=production: provider calls (those without a *_BASE_URL override) go to the built-in simulators, not the real providers, so payments complete with no money moved; unset SANDBOX for live payments',
    );
    // Asked for (SANDBOX_CONTROLS=true), but the controls take no credentials and act for every merchant.
    if (config.sandboxControls) {
      logger.warn(
        { sandboxControls: true },
        'SANDBOX_CONTROLS is on with NODE_ENV=production: anyone who reaches this port can switch a simulated provider into an outage, hang or lose its answers for every merchant (POST /sandbox/<provider>/_control/…); unset it unless only trusted testers reach the port',
      );
    }
  }
  // An override takes its provider's calls, live credentials' included, whatever SANDBOX says.
  for (const { variable, provider, origin } of providerOverrides(config.providerBaseUrls)) {
    logger.warn({ variable, origin }, `${variable} is set: every ${provider} call, live and sandbox credentials alike, goes to ${origin} instead of ${provider}'s own API or simulator`);
  }
  if (config.production && !config.sandbox && !reachableFromOutside(config.publicBaseUrl)) {
    logger.warn(
      { publicBaseUrl: config.publicBaseUrl },
      'PUBLIC_BASE_URL is a loopback address: providers cannot reach the callback URLs or the return pages; set it to the https address they reach this service at',
    );
  } else if (config.production && !config.sandbox && new URL(config.publicBaseUrl).protocol !== 'https:') {
    logger.warn(
      { publicBaseUrl: config.publicBaseUrl },
      'PUBLIC_BASE_URL is not https: walletpay refuses http webhook URLs and cardpay sends live events to https endpoints only, so storing credentials without webhook_secret / webhook_id fails; set it to the https address providers reach this service at',
    );
  }
  // A warning, as for PUBLIC_BASE_URL: a scraper inside a private network may need no token.
  if (config.production && !config.metricsToken) {
    logger.warn(
      { host: config.host },
      'METRICS_TOKEN is unset: /metrics answers anyone who reaches this port (request rates by route, provider outcomes, queue depths); set it (16+ characters) or keep the port off public interfaces',
    );
  }
}

/**
 * Waits for a stop begun because the boot failed, at most `timeoutMs` (a database gone can hold it):
 * main.ts then exits with code 1 whatever is left.
 */
async function stopWithin(stopping: Promise<void>, timeoutMs: number, logger: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timed out'>((resolve) => (timer = setTimeout(() => resolve('timed out'), timeoutMs)));
  const outcome = await Promise.race([
    stopping.then(
      () => 'stopped' as const,
      (err: Error) => {
        logger.error({ err: { message: err.message } }, 'shutdown failed');
        return 'failed' as const;
      },
    ),
    timedOut,
  ]);
  clearTimeout(timer);
  if (outcome === 'timed out') logger.error({ timeoutMs }, 'graceful shutdown timed out; exiting');
}
