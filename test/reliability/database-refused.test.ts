import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { sql } from '../support/database.js';
import { adminMerchant, baseEnv, databaseForProcesses, freePort, startProcess, storeCardpayCredentials, type ServiceProcess } from '../support/processes.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/webhook-receiver.js';
import { WebhookReceiver } from '../delivery/receiver.js';

// PostgreSQL stops (a restart, a failover's gap, the host down): its connections close and new ones are
// refused. knex throws a refused connect at once, not after the pool's acquire timeout, so the request
// was answered 500 INTERNAL_ERROR, though nothing was done: the 503 with Retry-After the README promises
// for a database that cannot serve a request before anything was reserved or sent. The shared server is
// never touched: the api process reaches it through a relay that stops listening.

const db = databaseForProcesses();
let proxy: TcpProxy;
let api: ServiceProcess;
let apiKey: string;

interface Answer {
  status: number;
  retryAfter: string | null;
  outcome: string | null;
  body: { success: boolean; data?: unknown; error?: { code: string } };
}

async function call(method: 'GET' | 'POST' | 'PUT', path: string, headers: Record<string, string> = {}, body?: unknown): Promise<Answer> {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { 'X-API-Key': apiKey, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), outcome: res.headers.get('payments-outcome'), body: (await res.json()) as Answer['body'] };
}

const readyzStatus = () => fetch(`${api.url}/readyz`).then((r) => r.status, () => 0);

beforeAll(async () => {
  const { hostname, port } = new URL(db.url);
  proxy = new TcpProxy({ host: hostname, port: Number(port || 5432) });
  const proxiedUrl = await proxy.start(db.url);
  const apiPort = await freePort();
  api = await startProcess('api', baseEnv(proxiedUrl, `http://127.0.0.1:${apiPort}`, { PORT: String(apiPort) }), { name: 'api' });
  ({ apiKey } = await adminMerchant(db.url, 'Database refused'));
  expect(await storeCardpayCredentials(api.url!, apiKey, 'sk_test_db_refused_0001')).toBe(200);
}, 120_000);

afterAll(async () => {
  await proxy?.stop();
  await receiver?.stop();
});

let receiver: WebhookReceiver;

describe('an api process whose database refuses connections', () => {
  it('answers 503 SERVICE_UNAVAILABLE with Retry-After, and a create retried with its key once the database is back creates one payment', async () => {
    expect((await call('GET', '/v1/payments')).status).toBe(200);

    await proxy.refuse();
    // The process has seen its connections close (readiness asks the pool for a fresh one).
    await eventually(async () => (await readyzStatus()) === 503, 30_000, '/readyz answering 503');

    const list = await call('GET', '/v1/payments');
    expect({ status: list.status, code: list.body.error?.code, retryAfter: list.retryAfter }).toEqual({ status: 503, code: 'SERVICE_UNAVAILABLE', retryAfter: '1' });

    const key = `db-refused-${Date.now()}`;
    const create = () => call('POST', '/v1/payments', { 'Idempotency-Key': key }, { provider: 'cardpay', amount: '21.00', currency: 'USD', payment_method: 'pm_card_visa' });
    const refused = await create();
    // Nothing was done: no unknown outcome to chase.
    expect({ status: refused.status, code: refused.body.error?.code, retryAfter: refused.retryAfter, outcome: refused.outcome }).toEqual({
      status: 503, code: 'SERVICE_UNAVAILABLE', retryAfter: '1', outcome: null,
    });

    await proxy.reopen();
    await eventually(async () => (await readyzStatus()) === 200, 60_000, '/readyz answering 200 again');
    const retried = await create();
    expect(retried.status).toBe(201);
    expect(await sql(db.url, 'SELECT status FROM payments WHERE idempotency_key = $1', [key])).toEqual([{ status: 'completed' }]);
  }, 180_000);

  it('a test event sent to the merchant before the database went away is a 500, never the 503 that says nothing was done', async () => {
    receiver = await new WebhookReceiver().start();
    expect((await call('PUT', '/v1/merchant/webhook', {}, { webhook_url: receiver.url('/held') })).status).toBe(200);
    const release = receiver.holdNext('/held');
    const answer = call('POST', '/v1/webhooks/test');
    await eventually(async () => receiver.on('/held').length === 1 || null, 15_000, 'the test event at the endpoint');

    await proxy.refuse();
    await eventually(async () => (await readyzStatus()) === 503, 30_000, '/readyz answering 503');
    release(200);
    const sent = await answer;
    expect({ status: sent.status, code: sent.body.error?.code, retryAfter: sent.retryAfter }).toEqual({ status: 500, code: 'INTERNAL_ERROR', retryAfter: null });

    await proxy.reopen();
    await eventually(async () => (await readyzStatus()) === 200, 60_000, '/readyz answering 200 again');
  }, 180_000);
});
