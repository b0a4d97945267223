import express, { type Router } from 'express';
import { projectFile } from '../config/project-root.js';

// Beside package.json: the same folder whether run from source or from dist/.
const DASHBOARD_DIR = projectFile('dashboard');

/**
 * The merchant dashboard: static files (plain ES modules, no build step, nothing fetched from the
 * network) that call the public /v1 API with the API key the user signs in with. Its policy allows
 * only same-origin scripts, styles and requests, and no framing.
 */
export function dashboardRouter(): Router {
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
  router.use(express.static(DASHBOARD_DIR, { index: 'index.html', fallthrough: true }));
  return router;
}
