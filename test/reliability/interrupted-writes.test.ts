import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, processLogFiles, startProcess, stopAllProcesses, type ServiceProcess, storeCardpayCredentials } from '../support/processes.js';
import { findSecretsInFiles } from '../support/secret-audit.js';
import { eventually } from '../support/webhook-receiver.js';

// Like interrupted-creation.test.ts, for the other writes that take an Idempotency-Key: a refund, a
// capture and a card save. The api process dies after the provider acted but before its answer was
// committed; the merchant's retry (same key, another process) waits out the dead request's lease,
// resumes it with the same provider idempotency keys, and gets the right answer — and the provider
// acted exactly once (counted in the simulator's own tables). Each api process is a new one per case.
// The cases share nothing but the survivor and the simulator process (each its own payment, key and
// provider rows), and mostly wait (a 3 s network, a 9 s lease): they run side by side.
// The simulators live in their own process with a slow network, so killing an api does not kill them.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let provider: ServiceProcess;
let survivor: ServiceProcess;
let apiEnv: Record<string, string>;
let apiKey: string;
const secrets: string[] = [];
const CARDPAY_SECRET_KEY = 'sk_test_interrupted_writes_0001';
const WALLETPAY_SECRET = 'interrupted-writes-wallet-secret';
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now()}-${++n}`;

interface Answer {
  status: number;
  replayed: string | null;
  body: { data?: Record<string, unknown> & { id: string; status?: string }; error?: { code: string; message: string } };
}

async function post(baseUrl: string, path: string, body: object, idempotencyKey?: string): Promise<Answer> {
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey, ...(idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: (await res.json()) as Answer['body'] };
}

/**
 * Sends `path` with `key` to a fresh api process, kills it (SIGKILL) once `providerActed` sees the
 * provider's side effect (its answer is still on the slow network), and checks nothing was committed.
 */
async function killAfterProviderActs(path: string, body: object, key: string, providerActed: () => Promise<boolean>): Promise<void> {
  const doomed = await startProcess('api', { ...apiEnv, PORT: String(await freePort()) }, { name: `doomed-${n}` });
  const first = post(doomed.url!, path, body, key).catch(() => null);
  await eventually(providerActed, 15_000, `the provider's side of ${path}`);
  await doomed.kill('SIGKILL');
  expect(await first).toBeNull();
  expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'provider_call' }]);
}

async function newPayment(providerName: 'cardpay' | 'walletpay', amount: string): Promise<{ id: string; providerRef: string; approvalUrl?: string }> {
  const body = providerName === 'cardpay'
    ? { provider: 'cardpay', amount, currency: 'USD', payment_method: 'pm_card_visa' }
    : { provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' };
  const created = await post(survivor.url!, '/v1/payments', body, unique('pay'));
  expect(created.status).toBe(201);
  const data = created.body.data as { id: string; status: string; provider_ref: string; next_action?: { url: string } };
  return { id: data.id, providerRef: data.provider_ref, approvalUrl: data.next_action?.url };
}

beforeAll(async () => {
  db = await createTestDatabase();
  const providerPort = await freePort();
  provider = await startProcess('api', {
    ...baseEnv(db.url, `http://127.0.0.1:${providerPort}`, { SANDBOX_LATENCY_MS: '3000' }),
    PORT: String(providerPort),
  }, { name: 'provider' });
  const survivorPort = await freePort();
  // Every api process sends provider calls to the simulator process; claims expire after 9 s. Like api
  // processes behind one load balancer, they share one public address (provider requests carry it).
  apiEnv = baseEnv(db.url, `http://127.0.0.1:${survivorPort}`, {
    CARDPAY_BASE_URL: `${provider.url}/sandbox/cardpay`,
    WALLETPAY_BASE_URL: `${provider.url}/sandbox/walletpay`,
    PROVIDER_TIMEOUT_MS: '4000',
    IDEMPOTENCY_LEASE: '9s',
  });
  survivor = await startProcess('api', { ...apiEnv, PORT: String(survivorPort) }, { name: 'survivor' });
  ({ apiKey } = await adminMerchant(db.url, 'Interrupted Writes Shop'));
  secrets.push(apiKey, CARDPAY_SECRET_KEY, WALLETPAY_SECRET);
  expect(await storeCardpayCredentials(survivor.url!, apiKey, CARDPAY_SECRET_KEY)).toBe(200);
  const wallet = await fetch(`${survivor.url}/v1/merchant/credentials`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
    body: JSON.stringify({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'interrupted-writes-client', client_secret: WALLETPAY_SECRET } }),
  });
  expect(wallet.status).toBe(200);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await db?.drop();
}, 60_000);

describe('an api process killed between the provider acting and the commit of its answer', () => {
  it.concurrent('POST /v1/refunds: the retry finishes the refund; the provider refunded once', async () => {
    const payment = await newPayment('cardpay', '60.00');
    const key = unique('refund');
    const body = { payment_id: payment.id, amount: '25.00' };
    const providerRefunds = () => sql<{ id: string; amount: string; metadata: { refund_id: string } }>(db.url, 'SELECT id, amount::text, metadata FROM sandbox_cardpay_refunds WHERE payment_intent = $1', [payment.providerRef]);

    await killAfterProviderActs('/v1/refunds', body, key, async () => (await providerRefunds()).length > 0);
    const [reserved] = await sql<{ id: string; status: string }>(db.url, 'SELECT id, status FROM refunds WHERE payment_id = $1', [payment.id]);

    const retry = await post(survivor.url!, '/v1/refunds', body, key);
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBeNull(); // the dead request answered nothing: a first answer
    expect(retry.body.data).toMatchObject({ id: reserved!.id, payment_id: payment.id, amount: '25.00', status: 'completed' });

    const refunds = await providerRefunds();
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({ amount: '2500', metadata: { refund_id: reserved!.id } });
    expect(await sql(db.url, 'SELECT status, provider_ref FROM refunds WHERE payment_id = $1', [payment.id])).toEqual([{ status: 'completed', provider_ref: refunds[0]!.id }]);
    expect(await sql(db.url, 'SELECT amount_refunded_minor::text AS refunded FROM payments WHERE id = $1', [payment.id])).toEqual([{ refunded: '2500' }]);
    expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'finished' }]);

    // From now on the key replays that refund, and the provider is not asked again.
    const again = await post(survivor.url!, '/v1/refunds', body, key);
    expect(again.status).toBe(201);
    expect(again.body.data).toEqual(retry.body.data);
    expect(await providerRefunds()).toHaveLength(1);
  }, 120_000);

  it.concurrent('POST /v1/refunds: a retry after the provider forgot the idempotency key finds the refund instead of making a second', async () => {
    const payment = await newPayment('cardpay', '60.00');
    const key = unique('refund-forgotten');
    const body = { payment_id: payment.id, amount: '20.00' };
    const providerRefunds = () => sql<{ id: string; amount: string }>(db.url, 'SELECT id, amount::text FROM sandbox_cardpay_refunds WHERE payment_intent = $1', [payment.providerRef]);

    await killAfterProviderActs('/v1/refunds', body, key, async () => (await providerRefunds()).length > 0);
    const [reserved] = await sql<{ id: string }>(db.url, 'SELECT id FROM refunds WHERE payment_id = $1', [payment.id]);
    // Stripe keeps an idempotency key 24 h and PayPal a request id 6 h; the merchant's key here lives 24 h.
    await sql(db.url, 'DELETE FROM sandbox_cardpay_idempotency WHERE idempotency_key = $1', [`refund-${reserved!.id}`]);

    const retry = await post(survivor.url!, '/v1/refunds', body, key);
    expect(retry.status).toBe(201);
    expect(retry.body.data).toMatchObject({ id: reserved!.id, amount: '20.00', status: 'completed' });
    const refunds = await providerRefunds();
    expect(refunds.map((r) => r.amount)).toEqual(['2000']);
    expect(await sql(db.url, 'SELECT status, provider_ref FROM refunds WHERE payment_id = $1', [payment.id])).toEqual([{ status: 'completed', provider_ref: refunds[0]!.id }]);
    expect(await sql(db.url, 'SELECT amount_refunded_minor::text AS refunded FROM payments WHERE id = $1', [payment.id])).toEqual([{ refunded: '2000' }]);
  }, 120_000);

  it.concurrent('POST /v1/refunds: a resumed refund sends the first request again, even after another refund took the rest', async () => {
    const payment = await newPayment('cardpay', '60.00');
    const key = unique('refund-then-rest');
    const body = { payment_id: payment.id, amount: '35.00' };
    const providerRefunds = () => sql<{ amount: string }>(db.url, 'SELECT amount::text FROM sandbox_cardpay_refunds WHERE payment_intent = $1 ORDER BY created', [payment.providerRef]);

    await killAfterProviderActs('/v1/refunds', body, key, async () => (await providerRefunds()).length > 0);
    // Meanwhile the merchant refunds the other 25.00 (no key): the interrupted 35.00 is now "what remains".
    const rest = await post(survivor.url!, '/v1/refunds', { payment_id: payment.id, amount: '25.00' });
    expect(rest.status).toBe(201);
    expect(rest.body.data!.status).toBe('completed');

    // The retry must repeat the very request the provider saw (same key, same parameters), or the
    // provider refuses it as a different request while it did refund the 35.00.
    const retry = await post(survivor.url!, '/v1/refunds', body, key);
    expect(retry.status).toBe(201);
    expect(retry.body.data).toMatchObject({ amount: '35.00', status: 'completed' });
    expect(await providerRefunds()).toEqual([{ amount: '3500' }, { amount: '2500' }]);
    expect(await sql(db.url, 'SELECT status, amount_refunded_minor::text AS refunded FROM payments WHERE id = $1', [payment.id])).toEqual([{ status: 'refunded', refunded: '6000' }]);
  }, 120_000);

  it.concurrent('POST /v1/payments/{id}/capture: the retry finishes the capture; the provider captured once', async () => {
    const payment = await newPayment('walletpay', '45.00');
    const approved = await fetch(`${payment.approvalUrl}${payment.approvalUrl!.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
    await approved.arrayBuffer();
    const key = unique('capture');
    const path = `/v1/payments/${payment.id}/capture`;
    const providerCaptures = () => sql<{ id: string; amount_minor: string; status: string }>(db.url, 'SELECT id, amount_minor::text, status FROM sandbox_walletpay_captures WHERE order_id = $1', [payment.providerRef]);

    await killAfterProviderActs(path, {}, key, async () => (await providerCaptures()).length > 0);

    const retry = await post(survivor.url!, path, {}, key);
    expect(retry.status).toBe(200);
    expect(retry.replayed).toBeNull(); // the dead request answered nothing: a first answer
    expect(retry.body.data).toMatchObject({ id: payment.id, status: 'completed', provider_ref: payment.providerRef, amount: '45.00', currency: 'USD', provider: 'walletpay' });

    expect(await providerCaptures()).toEqual([{ id: expect.any(String), amount_minor: '4500', status: 'COMPLETED' }]);
    expect(await sql(db.url, 'SELECT status FROM payments WHERE id = $1', [payment.id])).toEqual([{ status: 'completed' }]);
    expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'finished' }]);

    const again = await post(survivor.url!, path, {}, key);
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual(retry.body.data);
    expect(await providerCaptures()).toHaveLength(1);
  }, 120_000);

  it.concurrent('POST /v1/payments/cards: the retry saves the card; the provider has one customer with the card attached once', async () => {
    const key = unique('card');
    const email = `${key}@example.com`;
    const body = { payment_method_id: 'pm_card_visa', customer_email: email };
    const providerCards = () => sql<{ customer: string; pm: string | null }>(db.url,
      `SELECT c.id AS customer, pm.id AS pm FROM sandbox_cardpay_customers c
         LEFT JOIN sandbox_cardpay_payment_methods pm ON pm.customer = c.id AND NOT pm.detached
        WHERE c.email = $1`, [email]);

    // Killed after the second provider call (attaching the card to the new customer) was done.
    await killAfterProviderActs('/v1/payments/cards', body, key, async () => (await providerCards()).some((r) => r.pm !== null));
    const [claim] = await sql<{ resource_id: string }>(db.url, 'SELECT resource_id FROM idempotency_keys WHERE key = $1', [key]);
    expect(await sql(db.url, 'SELECT 1 FROM saved_cards WHERE id = $1', [claim!.resource_id])).toEqual([]);

    const retry = await post(survivor.url!, '/v1/payments/cards', body, key);
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBeNull(); // the dead request answered nothing: a first answer
    expect(retry.body.data).toMatchObject({ id: claim!.resource_id, brand: 'visa', last4: '4242' });

    const atProvider = await providerCards();
    expect(atProvider).toHaveLength(1);
    expect(atProvider[0]!.pm).not.toBeNull();
    expect(await sql(db.url, 'SELECT customer_ref, payment_method_token FROM saved_cards WHERE merchant_id = (SELECT merchant_id FROM idempotency_keys WHERE key = $1)', [key]))
      .toEqual([{ customer_ref: atProvider[0]!.customer, payment_method_token: atProvider[0]!.pm }]);
    expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'finished' }]);

    const again = await post(survivor.url!, '/v1/payments/cards', body, key);
    expect(again.status).toBe(201);
    expect(again.body.data).toEqual(retry.body.data);
    expect(await providerCards()).toHaveLength(1);
  }, 120_000);

  it('leaves no API key or provider secret in any process log', async () => {
    await stopAllProcesses();
    expect(findSecretsInFiles(processLogFiles(), secrets)).toEqual([]);
  }, 60_000);
});
