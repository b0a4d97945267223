import { ConfigError, loadConfig } from './config/config.js';
import { requireNodeEnvOfBuild } from './config/node-env.js';
import { createLogger } from './observability/logger.js';
import { startService, type RunningService } from './service.js';

/**
 * A repeat of the signal that started the stop within this long is the same request delivered twice,
 * not an operator insisting: npm forwards SIGINT/SIGTERM to its child, so a terminal's Ctrl-C (or a
 * supervisor signalling the whole process group) reaches node once directly and once through npm.
 */
const DUPLICATE_SIGNAL_MS = 1_000;

async function main() {
  let config;
  try {
    requireNodeEnvOfBuild(process.env, import.meta.url);
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  const { shutdownTimeoutMs } = config;

  let service: RunningService | null = null;
  let requested: { signal: string; at: number } | null = null;
  // Aborted on the first signal: the service drains from then on (/readyz 503, Connection: close), boot or not.
  const stopSignal = new AbortController();
  const stop = (running: RunningService) =>
    running.stop().then(
      () => process.exit(0),
      (err: Error) => {
        logger.error({ err: { message: err.message } }, 'shutdown failed');
        process.exit(1);
      },
    );
  const onSignal = (signal: string) => {
    if (requested) {
      if (signal === requested.signal && Date.now() - requested.at < DUPLICATE_SIGNAL_MS) return;
      // A second signal while stopping: the operator insists.
      logger.warn({ signal }, 'second signal while stopping: exiting now');
      process.exit(1);
    }
    requested = { signal, at: Date.now() };
    logger.info({ signal, ...(service ? {} : { booting: true }) }, 'signal received');
    stopSignal.abort();
    // A stop that cannot finish (e.g. the database is gone, or the boot hangs) must not keep the process alive forever.
    setTimeout(() => {
      logger.error({ timeoutMs: shutdownTimeoutMs }, 'graceful shutdown timed out; exiting');
      process.exit(1);
    }, shutdownTimeoutMs).unref();
    if (service) void stop(service);
  };
  // Installed before the boot: jobs may already run before startService resolves, and a signal then
  // must not kill them mid-call. A signal during the boot drains at once (a listener already open answers
  // /readyz 503 and closes its connections) and lets the boot finish its schema work, with nothing
  // started after the signal (no listening, jobs or webhook deliveries: the exit deadline counts from the
  // signal, and would cut them), then stops as usual (below).
  // `on`, not `once`: under tsx (npm start) a signal with no listener of ours left makes tsx's own
  // handler exit at once (code 143), cutting the graceful stop short.
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));

  // A boot that fails has already stopped what it had started (the requests being served answered, within
  // SHUTDOWN_TIMEOUT_MS) when this rejects: main().catch below exits with code 1.
  service = await startService(config, { logger, stopSignal: stopSignal.signal });
  if (requested) {
    await stop(service);
    return;
  }
  if (service.server) {
    logger.info(`API on ${service.baseUrl} — docs at ${service.baseUrl}/docs`);
  }
}

main().catch((err: Error) => {
  process.stderr.write(`failed to start: ${err.message}\n`);
  process.exit(1);
});
