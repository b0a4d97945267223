import type { NextFunction, Request, Response, Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { onPool } from '../sql.js';
import { KEY_ACCOUNT, expiredKey, keyHash, presentedKey, refuseControl, type PresentedKey } from './auth.js';
import { newId } from './db.js';
import { SimError } from './errors.js';

/** Stripe lets a rolled key stay valid for at most 7 days. */
export const MAX_EXPIRY_SECONDS = 7 * 24 * 3600;

/** A new key of the type `prefix` (`sk_test`, `rk_test`), 99 characters after it as Stripe's, one the simulator takes (auth.ts). */
function newKey(prefix: string): string {
  const key = newId(prefix, 99);
  return key.includes('invalid') ? newKey(prefix) : key;
}

/**
 * `POST /_control/roll-key {"expires_in_seconds": n}` with the key to roll (`Authorization: Bearer sk_test_…`):
 * what "Roll key…" does in Stripe's Dashboard (docs.stripe.com/keys). A new key of the same type is issued
 * for the SAME account — its objects, endpoints and webhook secrets stay — and the rolled key expires in
 * n seconds (0, the default: at once; at most 7 days, as the Dashboard offers), after which Stripe answers
 * it 401 `api_key_expired` ("Expired API Key provided: sk_test_****abcd"). Answers the new key and when the
 * rolled one expires (Unix seconds). A rolled key can be rolled again: its expiry is never put off (the
 * earlier one stays), and an expired key cannot be (401). Only the keys' sha256 are stored
 * (sandbox_cardpay_keys), so a key a merchant rehearses rotating is no more kept than any other.
 */
export function mountRollKeyControl(router: Router, deps: SandboxDeps): void {
  router.post('/_control/roll-key', async (req: Request, res: Response, next: NextFunction) => {
    try {
      let rolled: PresentedKey;
      try {
        rolled = presentedKey(req);
      } catch (err) {
        if (!(err instanceof SimError)) throw err;
        refuseControl(res, err);
        return;
      }
      const given = (req.body as { expires_in_seconds?: unknown } | undefined)?.expires_in_seconds;
      const seconds = given === undefined ? 0 : given;
      if (typeof seconds !== 'number' || !Number.isSafeInteger(seconds) || seconds < 0 || seconds > MAX_EXPIRY_SECONDS) {
        res.status(400).json({ error: `expires_in_seconds must be a whole number from 0 (now) to ${MAX_EXPIRY_SECONDS} (7 days)` });
        return;
      }
      const issued = newKey(rolled.prefix);
      // One statement: the rolled key's account (an expired key rolls nothing), the new key on it, the rolled key's expiry.
      const [row] = await onPool(deps.pool)<{ expired: boolean; expires_at: string | null }>(
        `WITH cur AS (SELECT account, expired FROM ${KEY_ACCOUNT} AS one),
              issued AS (INSERT INTO sandbox_cardpay_keys (key_hash, account) SELECT ?, account FROM cur WHERE NOT expired),
              rolled AS (INSERT INTO sandbox_cardpay_keys (key_hash, account, expires_at)
                         SELECT ?, account, date_trunc('second', now()) + make_interval(secs => ?) FROM cur WHERE NOT expired
                         ON CONFLICT (key_hash) DO UPDATE SET expires_at = LEAST(sandbox_cardpay_keys.expires_at, EXCLUDED.expires_at)
                         RETURNING expires_at)
         SELECT cur.expired, (SELECT extract(epoch FROM expires_at)::bigint FROM rolled) AS expires_at FROM cur`,
        [rolled.hash, keyHash(issued), rolled.hash, seconds],
      );
      if (row!.expired) {
        refuseControl(res, expiredKey(rolled));
        return;
      }
      res.json({ provider: 'cardpay', secret_key: issued, rolled_key_expires_at: Number(row!.expires_at) });
    } catch (err) {
      next(err);
    }
  });
}
