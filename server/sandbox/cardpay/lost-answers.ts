import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';

/**
 * `POST /_control/lose-answers {"count": n}`: the next n answers to API requests that change something
 * (POST, DELETE) are lost on their way back — the request is carried out and committed, then the
 * connection drops without an answer, as when a network fails after the provider acted. The caller
 * cannot tell what happened. stripe-node retries a dropped connection once with the same idempotency
 * key (and that answer is lost too while the count lasts): `{"count": 2}` loses the adapter's answer to
 * one create. `{"count": 0}` switches it off. Counted down in PostgreSQL (sandbox_controls.lost_results),
 * so it holds for every process.
 */
export function mountLostAnswersControl(router: Router, em: EntityManager): void {
  router.post('/_control/lose-answers', express.json(), async (req: Request, res: Response, next: NextFunction) => {
    try {
      const count = (req.body as { count?: unknown } | undefined)?.count;
      if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
        res.status(400).json({ error: 'count must be a whole number, 0 or more' });
        return;
      }
      await em.getConnection().execute(
        `INSERT INTO sandbox_controls (provider, mode, lost_results) VALUES ('cardpay', 'ok', ?)
         ON CONFLICT (provider) DO UPDATE SET lost_results = EXCLUDED.lost_results, updated_at = now()`,
        [count],
      );
      res.json({ provider: 'cardpay', lose_answers: count });
    } catch (err) {
      next(err);
    }
  });
}

/** Whether this answer is one to lose (and counts it). */
export async function takeLostAnswer(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query(`UPDATE sandbox_controls SET lost_results = lost_results - 1 WHERE provider = 'cardpay' AND lost_results > 0 RETURNING 1`);
  return rows.length > 0;
}
