import { createHash } from 'node:crypto';
import type { SandboxDeps } from '../module.js';
import { UnitOfWork, readsOnly, type Db, type Query } from '../sql.js';
import { API_ERROR_BODY, takeApiError } from './api-errors.js';
import type { StripeErrorBody } from './errors.js';
import { SimError, invalidRequest } from './errors.js';
import type { PendingEvent } from './events.js';
import { eventJobs } from './events.js';
import { commitWithJobs, followUpJobs, type FollowUp, type NamedWrite } from './jobs.js';

export type { FollowUp } from './jobs.js';

/** What a handler answers: stored for replay and committed together with its state changes and events. */
export interface SimResponse {
  status: number;
  body: unknown;
  events: PendingEvent[];
  followUps?: FollowUp[];
}

export interface Outcome {
  status: number;
  body: unknown;
  replayed: boolean;
  /** `body` serialised, when it already was (to be stored): sent as is unless something rewrites the body. */
  json?: string;
}

/** A stored answer (sandbox_cardpay_idempotency), as read with the request's first statement. */
export interface StoredAnswer {
  request_hash: string;
  response_status: number;
  response_body: unknown;
}

export interface IdempotentRequest {
  account: string;
  key: string | undefined;
  method: string;
  path: string;
  params: unknown;
  /** The answer stored under this key, read before the request ran (null: none yet). */
  stored: StoredAnswer | null;
  /** The event types the account's endpoints listened to before the request ran ('*': all). */
  listened: string[];
  /** The account's requests are being failed after they ran (the api-errors control, api-errors.ts): this one may be. */
  failingAfterRunning?: boolean;
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value as object).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])]));
  }
  return value;
}

function requestHash(req: IdempotentRequest): string {
  return createHash('sha256').update(`${req.method} ${req.path}\n${JSON.stringify(canonical(req.params))}`).digest('hex');
}

function replay(req: IdempotentRequest, hash: string, row: StoredAnswer): Outcome {
  if (row.request_hash !== hash) {
    const body: StripeErrorBody = {
      type: 'idempotency_error',
      message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${req.key}' if you meant to execute a different request.`,
    };
    return { status: 400, body: { error: body }, replayed: false };
  }
  return { status: row.response_status, body: row.response_body, replayed: true };
}

/** The events some endpoint may receive: no other is built, serialised or joined with the endpoints. */
function listenedEvents(events: PendingEvent[], listened: string[]): PendingEvent[] {
  if (listened.length === 0) return [];
  return listened.includes('*') ? events : events.filter((e) => listened.includes(e.type));
}

const errorOutcome = (err: SimError): Outcome => ({ status: err.status, body: { error: err.body }, replayed: false });

const STORED = 'SELECT request_hash, response_status, response_body FROM sandbox_cardpay_idempotency WHERE account = ? AND idempotency_key = ?';

/** Another request with this key committed first: replay its answer. */
class KeyTaken extends Error {}

/** Another request with this key is running now. */
class KeyInUse extends Error {}

/**
 * Another request with this key is still running: Stripe answers 409 at once (the SDKs retry it) and
 * stores nothing for the refused request.
 */
function inProgress(key: string): Outcome {
  const body: StripeErrorBody = {
    type: 'idempotency_error',
    code: 'idempotency_key_in_use',
    doc_url: 'https://docs.stripe.com/error-codes/idempotency-key-in-use',
    message: `There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): ${key}. Please try again later.`,
  };
  return { status: 409, body: { error: body }, replayed: false };
}

/** The transaction-scoped lock a request that reads first holds on its key while it runs (see runIdempotent). */
const keyLock = (account: string, key: string) => `sandbox_cardpay_idempotency:${account}:${key}`;

const keyConflict = (err: unknown) =>
  (err as { code?: string; constraint?: string }).code === '23505' && (err as { constraint?: string }).constraint === 'sandbox_cardpay_idempotency_pkey';

/**
 * Runs a mutating request as one unit of work (sql.ts) and commits, in its last statement, the state
 * changes, the stored answer and the jobs of its events (those of a type the account's endpoints
 * listened to when the request started; the jobs go to the endpoints that still do at commit) — so a request that only writes (a confirmed
 * create with a test card) costs one round trip after the one that read its stored answer.
 *
 * Stripe-style idempotency: a key already answered replays that answer (other parameters → 400
 * idempotency_error). A request with the key that arrives while another is still running is answered
 * 409 idempotency_error (`idempotency_key_in_use`) at once, and nothing is stored for it, as at Stripe
 * (whose SDKs retry a 409). A request that has to read first claims its key right after BEGIN: it tries
 * a transaction-scoped advisory lock on the key (held: 409) and inserts the key (ON CONFLICT DO NOTHING:
 * a request that finished meanwhile is replayed); one that only writes inserts the key with its answer
 * in the final statement, where a concurrent first-comer makes it fail on the key (409). N identical
 * concurrent requests do the work once. A request that fails validation (a thrown SimError) is rolled
 * back and not stored, as at Stripe; a card decline is an answer (402) and is stored. So is a 500 of a
 * request that ran (the api-errors control): committed with the request's work, and replayed as any answer.
 */
export async function runIdempotent(deps: SandboxDeps, req: IdempotentRequest, handler: (db: Db) => Promise<SimResponse>): Promise<Outcome> {
  try {
    const { key } = req;
    // Stripe's own words (no error code): a key is 1–255 characters.
    if (key && key.length > 255) {
      throw invalidRequest(
        `Idempotent key length is ${key.length}, which is outside accepted lengths. Idempotent Keys must be 1-255 characters long. If you're looking for a decent generator, try using a UUID defined by IETF RFC 4122.`,
      );
    }
    const hash = key ? requestHash(req) : '';
    if (key && req.stored) return replay(req, hash, req.stored);

    let claimed = false;
    const claim = async (query: Query) => {
      // The lock is tried, never waited for: held, another request with the key is running (409).
      const [row] = await query<{ locked: boolean; claimed: boolean }>(
        `WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS locked),
              claim AS (INSERT INTO sandbox_cardpay_idempotency (account, idempotency_key, request_hash) SELECT ?, ?, ? FROM lock WHERE locked
                        ON CONFLICT (account, idempotency_key) DO NOTHING RETURNING 1)
         SELECT (SELECT locked FROM lock) AS locked, EXISTS (SELECT 1 FROM claim) AS claimed`,
        [keyLock(req.account, key!), req.account, key, hash],
      );
      if (!row?.locked) throw new KeyInUse();
      if (!row.claimed) throw new KeyTaken();
      claimed = true;
    };
    const work = new UnitOfWork(deps.pool, key ? { onBegin: claim } : {});
    try {
      let res = await handler(work);
      // It ran; the api-errors control fails it now, as Stripe can after it began: the work stays done, the answer is a 500.
      if (req.failingAfterRunning && (await takeApiError((sql, params) => work.query(sql, params), req.account))) {
        res = { ...res, status: 500, body: API_ERROR_BODY };
      }
      const writes: NamedWrite[] = [];
      const json = key ? JSON.stringify(res.body) : undefined;
      if (key) {
        const answer = [res.status, json, req.account, key];
        writes.push(
          claimed
            ? { name: 'answer', sql: 'UPDATE sandbox_cardpay_idempotency SET response_status = ?, response_body = ?::jsonb WHERE account = ? AND idempotency_key = ?', params: answer }
            : {
                name: 'answer',
                sql: 'INSERT INTO sandbox_cardpay_idempotency (response_status, response_body, account, idempotency_key, request_hash) VALUES (?, ?::jsonb, ?, ?, ?)',
                params: [...answer, hash],
              },
          // Keys are kept 24 hours, as at Stripe.
          { name: 'expired', sql: `DELETE FROM sandbox_cardpay_idempotency WHERE account = ? AND created_at < now() - interval '24 hours'`, params: [req.account] },
        );
      }
      const events = listenedEvents(res.events, req.listened);
      await commitWithJobs(work, [eventJobs(deps, req.account, events, key ?? null), followUpJobs(res.followUps ?? [])], writes);
      return { status: res.status, body: res.body, replayed: false, json };
    } catch (err) {
      await work.rollback();
      // A request that only writes claims its key as it commits: a conflict there means another request
      // with the key ran while this one did (it had no answer when this one started), as a held lock does.
      if (key && (err instanceof KeyInUse || keyConflict(err))) return inProgress(key);
      if (key && err instanceof KeyTaken) {
        const [row] = await readsOnly(deps.pool).query<StoredAnswer>(STORED, [req.account, key]);
        if (!row) throw new Error('idempotency row vanished');
        return replay(req, hash, row);
      }
      throw err;
    }
  } catch (err) {
    if (err instanceof SimError) return errorOutcome(err);
    throw err;
  }
}
