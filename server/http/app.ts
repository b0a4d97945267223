import { readFileSync } from 'node:fs';
import express, { type Express } from 'express';
import { RequestContext } from '@mikro-orm/core';
import { createExpressEndpoints, initServer } from '@ts-rest/express';
import swaggerUi from 'swagger-ui-express';
import { contract } from '../../contract/index.js';
import type { Container } from '../container.js';
import { errorHandler, notFoundHandler } from './error-handler.js';
import { authenticate } from './middleware/auth.js';
import { rejectNulCharacters } from './middleware/reject-nul.js';
import { accessLog, requestId } from './middleware/request-context.js';
import { merchantRouter } from './routers/merchant.router.js';
import { webhookLogsRouter } from './routers/webhook-logs.router.js';
import { webhooksRouter } from './routers/webhooks.router.js';
import { eventsRouter } from './routers/events.router.js';
import { paymentsRouter } from './routers/payments.router.js';
import { providerCallbacksRouter } from './routers/provider-callbacks.router.js';
import { refundsRouter } from './routers/refunds.router.js';
import { openApiDocument } from './openapi.js';
import type { RawBodyRequest } from './raw-body.js';

export const BODY_LIMIT = '100kb';


export function createApp(container: Container): Express {
  const { logger, metrics, orm, services } = container;
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.use(requestId);
  app.use(accessLog(logger, metrics));

  app.get('/healthz', (_req, res) => res.json({ success: true, data: { status: 'ok' } }));
  app.get('/readyz', async (_req, res) => {
    const checks = await container.readiness();
    const ready = Object.values(checks).every(Boolean);
    res.status(ready ? 200 : 503).json({ success: ready, data: { status: ready ? 'ready' : 'not_ready', checks } });
  });
  app.get('/metrics', async (_req, res) => {
    res.set('Content-Type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  const document = openApiDocument();
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  app.get('/openapi.json', (_req, res) => res.json(document));
  // The reference links the README's quick start; serve it beside the page so the link resolves.
  app.get('/docs/README.md', (_req, res) => {
    res.type('text/markdown; charset=utf-8').send(readme);
  });
  app.use('/docs', swaggerUi.serve, swaggerUi.setup(document, { customSiteTitle: 'Payments API reference' }));

  app.use(
    express.json({
      limit: BODY_LIMIT,
      type: ['application/json', 'application/*+json'],
      verify: (req, _res, buf) => {
        (req as RawBodyRequest).rawBody = buf;
      },
    }),
  );
  // Every request gets its own identity map: no entity leaks between requests.
  app.use((_req, _res, next) => RequestContext.create(orm.em, next));

  for (const mount of container.sandboxMounts) app.use(mount.path, mount.router);

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
    // After authentication (an anonymous caller learns nothing), before validation and the handlers.
    globalMiddleware: [authenticate(services.apiKeys, services.rateLimiter), rejectNulCharacters],
    requestValidationErrorHandler: (err, _req, _res, next) => next(err),
  });

  app.use(notFoundHandler);
  app.use(errorHandler(logger));
  return app;
}
