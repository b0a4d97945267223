import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, startProcess, stopAllProcesses, storeCardpayCredentials, type ServiceProcess } from '../support/processes.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/webhook-receiver.js';

// The database host disappears without a trace (a hard failover, the old primary gone without a reset):
// every connection the api process holds goes silent, neither closed nor answered. An orchestrator asks
// /readyz whether to keep sending traffic there; it must get an answer, not a request that hangs.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let proxy: TcpProxy;
let api: ServiceProcess;
let merchant: { merchantId: string; apiKey: string };
let created = 0;

/** POST /v1/payments; null when no answer came within `waitMs` (the client gives up, as a merchant's would). */
async function createPayment(waitMs: number): Promise<number | null> {
  const n = ++created;
  try {
    const res = await fetch(`${api.url}/v1/payments`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': merchant.apiKey, 'Idempotency-Key': `blackhole-${n}` },
      body: JSON.stringify({ provider: 'cardpay', amount: `${n}.00`, currency: 'USD', payment_method: 'pm_card_visa' }),
      signal: AbortSignal.timeout(waitMs),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return null;
  }
}

/** GET /readyz: its status and checks, or null when no answer came within `waitMs`. */
async function readiness(waitMs: number): Promise<{ status: number; checks: Record<string, boolean> } | null> {
  try {
    const res = await fetch(`${api.url}/readyz`, { signal: AbortSignal.timeout(waitMs) });
    const body = (await res.json()) as { data: { checks: Record<string, boolean> } };
    return { status: res.status, checks: body.data.checks };
  } catch {
    return null;
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  const { hostname, port } = new URL(db.url);
  proxy = new TcpProxy({ host: hostname, port: Number(port || 5432) });
  const proxiedUrl = await proxy.start(db.url);
  const apiPort = await freePort();
  api = await startProcess('api', baseEnv(proxiedUrl, `http://127.0.0.1:${apiPort}`, { PORT: String(apiPort) }), { name: 'api' });
  merchant = await adminMerchant(db.url, 'Database black hole');
  expect(await storeCardpayCredentials(api.url!, merchant.apiKey, 'sk_test_blackhole_0001')).toBe(200);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses(2_000);
  await proxy?.stop();
  await db?.drop();
}, 60_000);

describe('an api process whose database host vanished', () => {
  it('answers /readyz with 503 while the database is silent, and serves payments again once it is back', async () => {
    // Warm: the pools hold connections, all about to die silently.
    expect(await createPayment(30_000)).toBe(201);
    expect((await readiness(10_000))?.status).toBe(200);

    proxy.blackHole();
    // Every probe is answered (not left hanging), and says the database is the reason. Several in a
    // row: a probe that gave up must not leave the pool short of connections for the next.
    for (let probe = 0; probe < 3; probe++) {
      expect(await readiness(20_000)).toEqual({ status: 503, checks: { database: false, job_runner: false } });
    }

    proxy.restore();
    await eventually(async () => (await readiness(20_000))?.status === 200, 60_000, '/readyz answering 200 again');
    await eventually(async () => (await createPayment(10_000)) === 201, 60_000, 'a payment created after the database came back');
  }, 240_000);
});
