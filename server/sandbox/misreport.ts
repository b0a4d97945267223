import type { NextFunction, Request, Response, Router } from 'express';
import express from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';

/** What a misreporting simulator puts in its answers instead of the real amount / currency (wire values). */
export interface Misreport {
  amount?: number | string;
  currency?: string;
}

/** Rewrites one provider's JSON answer so it reports `m` (each simulator knows where its amounts are). */
export type MisreportRewriter = (body: unknown, m: Misreport) => unknown;

async function currentMisreport(em: EntityManager, provider: string): Promise<Misreport | null> {
  const rows = await em.getConnection().execute<{ amount: number | string | null; currency: string | null }[]>(
    'SELECT amount, currency FROM sandbox_misreports WHERE provider = ?',
    [provider],
  );
  const row = rows[0];
  if (!row) return null;
  return { ...(row.amount !== null ? { amount: row.amount } : {}), ...(row.currency !== null ? { currency: row.currency } : {}) };
}

/** Applies `fn` to every object in a JSON value (depth first), in place. */
export function eachObject(value: unknown, fn: (o: Record<string, unknown>) => void): void {
  if (Array.isArray(value)) {
    for (const item of value) eachObject(item, fn);
  } else if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) eachObject(child, fn);
    fn(value as Record<string, unknown>);
  }
}

/**
 * A hostile provider, for integrity tests: `POST /_control/misreport {amount?, currency?}` makes every
 * JSON answer of this simulator report that amount and/or currency (as wire values) instead of the
 * real ones, for every process (the switch is in PostgreSQL); `{}` switches it off. What the simulator
 * stores and charges is unchanged: only what it reports lies. Mount it before the simulator's routes.
 */
export function misreportSwitch(router: Router, em: EntityManager, provider: string, rewrite: MisreportRewriter): void {
  router.post('/_control/misreport', express.json(), async (req: Request, res: Response, next: NextFunction) => {
    try {
      const body = (req.body ?? {}) as { amount?: unknown; currency?: unknown };
      const amount = typeof body.amount === 'number' || typeof body.amount === 'string' ? body.amount : null;
      const currency = typeof body.currency === 'string' ? body.currency : null;
      if (amount === null && currency === null) {
        await em.getConnection().execute('DELETE FROM sandbox_misreports WHERE provider = ?', [provider]);
      } else {
        await em.getConnection().execute(
          `INSERT INTO sandbox_misreports (provider, amount, currency) VALUES (?, ?::jsonb, ?)
           ON CONFLICT (provider) DO UPDATE SET amount = EXCLUDED.amount, currency = EXCLUDED.currency`,
          [provider, amount === null ? null : JSON.stringify(amount), currency],
        );
      }
      res.json({ provider, amount, currency });
    } catch (err) {
      next(err);
    }
  });
  router.use(async (req: Request, res: Response, next: NextFunction) => {
    if (req.path.startsWith('/_control')) return next();
    try {
      const m = await currentMisreport(em, provider);
      if (m) {
        const json = res.json.bind(res);
        res.json = (body: unknown) => json(rewrite(structuredClone(body), m));
      }
      next();
    } catch (err) {
      next(err);
    }
  });
}
