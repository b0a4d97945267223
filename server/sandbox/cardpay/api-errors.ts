import type { NextFunction, Request, Response, Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { onPool, type Query } from '../sql.js';
import { controlAccount } from './auth.js';

/** Stripe's answer to a request that failed on its side (500 api_error). */
export const API_ERROR_BODY = { error: { type: 'api_error', message: 'An unknown error occurred.' } } as const;

/**
 * `POST /_control/api-errors {"count": n}` with the account's secret key (`Authorization: Bearer sk_test_…`):
 * the account's next n API requests that change something (POST, DELETE) fail as a Stripe request can
 * fail on Stripe's side once it began to run. Each is carried out and committed as usual — the intent made,
 * the card charged, its events sent — and then answered 500 api_error, and that 500 is what its
 * Idempotency-Key stores: a repeat with the key gets the same 500 (Idempotent-Replayed) until the key is
 * pruned after 24 h, as Stripe saves the answer of the first request with a key "regardless of whether it
 * succeeds or fails … including 500 errors" (docs.stripe.com/api/idempotent_requests). A request refused
 * before it runs (validation, a key in use) is answered as usual and not counted. `{"count": 0}` switches
 * it off. Counted down in PostgreSQL (sandbox_cardpay_api_errors), so it holds for every process.
 *
 * Stripe's 500 says the work may or may not have happened; the simulator chooses "it happened", the case
 * where a new request (another key) would do it a second time.
 */
export function mountApiErrorsControl(router: Router, deps: SandboxDeps): void {
  router.post('/_control/api-errors', async (req: Request, res: Response, next: NextFunction) => {
    try {
      const account = await controlAccount(deps.pool, req, res);
      if (account === null) return;
      const count = (req.body as { count?: unknown } | undefined)?.count;
      if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
        res.status(400).json({ error: 'count must be a whole number, 0 or more' });
        return;
      }
      await onPool(deps.pool)(
        `INSERT INTO sandbox_cardpay_api_errors (account, remaining) VALUES (?, ?)
         ON CONFLICT (account) DO UPDATE SET remaining = EXCLUDED.remaining`,
        [account, count],
      );
      res.json({ provider: 'cardpay', api_errors: count });
    } catch (err) {
      next(err);
    }
  });
}

/** Whether this request of `account` is to fail after it ran (the control above), counting it; in the request's own transaction. */
export async function takeApiError(query: Query, account: string): Promise<boolean> {
  const rows = await query('UPDATE sandbox_cardpay_api_errors SET remaining = remaining - 1 WHERE account = ? AND remaining > 0 RETURNING 1', [account]);
  return rows.length > 0;
}
