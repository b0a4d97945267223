import express, { type Router } from 'express';
import { projectFile } from '../config/project-root.js';

// Beside package.json: the same folder whether run from source or from dist/.
const DASHBOARD_DIR = projectFile('dashboard');

/** What the page needs to know of this service's configuration (served as /dashboard/config.json). */
export interface DashboardSettings {
  /**
   * IDEMPOTENCY_KEY_RETENTION: how long the service replays a refund's Idempotency-Key after its last
   * change. A key the page keeps (a refund still pending, an answer lost) is not sent again once near it:
   * the service may have forgotten it, and the same key would then refund a second time.
   */
  idempotencyKeyRetentionMs: number;
}

/**
 * The merchant dashboard: static files (plain ES modules, no build step, nothing fetched from the
 * network) that call the public /v1 API with the API key the user signs in with, and config.json.
 * Its policy allows only same-origin scripts, styles and requests, and no framing.
 */
export function dashboardRouter(settings: DashboardSettings): Router {
  const router = express.Router();
  router.use((_req, res, next) => {
    res.set({
      'Content-Security-Policy':
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      'Cache-Control': 'no-cache',
    });
    next();
  });
  router.get('/config.json', (_req, res) => {
    res.set('Cache-Control', 'no-store').json({ idempotency_key_retention_ms: settings.idempotencyKeyRetentionMs });
  });
  router.use(express.static(DASHBOARD_DIR, { index: 'index.html', fallthrough: true }));
  return router;
}
