/**
 * `npm run healthcheck` (the image's HEALTHCHECK): asks this container's own process for /healthz —
 * the API port, or WORKER_PORT for ROLE=worker — and exits 0 when it answers 200.
 */
import { ConfigError, loadConfig } from './config/config.js';

async function main(): Promise<number> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`${(err as ConfigError).message}\n`);
    return 1;
  }
  const port = config.role === 'worker' ? config.workerPort : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  try {
    const res = await fetch(`http://${host}:${port}/healthz`, { signal: AbortSignal.timeout(2500) });
    if (res.status === 200) return 0;
    process.stderr.write(`/healthz answered ${res.status}\n`);
  } catch (err) {
    process.stderr.write(`/healthz unreachable: ${(err as Error).message}\n`);
  }
  return 1;
}

main().then((code) => process.exit(code));
