import { readFile } from 'node:fs/promises';
import express, { type Express, type Router } from 'express';
import { projectFile } from '../config/project-root.js';

interface Docs {
  document: object;
  readme: string;
  /** Swagger UI: its static files and the page that loads `document`. */
  ui: Router;
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
    load().then(({ readme }) => res.type('text/markdown; charset=utf-8').send(readme), next);
  });
  app.use('/docs', (req, res, next) => {
    load().then(({ ui }) => ui(req, res, next), next);
  });
}
