import type { NextFunction, Request, Response, Router } from 'express';
import express from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';
import { mountMisreportControl, misreportResponse, type Misreport, type MisreportRewriter } from './misreport.js';

export type OutageMode = 'ok' | 'error' | 'hang';

/** How long a "hang" lasts: longer than any provider timeout the service uses. */
const HANG_MS = 120_000;

export async function outageMode(em: EntityManager, provider: string): Promise<OutageMode> {
  return (await controls(em, provider)).mode;
}

/** The provider's switches, in one query per simulator request: outage mode and misreport. */
async function controls(em: EntityManager, provider: string): Promise<{ mode: OutageMode; misreport: Misreport | null }> {
  const rows = await em.getConnection().execute<{ mode: OutageMode; misreport_amount: number | string | null; misreport_currency: string | null }[]>(
    'SELECT mode, misreport_amount, misreport_currency FROM sandbox_controls WHERE provider = ?',
    [provider],
  );
  const row = rows[0];
  if (!row) return { mode: 'ok', misreport: null };
  const misreport: Misreport = {
    ...(row.misreport_amount !== null ? { amount: row.misreport_amount } : {}),
    ...(row.misreport_currency !== null ? { currency: row.misreport_currency } : {}),
  };
  return { mode: row.mode, misreport: Object.keys(misreport).length > 0 ? misreport : null };
}

/** The misreport switch alone, for answers a simulator sends later (asynchronous results). */
export async function currentMisreport(em: EntityManager, provider: string): Promise<Misreport | null> {
  return (await controls(em, provider)).misreport;
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
 * in PostgreSQL, so it holds for every process. Mount it before the simulator's routes. With `misreport`
 * (the simulator's rewriter) it also mounts `POST /_control/misreport` (see misreport.ts).
 */
export function outageSwitch(router: Router, em: EntityManager, provider: string, errorBody: unknown, misreport?: MisreportRewriter): void {
  if (misreport) mountMisreportControl(router, em, provider);
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
      const { mode, misreport: lie } = await controls(em, provider);
      if (lie && misreport) misreportResponse(res, lie, misreport);
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
