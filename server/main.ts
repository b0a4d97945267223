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
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'signal received');
    service.stop().then(
      () => process.exit(0),
      (err: Error) => {
        logger.error({ err: { message: err.message } }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: Error) => {
  process.stderr.write(`failed to start: ${err.message}\n`);
  process.exit(1);
});
