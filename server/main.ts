import { ConfigError, loadConfig } from './config/config.js';
import { createLogger } from './observability/logger.js';
import { startService } from './service.js';

async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  const service = await startService(config, { logger });
  if (service.server) {
    logger.info(`API on ${service.baseUrl} — docs at ${service.baseUrl}/docs`);
  }
  let stopping = false;
  const shutdown = (signal: string) => {
    // A second signal while stopping: the operator insists.
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal }, 'signal received');
    // A stop that cannot finish (e.g. the database is gone) must not keep the process alive forever.
    setTimeout(() => {
      logger.error({ timeoutMs: config.shutdownTimeoutMs }, 'graceful shutdown timed out; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs).unref();
    service.stop().then(
      () => process.exit(0),
      (err: Error) => {
        logger.error({ err: { message: err.message } }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // `on`, not `once`: under tsx (npm start) a signal with no listener of ours left makes tsx's own
  // handler exit at once (code 143), cutting the graceful stop short.
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: Error) => {
  process.stderr.write(`failed to start: ${err.message}\n`);
  process.exit(1);
});
