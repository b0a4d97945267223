import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Db } from './db.js';
import { dbOf, inTransaction } from './db.js';
import type { StripeErrorBody } from './errors.js';
import { SimError, invalidRequest } from './errors.js';
import type { PendingEvent } from './events.js';

/** A job to schedule once the change is committed (e.g. a refund that settles later). */
export interface FollowUp {
  job: string;
  data: Record<string, unknown>;
  delayMs: number;
}

/** What a handler answers: stored for replay and committed together with its state changes. */
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
  /** Events to emit after the commit (none on a replay). */
  events: PendingEvent[];
  followUps?: FollowUp[];
}

export interface IdempotentRequest {
  account: string;
  key: string | undefined;
  method: string;
  path: string;
  params: unknown;
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

interface StoredRow {
  request_hash: string;
  response_status: number;
  response_body: unknown;
}

function replay(req: IdempotentRequest, hash: string, row: StoredRow): Outcome {
  if (row.request_hash !== hash) {
    const body: StripeErrorBody = {
      type: 'idempotency_error',
      message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${req.key}' if you meant to execute a different request.`,
    };
    return { status: 400, body: { error: body }, replayed: false, events: [] };
  }
  return { status: row.response_status, body: row.response_body, replayed: true, events: [] };
}

const errorOutcome = (err: SimError): Outcome => ({ status: err.status, body: { error: err.body }, replayed: false, events: [] });

/**
 * Stripe-style idempotency for a mutating request. The first request with a key inserts the key row
 * (INSERT … ON CONFLICT DO NOTHING) in the same transaction as its work and stores its answer there;
 * a concurrent request with the same key blocks on that row until the first commits, then replays the
 * stored answer, so N identical concurrent requests do the work once. Same key, other parameters →
 * 400 idempotency_error. A request that fails validation (a thrown SimError) is rolled back and not
 * stored, as at Stripe; a card decline is an answer (402) and is stored.
 */
export async function runIdempotent(em: EntityManager, req: IdempotentRequest, handler: (db: Db) => Promise<SimResponse>): Promise<Outcome> {
  try {
    if (!req.key) {
      const res = await inTransaction(em, handler);
      return { ...res, replayed: false };
    }
    if (req.key.length > 255) throw invalidRequest('Idempotency-Key must be at most 255 characters long.', undefined, 'idempotency_key_in_use');
    const hash = requestHash(req);
    const [done] = await dbOf(em).query<StoredRow>(
      'SELECT request_hash, response_status, response_body FROM sandbox_cardpay_idempotency WHERE account = ? AND idempotency_key = ?',
      [req.account, req.key],
    );
    if (done) return replay(req, hash, done);

    return await inTransaction(em, async (db): Promise<Outcome> => {
      const claimed = await db.query(
        `INSERT INTO sandbox_cardpay_idempotency (account, idempotency_key, request_hash) VALUES (?, ?, ?)
         ON CONFLICT (account, idempotency_key) DO NOTHING RETURNING 1 AS claimed`,
        [req.account, req.key, hash],
      );
      if (claimed.length === 0) {
        // Another request with this key committed while we waited on its row: replay its answer.
        const [row] = await db.query<StoredRow>(
          'SELECT request_hash, response_status, response_body FROM sandbox_cardpay_idempotency WHERE account = ? AND idempotency_key = ?',
          [req.account, req.key],
        );
        if (!row) throw new Error('idempotency row vanished');
        return replay(req, hash, row);
      }
      const res = await handler(db);
      await db.query(
        'UPDATE sandbox_cardpay_idempotency SET response_status = ?, response_body = ?::jsonb WHERE account = ? AND idempotency_key = ?',
        [res.status, JSON.stringify(res.body), req.account, req.key],
      );
      await db.query(`DELETE FROM sandbox_cardpay_idempotency WHERE account = ? AND created_at < now() - interval '24 hours'`, [req.account]);
      return { ...res, replayed: false };
    });
  } catch (err) {
    if (err instanceof SimError) return errorOutcome(err);
    throw err;
  }
}
