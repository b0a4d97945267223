import { readFile } from 'node:fs/promises';
import path from 'node:path';
import express, { type Express, type Router } from 'express';
import { projectFile } from '../config/project-root.js';

interface Docs {
  document: object;
  readme: string;
  /** Swagger UI: its static files and the page that loads `document`. */
  ui: Router;
}

/**
 * The reference's page policy: Swagger UI's own files only (its page has inline styles, no inline
 * script), requests to this origin only, no framing.
 */
const DOCS_HEADERS = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

/**
 * swagger-ui-dist's own demo page and its initializer, which loads the Petstore document from
 * petstore.swagger.io: in the folder Swagger UI's assets are served from, never served here.
 */
const STOCK_FILES = new Set(['index.html', 'swagger-initializer.js']);

/** The file a /docs path names, as the static server will read it (decoded: `%69ndex.html`, `//index.html`). */
function stockFileName(requestPath: string): string {
  let decoded = requestPath;
  try {
    decoded = decodeURIComponent(requestPath);
  } catch {
    // Not decodable: the static server refuses it too.
  }
  return path.posix.basename(decoded);
}

/**
 * GET /openapi.json, /docs (Swagger UI) and /docs/README.md. The document, its generator, Swagger UI
 * and the README are loaded on the first request for one of them, not at boot: they hold several MB
 * that a process serving payments never touches.
 */
export function mountDocs(app: Express): void {
  let docs: Promise<Docs> | null = null;
  const load = () =>
    (docs ??= (async () => {
      const [{ openApiDocument }, { default: swaggerUi }, readme] = await Promise.all([
        import('./openapi.js'),
        import('swagger-ui-express'),
        readFile(projectFile('README.md'), 'utf8'),
      ]);
      const document = openApiDocument();
      const ui = express.Router();
      ui.use(swaggerUi.serve, swaggerUi.setup(document, { customSiteTitle: 'Payments API reference' }));
      return { document, readme, ui };
    })().catch((err: Error) => {
      docs = null; // a later request tries again
      throw err;
    }));

  // Routes of the app itself (not a router mounted at `/`): other requests pass them with a path match.
  app.get('/openapi.json', (_req, res, next) => {
    load().then(({ document }) => res.json(document), next);
  });
  // The reference links the README's quick start; serve it beside the page so the link resolves.
  app.get('/docs/README.md', (_req, res, next) => {
    load().then(({ readme }) => res.set(DOCS_HEADERS).type('text/markdown; charset=utf-8').send(readme), next);
  });
  app.use('/docs', (req, res, next) => {
    if (STOCK_FILES.has(stockFileName(req.path))) return next();
    res.set(DOCS_HEADERS);
    load().then(({ ui }) => ui(req, res, next), next);
  });
}
