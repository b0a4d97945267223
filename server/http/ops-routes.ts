import { timingSafeEqual } from 'node:crypto';
import type { Express, NextFunction, Request, Response } from 'express';
import type { Container } from '../container.js';
import { sendError } from './envelope.js';
import { ERROR_MESSAGES } from '../../contract/errors.js';

/** `Authorization: Bearer <token>` (the scheme in any case, as HTTP's are); the token alone is no credential. */
function bearerMatches(req: Request, token: string): boolean {
  const credentials = /^Bearer +(.*)$/i.exec(req.get('authorization') ?? '');
  if (!credentials) return false;
  const given = Buffer.from(credentials[1]!);
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * First middleware of every app: once the process is draining, each response says `Connection: close`
 * and Node closes the connection after it. Otherwise a keep-alive client that keeps sending requests
 * keeps its connection busy, and the server's close waits for it until SHUTDOWN_TIMEOUT_MS. Decided when
 * the response's headers go out, not when the request came: a request under way when the stop began (a
 * payment at its provider) is answered with it too, so its client does not send the next request on a
 * connection the server is about to close.
 */
export function closeConnectionsWhileDraining(container: Container) {
  return (_req: Request, res: Response, next: NextFunction) => {
    // Every response's headers go out through writeHead (res.end and flushHeaders call it when not yet written).
    const writeHead = res.writeHead;
    res.writeHead = function writeHeadWhileDraining(this: Response, ...args: Parameters<Response['writeHead']>) {
      if (container.draining) this.setHeader('Connection', 'close');
      return writeHead.apply(this, args);
    } as Response['writeHead'];
    next();
  };
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
    const { checks, reason } = await container.readiness();
    // Shutting down: the load balancer should stop sending requests here, whatever the checks say (the
    // stop may have begun during the checks, after the first middleware looked).
    if (container.draining) return res.status(503).set('Connection', 'close').json({ success: false, data: { status: 'draining', checks } });
    if (reason) return res.status(503).json({ success: false, data: { status: 'not_ready', checks, reason } });
    res.json({ success: true, data: { status: 'ready', checks } });
  });
  app.get('/metrics', async (req, res) => {
    if (config.metricsToken && !bearerMatches(req, config.metricsToken)) {
      return sendError(res, 'UNAUTHORIZED', ERROR_MESSAGES.metricsToken);
    }
    res.set('Content-Type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
}
