import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminMerchant, baseEnv, callApi, databaseForProcesses, freePort, startProcess, type ServiceProcess } from '../support/processes.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * An api and a worker as separate processes (compose's two containers) with SANDBOX=true and no
 * PUBLIC_BASE_URL. The worker serves only WORKER_PORT, and PUBLIC_BASE_URL's default names the api's port
 * on localhost, where nothing of the worker listens (here PORT is 0 for the worker, as in its own
 * container): its provider calls — status and refund syncs, reconciliation — must reach simulators it
 * can reach, its own on WORKER_PORT, or every one of them fails as `unavailable`.
 */
const db = databaseForProcesses();
let api: ServiceProcess;
let client: pg.Client;

/** The processes' environment: baseEnv's, without PUBLIC_BASE_URL. */
function env(extra: Record<string, string>): Record<string, string> {
  const { PUBLIC_BASE_URL: _unset, ...rest } = baseEnv(db.url, 'unused', {
    // The first status check one second after creation (then every second), not a minute.
    STATUS_SYNC_SCHEDULE: '1s,1s,1s,1s,1s,1s,1s,1s,1s,1s',
    ...extra,
  });
  return rest;
}

beforeAll(async () => {
  api = await startProcess('api', env({ PORT: String(await freePort()) }), { name: 'api' });
  await startProcess('worker', env({}), { name: 'worker' });
  client = new pg.Client({ connectionString: db.url });
  // The database is dropped after the tests (databaseForProcesses), which may end this connection first.
  client.on('error', () => undefined);
  await client.connect();
}, 120_000);
afterAll(async () => {
  await client?.end().catch(() => undefined);
}, 10_000);

const control = async (path: string, body: unknown) => {
  const res = await fetch(`${api.url}/sandbox/cardpay/_control/${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
};

describe('a worker with SANDBOX on and PUBLIC_BASE_URL unset', () => {
  it("settles a payment whose creation answer was lost by its own status sync, calling the simulators it serves", async () => {
    const merchant = await adminMerchant(db.url, 'Worker Synced Shop');
    // A webhook secret of its own: no endpoint is registered at the simulator, so no event settles the payment; only the sync can.
    const stored = await callApi(api.url!, 'PUT', '/v1/merchant/credentials', merchant.apiKey,
      { provider: 'cardpay', cardpay: { secret_key: `sk_test_${randomUUID().replace(/-/g, '')}`, webhook_secret: 'whsec_worker_sync_not_registered' } });
    expect(stored.status).toBe(200);

    // The provider charges the card; its answer never arrives (a second loss armed in case).
    await control('lose-answers', { count: 2 });
    const created = await callApi(api.url!, 'POST', '/v1/payments', merchant.apiKey,
      { provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': randomUUID() });
    await control('lose-answers', { count: 0 });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = created.body.data.id as string;

    // Only the worker runs the status sync (an api process defines no jobs).
    const status = async () => (await client.query<{ status: string }>('SELECT status FROM payments WHERE id = $1', [id])).rows[0]!.status;
    await eventually(async () => (await status()) === 'completed', 30_000, "the worker's status sync to complete the payment");
    const [intent] = (await client.query<{ id: string }>(`SELECT id FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [id])).rows;
    const payment = await callApi(api.url!, 'GET', `/v1/payments/${id}`, merchant.apiKey);
    expect(payment.body.data).toMatchObject({ status: 'completed', provider_ref: intent!.id });
    const transitions = (await client.query<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed'`, [id])).rows;
    expect(transitions).toEqual([{ trigger: expect.stringMatching(/sync/) }]);
  }, 90_000);

  it("shares one mobilemoney token with the api: the worker's status sync does not revoke the api's token (the operator revokes a consumer key's previous token on each issue)", async () => {
    const merchant = await adminMerchant(db.url, 'Worker Token Shop');
    const consumerKey = `ck-worker-token-${randomUUID()}`;
    const stored = await callApi(api.url!, 'PUT', '/v1/merchant/credentials', merchant.apiKey, { provider: 'mobilemoney', mobilemoney: {
      env: 'sandbox', consumer_key: consumerKey, consumer_secret: 'cs-worker-token-secret', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' } });
    expect(stored.status).toBe(200);
    const push = (phone: string) => callApi(api.url!, 'POST', '/v1/payments', merchant.apiKey,
      { provider: 'mobilemoney', amount: '100', currency: 'KES', phone }, { 'Idempotency-Key': randomUUID() });

    // 254700000003's push completes with no callback ever sent: only the worker's status sync (an STK query to the operator) settles it.
    const first = await push('254700000003');
    expect(first.status).toBe(201);
    const id = first.body.data.id as string;
    const queried = async () => (await client.query<{ query_count: number }>(
      `SELECT s.query_count FROM sandbox_mobilemoney_stk_requests s JOIN payments p ON p.provider_ref = s.checkout_request_id OR p.provider_ref = s.receipt_number WHERE p.id = $1`, [id])).rows[0]?.query_count ?? 0;
    await eventually(async () => (await queried()) > 0, 30_000, "the worker's status sync to query the operator");
    await eventually(async () => (await client.query<{ status: string }>('SELECT status FROM payments WHERE id = $1', [id])).rows[0]!.status === 'completed', 30_000, 'the synced payment completed');

    // A second push through the api, with the token the api holds.
    const second = await push('254708374149');
    expect(second.status).toBe(201);

    const tokens = (await client.query<{ revoked: boolean }>('SELECT revoked_at IS NOT NULL AS revoked FROM sandbox_mobilemoney_tokens WHERE consumer_key = $1', [consumerKey])).rows;
    expect(tokens).toEqual([{ revoked: false }]);
    const cached = (await client.query<{ n: number }>('SELECT count(*)::int AS n FROM mobilemoney_tokens')).rows[0]!.n;
    expect(cached).toBe(1);
  }, 90_000);
});
