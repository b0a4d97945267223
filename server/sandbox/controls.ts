import type { NextFunction, Request, Response, Router } from 'express';
import express from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';

export type OutageMode = 'ok' | 'error' | 'hang';

/** How long a "hang" lasts: longer than any provider timeout the service uses. */
const HANG_MS = 120_000;

export async function outageMode(em: EntityManager, provider: string): Promise<OutageMode> {
  const rows = await em.getConnection().execute<{ mode: OutageMode }[]>('SELECT mode FROM sandbox_controls WHERE provider = ?', [provider]);
  return rows[0]?.mode ?? 'ok';
}

export async function setOutageMode(em: EntityManager, provider: string, mode: OutageMode): Promise<void> {
  await em.getConnection().execute(
    `INSERT INTO sandbox_controls (provider, mode) VALUES (?, ?)
     ON CONFLICT (provider) DO UPDATE SET mode = EXCLUDED.mode, updated_at = now()`,
    [provider, mode],
  );
}

/**
 * Mounts `POST /_control/outage {mode: ok|error|hang}` and a middleware that, while an outage is on,
 * answers every provider call with HTTP 500 or never answers (until the client gives up). The state is
 * in PostgreSQL, so it holds for every process. Mount it before the simulator's routes.
 */
export function outageSwitch(router: Router, em: EntityManager, provider: string, errorBody: unknown): void {
  router.post('/_control/outage', express.json(), async (req: Request, res: Response, next: NextFunction) => {
    try {
      const mode = (req.body as { mode?: string } | undefined)?.mode;
      if (mode !== 'ok' && mode !== 'error' && mode !== 'hang') {
        res.status(400).json({ error: 'mode must be ok, error or hang' });
        return;
      }
      await setOutageMode(em, provider, mode);
      res.json({ provider, mode });
    } catch (err) {
      next(err);
    }
  });
  router.use(async (req: Request, res: Response, next: NextFunction) => {
    if (req.path.startsWith('/_control')) return next();
    try {
      const mode = await outageMode(em, provider);
      if (mode === 'error') {
        res.status(500).json(errorBody);
        return;
      }
      if (mode === 'hang') {
        const timer = setTimeout(() => res.destroy(), HANG_MS);
        res.on('close', () => clearTimeout(timer));
        return;
      }
      next();
    } catch (err) {
      next(err);
    }
  });
}

/**
 * SANDBOX_LATENCY_MS: every simulator request is handled at once but answered only after `ms`, like a
 * provider behind a slow network (the provider has acted; its answer is still on the way). Control
 * routes answer at once. A timer, not a held connection: the simulator's state is already committed.
 */
export function withLatency(router: Router, ms: number): Router {
  if (ms <= 0) return router;
  const outer = express.Router();
  outer.use((req: Request, res: Response, next: NextFunction) => {
    if (req.path.startsWith('/_control')) return next();
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    res.end = ((...args: unknown[]) => {
      const timer = setTimeout(() => end(...args), ms);
      res.once('close', () => clearTimeout(timer));
      return res;
    }) as Response['end'];
    next();
  });
  outer.use(router);
  return outer;
}
