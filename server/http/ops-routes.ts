import { timingSafeEqual } from 'node:crypto';
import type { Express, Request } from 'express';
import type { Container } from '../container.js';
import { sendError } from './envelope.js';
import { ERROR_MESSAGES } from '../../contract/errors.js';

function bearerMatches(req: Request, token: string): boolean {
  const given = Buffer.from((req.get('authorization') ?? '').replace(/^Bearer\s+/i, ''));
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * /healthz (the process is up), /readyz (database and job runner) and /metrics (Prometheus), served by
 * the API and, on WORKER_PORT, by a worker. With METRICS_TOKEN set, /metrics wants that bearer token.
 * Routes of the app itself, not a router mounted at `/`: every other request passes them at the cost
 * of a path match instead of entering a router.
 */
export function mountOpsRoutes(app: Express, container: Container): void {
  const { metrics, config } = container;
  app.get('/healthz', (_req, res) => res.json({ success: true, data: { status: 'ok' } }));
  app.get('/readyz', async (_req, res) => {
    const checks = await container.readiness();
    const ready = Object.values(checks).every(Boolean);
    res.status(ready ? 200 : 503).json({ success: ready, data: { status: ready ? 'ready' : 'not_ready', checks } });
  });
  app.get('/metrics', async (req, res) => {
    if (config.metricsToken && !bearerMatches(req, config.metricsToken)) {
      return sendError(res, 'UNAUTHORIZED', ERROR_MESSAGES.metricsToken);
    }
    res.set('Content-Type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
}
