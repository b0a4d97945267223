import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ERROR_MESSAGES } from '../../contract/errors.js';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, callApi, freePort, processLogFiles, startProcess, stopAllProcesses, type ServiceProcess } from '../support/processes.js';
import { findSecretsInFiles } from '../support/secret-audit.js';
import { eventually } from '../support/webhook-receiver.js';

// The provider charged (or refunded), and then the api process had no database connection to record its
// answer: that is not the 503 "overloaded, nothing was done" a capacity error is before anything was sent
// (slow-provider.test.ts) — a merchant taking it at its word would retry with a new key, or cancel the
// order, with the customer charged. It is 500 with Payments-Outcome: unknown, the payment or refund stays
// pending, and the retry with the same key settles it while the provider acted once (counted in the
// simulator's own tables): a creation or refund found at the provider by our id, a capture sent again
// with the same PayPal-Request-Id, which the simulator answers with the first capture.
//
// The simulator runs in its own process and answers after 3 s (it has acted already); meanwhile the api
// process's two pooled connections are taken by two other creates waiting on a lock, so the write of the
// answer finds no connection within DATABASE_ACQUIRE_TIMEOUT.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let provider: ServiceProcess;
let api: ServiceProcess;
let apiKey: string;
const secrets: string[] = [];
const CARDPAY_SECRET_KEY = 'sk_test_outcome_not_recorded_0001';
const WALLETPAY_SECRET = 'outcome-not-recorded-wallet-secret';
const POOL_MAX = 2;
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now()}-${++n}`;
const card = { provider: 'cardpay', amount: '40.00', currency: 'USD', payment_method: 'pm_card_visa' };

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, any>;
}

const post = (path: string, body: object, key: string): Promise<Answer> => callApi(api.url!, 'POST', path, apiKey, body, { 'Idempotency-Key': key });

/** The retry a merchant sends with the same key: the first request's lease may still hold it (409 with Retry-After), then it resumes. */
async function retry(path: string, body: object, key: string): Promise<Answer> {
  const deadline = Date.now() + 40_000;
  for (;;) {
    const answer = await post(path, body, key);
    if (!(answer.status === 409 && answer.headers['retry-after']) || Date.now() > deadline) return answer;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * Takes the api process's pooled connections: the idempotency table is locked, and two creates with keys
 * of their own wait inside their claim, each holding one. Returns what gives them back (and their answers).
 */
async function holdTheApiPool(): Promise<() => Promise<Answer[]>> {
  const holder = new pg.Client({ connectionString: db.url });
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query('LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE');
  const blocked = Array.from({ length: POOL_MAX }, () => post('/v1/payments', card, unique('blocker')));
  await eventually(
    async () => (await holder.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0]!.n >= POOL_MAX,
    2_000,
    'the api connections waiting on the lock',
  );
  return async () => {
    await holder.query('ROLLBACK');
    await holder.end();
    return Promise.all(blocked);
  };
}

function expectOutcomeUnknown(answer: Answer): void {
  expect({ status: answer.status, outcome: answer.headers['payments-outcome'] ?? null, code: answer.body.error?.code, message: answer.body.error?.message }).toEqual({
    status: 500,
    outcome: 'unknown',
    code: 'INTERNAL_ERROR',
    message: ERROR_MESSAGES.outcomeNotRecorded,
  });
}

const intentsOf = (paymentId: string) =>
  sql<{ id: string; status: string }>(db.url, `SELECT id, status FROM sandbox_cardpay_intents WHERE metadata ->> 'payment_id' = $1`, [paymentId]);

beforeAll(async () => {
  db = await createTestDatabase();
  const providerPort = await freePort();
  provider = await startProcess('api', {
    ...baseEnv(db.url, `http://127.0.0.1:${providerPort}`, { SANDBOX_LATENCY_MS: '3000' }),
    PORT: String(providerPort),
  }, { name: 'slow-provider' });
  const apiPort = await freePort();
  api = await startProcess('api', {
    ...baseEnv(db.url, `http://127.0.0.1:${apiPort}`, {
      CARDPAY_BASE_URL: `${provider.url}/sandbox/cardpay`,
      WALLETPAY_BASE_URL: `${provider.url}/sandbox/walletpay`,
      DATABASE_POOL_MAX: String(POOL_MAX),
      DATABASE_ACQUIRE_TIMEOUT: '300ms',
      PROVIDER_TIMEOUT_MS: '4000',
      IDEMPOTENCY_LEASE: '9s',
    }),
    PORT: String(apiPort),
  }, { name: 'tiny-pool-api' });
  ({ apiKey } = await adminMerchant(db.url, 'Unrecorded Outcome Shop'));
  secrets.push(apiKey, CARDPAY_SECRET_KEY, WALLETPAY_SECRET);
  // With a webhook secret (a webhook id) of their own no endpoint is registered: no event settles anything, only the requests do.
  const stored = await callApi(api.url!, 'PUT', '/v1/merchant/credentials', apiKey, { provider: 'cardpay', cardpay: { secret_key: CARDPAY_SECRET_KEY, webhook_secret: 'whsec_outcome_not_recorded' } });
  expect(stored.status).toBe(200);
  const wallet = await callApi(api.url!, 'PUT', '/v1/merchant/credentials', apiKey, {
    provider: 'walletpay',
    walletpay: { env: 'sandbox', client_id: 'outcome-not-recorded-client', client_secret: WALLETPAY_SECRET, webhook_id: 'WH-OUTCOME-NOT-RECORDED' },
  });
  expect(wallet.status).toBe(200);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await db?.drop();
}, 60_000);

describe('the provider acted, then no database connection was free to record its answer', () => {
  it('POST /v1/payments: 500 with Payments-Outcome: unknown (not 503), the payment pending; the retry with the key completes it, charged once', async () => {
    const key = unique('pay');
    const first = post('/v1/payments', card, key);
    const [reserved] = await eventually(() => sql<{ id: string }>(db.url, 'SELECT id FROM payments WHERE idempotency_key = $1', [key]).then((rows) => (rows.length ? rows : null)), 10_000, 'the reserved payment');
    await eventually(async () => (await intentsOf(reserved!.id)).length > 0, 10_000, 'the charge at the simulator');
    const giveBack = await holdTheApiPool();
    const answer = await first;
    expectOutcomeUnknown(answer);
    expect(await sql(db.url, 'SELECT status, provider_ref FROM payments WHERE id = $1', [reserved!.id])).toEqual([{ status: 'pending', provider_ref: null }]);
    const blockers = await giveBack();
    const [charge] = await intentsOf(reserved!.id);
    expect(charge!.status).toBe('succeeded');
    // The creates that held the connections did nothing wrong: answered once the pool was theirs again.
    expect(blockers.map((b) => b.status)).toEqual(blockers.map(() => 201));

    const again = await retry('/v1/payments', card, key);
    // The key was released, not answered: the resumed request's answer is a first one (201), not a replay.
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.data).toMatchObject({ id: reserved!.id, status: 'completed', provider_ref: charge!.id });
    // One charge at the provider, made with the key derived from the payment.
    expect(await intentsOf(reserved!.id)).toEqual([{ id: charge!.id, status: 'succeeded' }]);
    expect(await sql(db.url, 'SELECT count(*)::int AS n FROM sandbox_cardpay_idempotency WHERE idempotency_key = $1', [`payment-${reserved!.id}`])).toEqual([{ n: 1 }]);
    expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'finished' }]);
  }, 90_000);

  it('POST /v1/refunds: 500 with Payments-Outcome: unknown (not 503), the refund pending; the retry with the key completes it, refunded once', async () => {
    const paid = await post('/v1/payments', card, unique('paid'));
    expect(paid.status).toBe(201);
    const payment = paid.body.data as { id: string; provider_ref: string };
    const refundsAt = () => sql<{ id: string; amount: string }>(db.url, 'SELECT id, amount::text FROM sandbox_cardpay_refunds WHERE payment_intent = $1', [payment.provider_ref]);
    const key = unique('refund');
    const body = { payment_id: payment.id, amount: '15.00' };

    const first = post('/v1/refunds', body, key);
    await eventually(async () => (await refundsAt()).length > 0, 10_000, 'the refund at the simulator');
    const giveBack = await holdTheApiPool();
    const answer = await first;
    expectOutcomeUnknown(answer);
    const [reserved] = await sql<{ id: string; status: string; provider_ref: string | null }>(db.url, 'SELECT id, status, provider_ref FROM refunds WHERE payment_id = $1', [payment.id]);
    expect(reserved).toMatchObject({ status: 'pending', provider_ref: null });
    const blockers = await giveBack();
    expect(blockers.map((b) => b.status)).toEqual(blockers.map(() => 201));

    const again = await retry('/v1/refunds', body, key);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    const refunds = await refundsAt();
    expect(refunds).toEqual([{ id: refunds[0]!.id, amount: '1500' }]);
    expect(again.body.data).toMatchObject({ id: reserved!.id, status: 'completed', amount: '15.00' });
    expect(await sql(db.url, 'SELECT status, provider_ref FROM refunds WHERE payment_id = $1', [payment.id])).toEqual([{ status: 'completed', provider_ref: refunds[0]!.id }]);
    expect(await sql(db.url, 'SELECT amount_refunded_minor::text AS refunded FROM payments WHERE id = $1', [payment.id])).toEqual([{ refunded: '1500' }]);
  }, 90_000);

  it('POST /v1/payments/{id}/capture: 500 with Payments-Outcome: unknown (not 503), the payment pending; the retry with the key sends the capture again with its PayPal-Request-Id, captured once', async () => {
    const created = await post('/v1/payments', { provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' }, unique('order'));
    expect(created.status).toBe(201);
    const payment = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
    const approved = await fetch(`${payment.next_action.url}${payment.next_action.url.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
    await approved.arrayBuffer();
    const capturesAt = () => sql<{ id: string; amount_minor: string; status: string }>(db.url, 'SELECT id, amount_minor::text, status FROM sandbox_walletpay_captures WHERE order_id = $1', [payment.provider_ref]);
    const key = unique('capture');
    const path = `/v1/payments/${payment.id}/capture`;

    const first = post(path, {}, key);
    await eventually(async () => (await capturesAt()).length > 0, 10_000, 'the capture at the simulator');
    const giveBack = await holdTheApiPool();
    const answer = await first;
    expectOutcomeUnknown(answer);
    expect(await sql(db.url, 'SELECT status FROM payments WHERE id = $1', [payment.id])).toEqual([{ status: 'pending' }]);
    const blockers = await giveBack();
    expect(blockers.map((b) => b.status)).toEqual(blockers.map(() => 201));

    const again = await retry(path, {}, key);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.data).toMatchObject({ id: payment.id, status: 'completed', provider_ref: payment.provider_ref, amount: '45.00' });
    expect(await capturesAt()).toEqual([{ id: expect.any(String), amount_minor: '4500', status: 'COMPLETED' }]);
    expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'finished' }]);
  }, 90_000);

  it('leaves no API key or provider secret in any process log', async () => {
    await stopAllProcesses();
    expect(findSecretsInFiles(processLogFiles(), secrets)).toEqual([]);
  });
});
