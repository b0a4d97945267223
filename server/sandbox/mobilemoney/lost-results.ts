import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * `POST /_control/lose-results {"count": n}`: the operator's next n asynchronous results (reversal and
 * transaction-status results, queue-timeout notices; not STK callbacks) are never sent, as when the
 * operator's result is lost on its way — to rehearse what recovers them. `{"count": 0}` switches it
 * off. Counted down in PostgreSQL, so it holds for every process.
 */
export function mountLostResultsControl(router: Router, em: EntityManager): void {
  router.post('/_control/lose-results', express.json(), async (req: Request, res: Response, next: NextFunction) => {
    try {
      const count = (req.body as { count?: unknown } | undefined)?.count;
      if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
        res.status(400).json({ error: 'count must be a whole number, 0 or more' });
        return;
      }
      await em.getConnection().execute(
        `INSERT INTO sandbox_controls (provider, mode, lost_results) VALUES ('mobilemoney', 'ok', ?)
         ON CONFLICT (provider) DO UPDATE SET lost_results = EXCLUDED.lost_results, updated_at = now()`,
        [count],
      );
      res.json({ provider: 'mobilemoney', lose_results: count });
    } catch (err) {
      next(err);
    }
  });
}

/** Whether this result is one to lose (and counts it). */
export async function takeLostResult(em: EntityManager): Promise<boolean> {
  const rows = await em.getConnection().execute<unknown[]>(
    `UPDATE sandbox_controls SET lost_results = lost_results - 1 WHERE provider = 'mobilemoney' AND lost_results > 0 RETURNING 1`,
  );
  return rows.length > 0;
}
