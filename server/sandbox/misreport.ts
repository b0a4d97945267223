import type { NextFunction, Request, Response, Router } from 'express';
import type { EntityManager } from '@mikro-orm/postgresql';

/** What a misreporting simulator puts in its answers instead of the real amount / currency (wire values). */
export interface Misreport {
  amount?: number | string;
  currency?: string;
}

/** Rewrites one provider's JSON answer so it reports `m` (each simulator knows where its amounts are). */
export type MisreportRewriter = (body: unknown, m: Misreport) => unknown;

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
 * real ones, for every process (the switch is a row of sandbox_controls, read by the outage switch's
 * middleware in the same query); `{}` switches it off. What the simulator stores and charges is
 * unchanged: only what it reports lies.
 */
export function mountMisreportControl(router: Router, em: EntityManager, provider: string): void {
  router.post('/_control/misreport', async (req: Request, res: Response, next: NextFunction) => {
    try {
      const body = (req.body ?? {}) as { amount?: unknown; currency?: unknown };
      const amount = typeof body.amount === 'number' || typeof body.amount === 'string' ? body.amount : null;
      const currency = typeof body.currency === 'string' ? body.currency : null;
      await em.getConnection().execute(
        `INSERT INTO sandbox_controls (provider, mode, misreport_amount, misreport_currency) VALUES (?, 'ok', ?::jsonb, ?)
         ON CONFLICT (provider) DO UPDATE SET misreport_amount = EXCLUDED.misreport_amount, misreport_currency = EXCLUDED.misreport_currency, updated_at = now()`,
        [provider, amount === null ? null : JSON.stringify(amount), currency],
      );
      res.json({ provider, amount, currency });
    } catch (err) {
      next(err);
    }
  });
}

/** Makes this response report `m` (called by the outage switch's middleware when a misreport is on). */
export function misreportResponse(res: Response, m: Misreport, rewrite: MisreportRewriter): void {
  const json = res.json.bind(res);
  res.json = (body: unknown) => json(rewrite(structuredClone(body), m));
}
