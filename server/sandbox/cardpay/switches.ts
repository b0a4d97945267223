import type { NextFunction, Request, Response } from 'express';
import type pg from 'pg';
import { CONTROLS_COLUMNS, applyControls, controlsOf, type Controls, type ControlsRow } from '../controls.js';
import type { HeldAnswers } from '../held-answers.js';
import { eachObject, type MisreportRewriter } from '../misreport.js';
import { readsOnly } from '../sql.js';
import { KEY_ACCOUNT } from './auth.js';
import type { StoredAnswer } from './idempotency.js';

/** The answer to every call while the simulator is in an outage (error mode). */
export const OUTAGE_BODY = { error: { type: 'api_error', message: 'The cardpay simulator is in an outage (error mode). Try again later.' } };

/** Integrity tests: intents, charges and refunds report another amount / currency. */
export const misreport: MisreportRewriter = (body, m) => {
  eachObject(body, (o) => {
    if (o.object !== 'payment_intent' && o.object !== 'charge' && o.object !== 'refund') return;
    if (m.amount !== undefined) o.amount = m.amount;
    // What a succeeded intent collected is the amount it reports settled: it lies about that too.
    if (m.amount !== undefined && o.object === 'payment_intent' && typeof o.amount_received === 'number' && o.amount_received > 0) o.amount_received = m.amount;
    if (m.currency !== undefined) o.currency = m.currency;
  });
  return body;
};

/** Applies the simulator's switches (outage, misreport) to a request; true when it goes on. */
export const applySwitches = (res: Response, switches: Controls, held: HeldAnswers) => applyControls(res, switches, OUTAGE_BODY, held, misreport);

/** What a request reads before it runs (see requestStart). */
export interface RequestStart {
  switches: Controls;
  /** The account the key acts on (auth.ts KEY_ACCOUNT); null without a key. */
  account: string | null;
  /** The key was rolled and has expired: the request is answered 401 api_key_expired (after the switches). */
  expired: boolean;
  stored: StoredAnswer | null;
  /** The event types the account's webhook endpoints listen to ('*': all); empty without an account. */
  listened: string[];
  /** Answers are being lost (the lose-answers control, index.ts): this one may be. */
  losingAnswers: boolean;
  /** Answers to attach requests are being lost (the lose-attach-answers control, index.ts): this one may be. */
  losingAttachAnswers: boolean;
  /** The account's requests that change something are failed after they ran (the api-errors control, api-errors.ts): this one may be. */
  failingAfterRunning: boolean;
}

/**
 * What a request reads before it runs, in ONE statement: the simulator's switches, the account of the
 * request's key (`keyHash`, its sha256: the account of the key it was rolled from, else its own, and
 * whether it expired; auth.ts) and, for a request with an Idempotency-Key (and a valid secret key), the
 * answer already stored under that key; for a known account, the event types its endpoints listen to (and
 * whether the api-errors control is armed for it), so a mutation builds only events someone may receive
 * (which endpoints do is still decided when the jobs are committed).
 */
export async function requestStart(pool: pg.Pool, keyHash: string | null, idempotencyKey: string | undefined): Promise<RequestStart> {
  const [row] = await readsOnly(pool).query<
    ControlsRow & Partial<StoredAnswer> & { account: string; expired: boolean; listened: string[] | null; lost_results: number | null; lost_answers: number | null; api_errors: number | null }
  >(
    `SELECT one.account, one.expired, ${CONTROLS_COLUMNS}, c.lost_results, c.lost_answers, i.request_hash, i.response_status, i.response_body,
            (SELECT remaining FROM sandbox_cardpay_api_errors a WHERE a.account = one.account) AS api_errors,
            (SELECT array_agg(DISTINCT t) FROM sandbox_cardpay_webhook_endpoints e, unnest(e.enabled_events) AS t WHERE e.account = one.account) AS listened
       FROM ${KEY_ACCOUNT} AS one
       LEFT JOIN sandbox_controls c ON c.provider = 'cardpay'
       LEFT JOIN sandbox_cardpay_idempotency i ON i.account = one.account AND i.idempotency_key = ?`,
    [keyHash ?? '', keyHash && idempotencyKey ? idempotencyKey : ''],
  );
  const stored = row?.request_hash ? { request_hash: row.request_hash, response_status: row.response_status!, response_body: row.response_body } : null;
  return {
    switches: controlsOf(row),
    account: keyHash ? row!.account : null,
    expired: Boolean(keyHash && row?.expired),
    stored,
    listened: row?.listened ?? [],
    losingAnswers: (row?.lost_results ?? 0) > 0,
    losingAttachAnswers: (row?.lost_answers ?? 0) > 0,
    failingAfterRunning: (row?.api_errors ?? 0) > 0,
  };
}

/** The switches alone, for the routes that are not the API (the 3-D Secure page, unknown URLs). */
export function switchesGate(pool: pg.Pool, held: HeldAnswers) {
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      if (applySwitches(res, (await requestStart(pool, null, undefined)).switches, held)) next();
    } catch (err) {
      next(err);
    }
  };
}
