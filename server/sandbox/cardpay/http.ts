import type { NextFunction, Request, Response, Router } from 'express';
import { takeLoss } from '../controls.js';
import { API_ERROR_BODY } from './api-errors.js';
import type { SandboxDeps } from '../module.js';
import { onPool, readsOnly } from '../sql.js';
import { accountOf, expiredKey, presentedKey, type PresentedKey } from './auth.js';
import type { Db } from './db.js';
import { newId } from './db.js';
import { SimError } from './errors.js';
import { expandResponse } from './expand.js';
import type { Outcome, SimResponse } from './idempotency.js';
import { runIdempotent } from './idempotency.js';
import { SIM_API_VERSION } from './objects.js';
import type { Params } from './params.js';
import { applySwitches, requestStart, type RequestStart } from './switches.js';

/** What an API handler gets: the calling key's account, the decoded parameters, the database. */
export interface ApiContext {
  account: string;
  params: Params;
  /** Path parameters (`:id`). */
  path: Record<string, string>;
  db: Db;
  deps: SandboxDeps;
  /** The request's Stripe-Version (the SDK pins one), else the simulator's: some rules depend on it. */
  apiVersion: string;
}

/** `POST /v1/payment_methods/:id/attach`, whose answers the lose-attach-answers control loses. */
const ATTACH_PATH = /^\/v1\/payment_methods\/[^/]+\/attach$/;

export const ok = (body: unknown, events: SimResponse['events'] = []): SimResponse => ({ status: 200, body, events });

/** Answers `outcome`: its `json` as is when given, else `body` through res.json (which a misreport rewrites). */
function send(req: Request, res: Response, outcome: Pick<Outcome, 'status' | 'body' | 'replayed' | 'json'>): void {
  res.set('Request-Id', newId('req', 14));
  res.set('Stripe-Version', req.get('stripe-version') ?? SIM_API_VERSION);
  const key = req.get('idempotency-key');
  if (key) res.set('Idempotency-Key', key);
  if (outcome.replayed) res.set('Idempotent-Replayed', 'true');
  res.status(outcome.status);
  if (outcome.json === undefined) res.json(outcome.body);
  else res.set('Content-Type', 'application/json').send(outcome.json);
}

/** The calling key, or the 401 to answer (after the switches: an outage answers even a bad key). */
function authenticate(req: Request): { key: PresentedKey; refused: null } | { key: null; refused: unknown } {
  try {
    return { key: presentedKey(req), refused: null };
  } catch (err) {
    return { key: null, refused: err };
  }
}

/**
 * The key's account, read by the request's first statement (requestStart), or the 401 to throw: a key
 * refused as it was presented, or one rolled past its expiry.
 */
function accountAfterSwitches(start: RequestStart, key: PresentedKey | null, refused: unknown): string {
  if (refused) throw refused;
  if (start.expired) throw expiredKey(key!);
  return start.account!;
}

/**
 * Stripe-protocol routes: the simulator's switches, key authentication, Stripe's error shape (never the
 * service's envelope), idempotency for mutations, and events committed with the change that caused them.
 */
export function apiRoutes(router: Router, deps: SandboxDeps) {
  const fail = (req: Request, res: Response, next: NextFunction, err: unknown) => {
    if (err instanceof SimError) return send(req, res, { status: err.status, body: { error: err.body }, replayed: false });
    deps.logger.error({ err: { type: (err as Error).name, message: (err as Error).message }, path: req.path }, 'cardpay simulator error');
    if (res.headersSent) return next(err);
    send(req, res, { status: 500, body: API_ERROR_BODY, replayed: false });
  };

  /**
   * A mutation costs two round trips when it only writes (a confirmed create with a test card): one
   * statement reads the switches with the key's stored answer, one writes everything and commits.
   */
  const mutation = (method: 'post' | 'delete', path: string, handler: (ctx: ApiContext) => Promise<SimResponse>) => {
    router[method](path, async (req: Request, res: Response, next: NextFunction) => {
      try {
        const { key: secretKey, refused } = authenticate(req);
        const key = method === 'post' ? req.get('idempotency-key') : undefined;
        const start = await requestStart(deps.pool, secretKey?.hash ?? null, key);
        if (!applySwitches(res, start.switches, deps.heldAnswers)) return;
        const account = accountAfterSwitches(start, secretKey, refused);
        const params = (req.body ?? {}) as Params;
        const apiVersion = req.get('stripe-version') ?? SIM_API_VERSION;
        const request = { account, key, method: method.toUpperCase(), path: req.path, params, stored: start.stored, listened: start.listened, failingAfterRunning: start.failingAfterRunning };
        const outcome = await runIdempotent(deps, request, async (db) => {
          const res = await handler({ account, params, path: req.params as Record<string, string>, db, deps, apiVersion });
          // Expanded before it is stored: a replay answers the same bytes.
          return res.status === 200 ? { ...res, body: await expandResponse(db, account, res.body, params) } : res;
        });
        // Done and committed; its answer lost on the way back (the lose-answers control): the connection just drops.
        if (start.losingAnswers && (await takeLoss(onPool(deps.pool), 'cardpay'))) {
          res.destroy();
          return;
        }
        // The same for an attach alone (the lose-attach-answers control): the card is attached, the answer lost.
        if (start.losingAttachAnswers && ATTACH_PATH.test(req.path) && (await takeLoss(onPool(deps.pool), 'cardpay', 'lost_answers'))) {
          res.destroy();
          return;
        }
        // A misreport rewrites the body as it is sent: then it is serialised there, not as stored.
        send(req, res, start.switches.misreport ? { ...outcome, json: undefined } : outcome);
      } catch (err) {
        fail(req, res, next, err);
      }
    });
  };

  return {
    /** Unknown URLs: a bad or expired key is refused first (401, as at Stripe), then 404 in Stripe's shape. */
    async notFound(req: Request, res: Response, next: NextFunction) {
      try {
        await accountOf(deps.pool, req);
        send(req, res, {
          status: 404,
          body: { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method}: ${req.path}).` } },
          replayed: false,
        });
      } catch (err) {
        fail(req, res, next, err);
      }
    },
    post: (path: string, handler: (ctx: ApiContext) => Promise<SimResponse>) => mutation('post', path, handler),
    delete: (path: string, handler: (ctx: ApiContext) => Promise<SimResponse>) => mutation('delete', path, handler),
    get(path: string, handler: (ctx: ApiContext) => Promise<unknown>) {
      router.get(path, async (req: Request, res: Response, next: NextFunction) => {
        try {
          const { key, refused } = authenticate(req);
          const start = await requestStart(deps.pool, key?.hash ?? null, undefined);
          if (!applySwitches(res, start.switches, deps.heldAnswers)) return;
          const account = accountAfterSwitches(start, key, refused);
          const db = readsOnly(deps.pool);
          const params = req.query as Params;
          const apiVersion = req.get('stripe-version') ?? SIM_API_VERSION;
          const body = await handler({ account, params, path: req.params as Record<string, string>, db, deps, apiVersion });
          send(req, res, { status: 200, body: await expandResponse(db, account, body, params), replayed: false });
        } catch (err) {
          fail(req, res, next, err);
        }
      });
    },
  };
}

export type ApiRoutes = ReturnType<typeof apiRoutes>;
