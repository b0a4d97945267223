import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, startProcess, stopAllProcesses, storeCardpayCredentials, type ServiceProcess } from '../support/processes.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// A worker's first attempts hang on one LISTEN connection. When that connection dies, new payments'
// webhooks must still go out. The sweeper (and the drain loop's fallback claim, which follows the sweep
// interval) runs once an hour here, so within the test only the worker noticing the dead connection
// and listening again can send them.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let proxy: TcpProxy;
let api: ServiceProcess;
let worker: ServiceProcess;
let receiver: WebhookReceiver;
let merchant: { merchantId: string; apiKey: string };
let created = 0;

const env = (databaseUrl: string, publicUrl: string, extra: Record<string, string> = {}) =>
  baseEnv(databaseUrl, publicUrl, { DELIVERY_SWEEP_INTERVAL: '1h', ...extra });

async function createPayment(): Promise<void> {
  const n = ++created;
  const res = await fetch(`${api.url}/v1/payments`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': merchant.apiKey, 'Idempotency-Key': `listener-loss-${n}` },
    body: JSON.stringify({ provider: 'cardpay', amount: `${n}.00`, currency: 'USD', payment_method: 'pm_card_visa' }),
  });
  await res.arrayBuffer();
  expect(res.status).toBe(201);
}

/** Waits until the merchant has `expected` deliveries, all delivered, each received once. */
async function allDeliveredOnce(expected: number): Promise<void> {
  const rows = await eventually(async () => {
    const r = await sql<{ id: string; status: string }>(db.url, 'SELECT id, status FROM webhook_deliveries WHERE merchant_id = $1', [merchant.merchantId]);
    return r.length === expected && r.every((d) => d.status === 'delivered') ? r : null;
  }, 60_000, `${expected} deliveries delivered`);
  const ids = receiver.received.map((req) => String(req.headers['x-webhook-id']));
  expect(rows.map((r) => ids.filter((id) => id === r.id).length)).toEqual(rows.map(() => 1));
}

/** The worker's LISTEN connection(s) for due deliveries, as PostgreSQL sees them. */
const listeners = () =>
  sql<{ pid: number; client_port: number }>(
    db.url,
    'SELECT pid, client_port FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1',
    [`payments-deliveries-listener:${worker.pid}`],
  );

beforeAll(async () => {
  db = await createTestDatabase();
  const { hostname, port: dbPort } = new URL(db.url);
  proxy = new TcpProxy({ host: hostname, port: Number(dbPort || 5432) });
  const proxiedUrl = await proxy.start(db.url);
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  api = await startProcess('api', env(db.url, publicUrl, { PORT: String(port) }), { name: 'api' });
  // Only the worker reaches the database through the relay.
  worker = await startProcess('worker', env(proxiedUrl, publicUrl), { name: 'worker' });
  receiver = await new WebhookReceiver().start();
  merchant = await adminMerchant(db.url, 'Listener loss');
  const hook = await fetch(`${api.url}/v1/merchant/webhook`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': merchant.apiKey },
    body: JSON.stringify({ webhook_url: receiver.url }),
  });
  expect(hook.status).toBe(200);
  expect(await storeCardpayCredentials(api.url!, merchant.apiKey, 'sk_test_listener_loss_01')).toBe(200);
  await createPayment();
  await allDeliveredOnce(1);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await receiver?.stop();
  await proxy?.stop();
  await db?.drop();
}, 60_000);

describe('a worker whose listening connection dies', () => {
  it('still sends a new payment\'s webhook when the connection went silent (no error, no close)', async () => {
    const [before] = await listeners();
    expect(before).toBeDefined();
    expect(proxy.silence(before!.client_port)).toBe(true);

    await createPayment();
    await allDeliveredOnce(2);
    // It says why it left the old connection, and listens on a new one.
    expect(readFileSync(worker.logFile, 'utf8')).toContain('heartbeat unanswered; reconnecting');
    await eventually(async () => (await listeners()).some((l) => l.pid !== before!.pid), 20_000, 'a new listening connection');
  }, 90_000);

  it('still sends a new payment\'s webhook when the database ends the connection', async () => {
    const ended = await listeners();
    expect(ended.length).toBeGreaterThan(0);
    await sql(db.url, 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`payments-deliveries-listener:${worker.pid}`]);

    await createPayment();
    await allDeliveredOnce(3);
    await eventually(async () => (await listeners()).some((l) => !ended.some((e) => e.pid === l.pid)), 20_000, 'a new listening connection');
  }, 90_000);
});
