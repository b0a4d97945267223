import express, { type Express } from 'express';
import { createExpressEndpoints, initServer } from '@ts-rest/express';
import { contract } from '../../contract/index.js';
import type { Container } from '../container.js';
import { dashboardRouter } from './dashboard.js';
import { mountDocs } from './docs.js';
import { errorHandler, notFoundHandler } from './error-handler.js';
import { authenticate } from './middleware/auth.js';
import { callbackMetrics } from './middleware/callback-metrics.js';
import { jsonBody } from './middleware/json-body.js';
import { ormContext } from './middleware/orm-context.js';
import { rejectNulCharacters } from './middleware/reject-nul.js';
import { accessLog, requestId } from './middleware/request-context.js';
import { merchantRouter } from './routers/merchant.router.js';
import { webhookLogsRouter } from './routers/webhook-logs.router.js';
import { webhooksRouter } from './routers/webhooks.router.js';
import { eventsRouter } from './routers/events.router.js';
import { paymentsRouter } from './routers/payments.router.js';
import { providerCallbacksRouter } from './routers/provider-callbacks.router.js';
import { refundsRouter } from './routers/refunds.router.js';
import { closeConnectionsWhileDraining, mountOpsRoutes } from './ops-routes.js';
import { mountReturnPage } from './return-page.js';

export { BODY_LIMIT, type RawBodyRequest } from './middleware/json-body.js';

export function createApp(container: Container): Express {
  const { logger, metrics, orm, services } = container;
  const app = express();
  app.disable('x-powered-by');
  // No ETag: every answer is a live resource and the interface has no conditional requests; hashing each
  // body (merchants' and the simulators' alike) cost ~1.5–2 % of a request's CPU.
  app.disable('etag');
  // Off unless TRUST_PROXY says which proxies to believe: then req.ip is the client behind them.
  app.set('trust proxy', container.config.trustProxy);
  app.use(closeConnectionsWhileDraining(container));
  app.use(requestId);
  app.use(callbackMetrics(metrics));
  app.use(accessLog(logger, metrics));

  mountOpsRoutes(app, container);
  mountReturnPage(app);
  mountDocs(app);
  app.use('/dashboard', dashboardRouter({ idempotencyKeyRetentionMs: container.config.idempotencyKeyRetentionMs }));

  // The simulators parse their own bodies, as their providers do (form-encoded token requests, their own
  // answers to malformed JSON); the service's JSON parser runs only on its own routes (below).
  for (const mount of container.sandboxMounts) app.use(mount.path, mount.router);

  // Every /v1 answer is one merchant's live data, and the key travels in X-API-Key, which shared caches
  // do not treat as Authorization (RFC 9111 §3.5): none may keep one and answer another caller with it.
  app.use('/v1', (_req, res, next) => {
    res.set('Cache-Control', 'no-store');
    next();
  });

  const s = initServer();
  const router = s.router(contract, {
    merchant: merchantRouter(services),
    payments: paymentsRouter(services),
    refunds: refundsRouter(services),
    providerCallbacks: providerCallbacksRouter(services),
    webhookLogs: webhookLogsRouter(services),
    webhooks: webhooksRouter(services),
    events: eventsRouter(services),
  });
  createExpressEndpoints(contract, router, app, {
    logInitialization: false,
    jsonQuery: false,
    responseValidation: false,
    // Each contract request gets its own identity map. Authentication comes next (an anonymous caller
    // learns nothing), then the body is read and parsed: an unknown route (404) or an anonymous caller
    // (401) is answered before it, so neither hears about a malformed or oversized body. Then
    // validation and the handlers.
    globalMiddleware: [
      ormContext(orm.em),
      authenticate(services.apiKeys, services.rateLimiter, services.callbackRateLimiter, services.failedAuthRateLimiter, container.providers),
      ...jsonBody(),
      rejectNulCharacters,
    ],
    requestValidationErrorHandler: (err, _req, _res, next) => next(err),
  });

  app.use(notFoundHandler);
  app.use(errorHandler(logger));
  return app;
}

/**
 * What a worker serves on WORKER_PORT: health, readiness and metrics, and, with SANDBOX on, the
 * simulators, where the worker's own provider calls go (status and refund syncs, reconciliation:
 * providers/base-url.ts). Their state is in the database, so they answer as the api's do.
 */
export function createWorkerApp(container: Container): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(closeConnectionsWhileDraining(container));
  app.use(requestId);
  app.use(accessLog(container.logger, container.metrics));
  mountOpsRoutes(app, container);
  for (const mount of container.sandboxMounts) app.use(mount.path, mount.router);
  app.use(notFoundHandler);
  app.use(errorHandler(container.logger));
  return app;
}
