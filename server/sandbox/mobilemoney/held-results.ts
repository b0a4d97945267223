import type { NextFunction, Request, Response, Router } from 'express';
import { mountLossCountdown, takeLoss } from '../controls.js';
import type { SandboxDeps } from '../module.js';

/**
 * Results that arrive late, as the operator's sometimes do: `POST /_control/hold-results {"count": n}`
 * holds the next n asynchronous results (reversal and transaction-status results, queue timeouts; not
 * STK callbacks) instead of sending them; `POST /_control/release-results {"count": n}` sends the n
 * held longest, oldest first, one after the other, and answers once they were delivered (each
 * delivery's status), so a test knows they were applied. Kept in PostgreSQL (sandbox_held_results), so
 * it holds for every process.
 */
export function mountHeldResults<Job extends object>(router: Router, deps: SandboxDeps, deliver: (job: Job & { released: true }) => Promise<number | null>): void {
  mountLossCountdown(router, deps.em, 'mobilemoney', '/_control/hold-results', 'hold_results', 'held_results');
  router.post('/_control/release-results', async (req: Request, res: Response, next: NextFunction) => {
    try {
      const count = (req.body as { count?: unknown } | undefined)?.count;
      if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1) {
        res.status(400).json({ error: 'count must be a whole number, 1 or more' });
        return;
      }
      const rows = await deps.em.getConnection().execute<{ id: string; job: Job }[]>(
        `DELETE FROM sandbox_held_results WHERE id IN (SELECT id FROM sandbox_held_results WHERE provider = 'mobilemoney' ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)
         RETURNING id, job`,
        [count],
      );
      const delivered: (number | null)[] = [];
      for (const { job } of rows.sort((a, b) => Number(a.id) - Number(b.id))) delivered.push(await deliver({ ...job, released: true }));
      res.json({ provider: 'mobilemoney', released: delivered.length, statuses: delivered });
    } catch (err) {
      next(err);
    }
  });
}

/** Whether this result (its delivery job) is to be held (hold-results): then it is kept, to be sent when released. */
export async function holdResult(deps: SandboxDeps, job: object): Promise<boolean> {
  const run = (sql: string, params: unknown[]) => deps.em.getConnection().execute(sql, params);
  if (!(await takeLoss(run, 'mobilemoney', 'held_results'))) return false;
  await run(`INSERT INTO sandbox_held_results (provider, job) VALUES ('mobilemoney', ?::jsonb)`, [JSON.stringify(job)]);
  return true;
}
