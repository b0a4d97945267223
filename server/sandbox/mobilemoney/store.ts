import type { EntityManager } from '@mikro-orm/postgresql';
import { accessToken, responseRefId } from './ids.js';

/** The simulator's state, all in PostgreSQL (`sandbox_mobilemoney_*`), so every process sees it. */

export interface StkRow {
  checkout_request_id: string;
  merchant_request_id: string;
  shortcode: string;
  /** CustomerPayBillOnline or CustomerBuyGoodsOnline, as the push asked. */
  transaction_type: string;
  phone: string;
  amount: string;
  account_reference: string;
  callback_url: string;
  result_code: number;
  result_desc: string;
  receipt_number: string | null;
  sends_callback: boolean;
  completes_at: Date;
  /** completes_at has passed (by the database clock). */
  done: boolean;
}

/** Timestamps travel as epoch milliseconds: the ORM's driver hands raw timestamptz values over as text. */
type StkRecord = Omit<StkRow, 'completes_at'> & { completes_at_ms: string };

const toRow = ({ completes_at_ms, ...rest }: StkRecord): StkRow => ({ ...rest, completes_at: new Date(Number(completes_at_ms)) });


const exec = <T>(em: EntityManager, sql: string, params: unknown[] = []) => em.getConnection().execute<T[]>(sql, params);

/** Issues a token for a consumer key and revokes its previous ones (the operator's behaviour). */
export async function issueToken(em: EntityManager, consumerKey: string, lifetimeSeconds: number): Promise<string> {
  const token = accessToken();
  // Serialised per consumer key, so two concurrent requests still leave exactly one live token.
  await em.getKnex().transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`sandbox-mobilemoney-token:${consumerKey}`]);
    await trx.raw('UPDATE sandbox_mobilemoney_tokens SET revoked_at = now() WHERE consumer_key = ? AND revoked_at IS NULL', [consumerKey]);
    await trx.raw(
      'INSERT INTO sandbox_mobilemoney_tokens (access_token, consumer_key, expires_at) VALUES (?, ?, now() + make_interval(secs => ?))',
      [token, consumerKey, lifetimeSeconds],
    );
  });
  return token;
}

/** What the operator knows of a bearer token: live (with its consumer key), revoked by a newer token for that key, or unknown/expired. */
export type TokenState = { state: 'live'; consumerKey: string } | { state: 'revoked' } | { state: 'unknown' };

export async function tokenState(em: EntityManager, token: string): Promise<TokenState> {
  const rows = await exec<{ consumer_key: string; revoked: boolean }>(
    em,
    `SELECT consumer_key, revoked_at IS NOT NULL AS revoked FROM sandbox_mobilemoney_tokens WHERE access_token = ? AND expires_at > now()`,
    [token],
  );
  const row = rows[0];
  if (!row) return { state: 'unknown' };
  return row.revoked ? { state: 'revoked' } : { state: 'live', consumerKey: row.consumer_key };
}

export interface NewStk {
  checkoutRequestId: string;
  merchantRequestId: string;
  consumerKey: string;
  shortcode: string;
  transactionType: string;
  partyA: string;
  partyB: string;
  phone: string;
  amount: number;
  accountReference: string;
  transactionDesc: string | null;
  callbackUrl: string;
  resultCode: number;
  resultDesc: string;
  receiptNumber: string | null;
  sendsCallback: boolean;
  delayMs: number;
}

/**
 * Records a push and returns when it completes (database clock), or null when the phone's previous prompt
 * is still open: Daraja locks the subscriber until the customer has answered. Serialised per phone, so of
 * two pushes at once (from any process) one is accepted.
 */
export async function insertStkUnlessSubscriberBusy(em: EntityManager, s: NewStk): Promise<Date | null> {
  return em.getKnex().transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`sandbox-mobilemoney-subscriber:${s.phone}`]);
    const open = await trx.raw('SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE phone = ? AND completes_at > now() LIMIT 1', [s.phone]);
    if (open.rows.length > 0) return null;
    const inserted = await trx.raw(
      `INSERT INTO sandbox_mobilemoney_stk_requests
         (checkout_request_id, merchant_request_id, consumer_key, shortcode, transaction_type, party_a, party_b, phone, amount,
          account_reference, transaction_desc, callback_url, result_code, result_desc, receipt_number, sends_callback, completes_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now() + make_interval(secs => ?))
       RETURNING (extract(epoch FROM completes_at) * 1000)::bigint::text AS completes_at_ms`,
      [
        s.checkoutRequestId, s.merchantRequestId, s.consumerKey, s.shortcode, s.transactionType, s.partyA, s.partyB, s.phone, s.amount,
        s.accountReference, s.transactionDesc, s.callbackUrl, s.resultCode, s.resultDesc, s.receiptNumber, s.sendsCallback, s.delayMs / 1000,
      ],
    );
    return new Date(Number((inserted.rows[0] as { completes_at_ms: string }).completes_at_ms));
  });
}

const STK_COLUMNS = `checkout_request_id, merchant_request_id, shortcode, transaction_type, phone, amount::text AS amount, account_reference, callback_url,
  result_code, result_desc, receipt_number, sends_callback,
  (extract(epoch FROM completes_at) * 1000)::bigint::text AS completes_at_ms, completes_at <= now() AS done`;

export async function findStk(em: EntityManager, checkoutRequestId: string): Promise<StkRow | null> {
  const rows = await exec<StkRecord>(em, `SELECT ${STK_COLUMNS} FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = ?`, [checkoutRequestId]);
  return rows[0] ? toRow(rows[0]) : null;
}

/** Counts an STK query of a push (sandbox_mobilemoney_stk_requests.query_count: tests see when the service asked). */
export async function recordQuery(em: EntityManager, checkoutRequestId: string): Promise<void> {
  await exec(em, `UPDATE sandbox_mobilemoney_stk_requests SET query_count = query_count + 1 WHERE checkout_request_id = ?`, [checkoutRequestId]);
}

/** A completed transaction (it has a receipt and its time has come) of the shortcode. */
export async function findCompletedByReceipt(em: EntityManager, receipt: string, shortcode: string): Promise<StkRow | null> {
  const rows = await exec<StkRecord>(
    em,
    `SELECT ${STK_COLUMNS} FROM sandbox_mobilemoney_stk_requests
     WHERE receipt_number = ? AND shortcode = ? AND completes_at <= now()`,
    [receipt, shortcode],
  );
  return rows[0] ? toRow(rows[0]) : null;
}

/** Completed transactions of a shortcode in [start, end] (whole seconds) within the last 48 h. */
export async function completedInWindow(em: EntityManager, shortcode: string, start: Date, end: Date, offset: number, limit: number): Promise<StkRow[]> {
  const rows = await exec<StkRecord>(
    em,
    `SELECT ${STK_COLUMNS} FROM sandbox_mobilemoney_stk_requests
     WHERE shortcode = ? AND receipt_number IS NOT NULL AND completes_at <= now()
       AND completes_at >= greatest(?::timestamptz, now() - interval '48 hours')
       AND completes_at < ?::timestamptz + interval '1 second'
     ORDER BY completes_at, checkout_request_id
     OFFSET ? LIMIT ?`,
    [shortcode, start.toISOString(), end.toISOString(), offset, limit],
  );
  return rows.map(toRow);
}

/**
 * Records a reversal attempt. A success is recorded at most once per receipt (unique index):
 * false means the receipt had already been reversed.
 */
export async function recordReversal(
  em: EntityManager,
  r: { conversationId: string; originatorConversationId: string; transactionId: string; reversalReceipt: string | null; amount: number | null; resultCode: string },
): Promise<boolean> {
  const rows = await exec<{ conversation_id: string }>(
    em,
    `INSERT INTO sandbox_mobilemoney_reversals (conversation_id, originator_conversation_id, transaction_id, reversal_receipt, amount, result_code)
     VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT DO NOTHING
     RETURNING conversation_id`,
    [r.conversationId, r.originatorConversationId, r.transactionId, r.reversalReceipt, r.amount, r.resultCode],
  );
  return rows.length === 1;
}

export interface ReversalRow {
  transaction_id: string;
  reversal_receipt: string | null;
  amount: string | null;
  result_code: string;
  created_at: Date | string;
}

/** Through sandbox_mobilemoney_reversals_originator_idx: asked on every status query about a reversal. */
export const REVERSAL_BY_ORIGINATOR_SQL =
  'SELECT transaction_id, reversal_receipt, amount::text AS amount, result_code, created_at FROM sandbox_mobilemoney_reversals WHERE originator_conversation_id = ? LIMIT 1';

/** A reversal request by the OriginatorConversationID its acknowledgement gave (transaction status by request). */
export async function findReversalByOriginator(em: EntityManager, originatorConversationId: string): Promise<ReversalRow | null> {
  const rows = await exec<ReversalRow>(em, REVERSAL_BY_ORIGINATOR_SQL, [originatorConversationId]);
  return rows[0] ?? null;
}

export async function isReversed(em: EntityManager, receipt: string): Promise<boolean> {
  const rows = await exec<{ one: number }>(em, `SELECT 1 AS one FROM sandbox_mobilemoney_reversals WHERE transaction_id = ? AND result_code = '0'`, [receipt]);
  return rows.length > 0;
}

/** Registers a shortcode for pull; false when it already was. */
export async function registerPull(em: EntityManager, shortcode: string, nominatedNumber: string, callbackUrl: string): Promise<{ created: boolean; refId: string }> {
  const refId = responseRefId();
  const rows = await exec<{ shortcode: string }>(
    em,
    `INSERT INTO sandbox_mobilemoney_pull_registrations (shortcode, nominated_number, callback_url, response_ref_id)
     VALUES (?, ?, ?, ?) ON CONFLICT (shortcode) DO NOTHING RETURNING shortcode`,
    [shortcode, nominatedNumber, callbackUrl, refId],
  );
  return { created: rows.length === 1, refId };
}
