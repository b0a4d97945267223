import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, processLogFiles, startProcess, stopAllProcesses, type ServiceProcess, storeCardpayCredentials } from '../support/processes.js';
import { findSecretsInFiles } from '../support/secret-audit.js';
import { eventually } from '../support/webhook-receiver.js';

// The api process dies after the provider charged but before the answer was committed. The merchant's
// retry (same Idempotency-Key, another process) must finish that payment — with the same provider
// idempotency key, so the provider returns the first charge — and never charge a second time.
// The simulator lives in its own process (with a slow network), so killing the api does not kill it.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let provider: ServiceProcess;
let doomed: ServiceProcess;
let survivor: ServiceProcess;
let apiKey: string;
const secrets: string[] = [];
const CARDPAY_SECRET_KEY = 'sk_test_interrupted_0001';
const LEASE = '9s';

async function createPayment(baseUrl: string, key: string, body: object) {
  const res = await fetch(`${baseUrl}/v1/payments`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey, 'Idempotency-Key': key },
    body: JSON.stringify(body),
  });
  return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: (await res.json()) as { data?: { id: string; status: string }; error?: { code: string } } };
}

beforeAll(async () => {
  db = await createTestDatabase();
  const providerPort = await freePort();
  provider = await startProcess('api', {
    ...baseEnv(db.url, `http://127.0.0.1:${providerPort}`, { SANDBOX_LATENCY_MS: '3000' }),
    PORT: String(providerPort),
  }, { name: 'provider' });
  // Both api processes send cardpay calls to the simulator process; claims expire after LEASE. Like
  // api processes behind one load balancer, they share one public address (provider requests carry it).
  const [doomedPort, survivorPort] = [await freePort(), await freePort()];
  const apiEnv = (port: number) => ({
    ...baseEnv(db.url, `http://127.0.0.1:${survivorPort}`, {
      CARDPAY_BASE_URL: `${provider.url}/sandbox/cardpay`,
      PROVIDER_TIMEOUT_MS: '4000',
      IDEMPOTENCY_LEASE: LEASE,
    }),
    PORT: String(port),
  });
  [doomed, survivor] = await Promise.all([
    startProcess('api', apiEnv(doomedPort), { name: 'doomed' }),
    startProcess('api', apiEnv(survivorPort), { name: 'survivor' }),
  ]);
  ({ apiKey } = await adminMerchant(db.url, 'Interrupted Shop'));
  secrets.push(apiKey, CARDPAY_SECRET_KEY);
  expect(await storeCardpayCredentials(survivor.url!, apiKey, CARDPAY_SECRET_KEY)).toBe(200);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await db?.drop();
}, 60_000);

describe('an api process killed between the provider charge and its commit', () => {
  it('the retry with the same key finishes the payment from the first charge; the provider charged once', async () => {
    const key = `interrupted-${Date.now()}`;
    const body = { provider: 'cardpay', amount: '77.00', currency: 'USD', payment_method: 'pm_card_visa' };
    const first = createPayment(doomed.url!, key, body).catch(() => null);

    // The provider has charged (its intent exists) and its answer is still on the slow network: kill.
    const [payment] = await eventually(async () => {
      const rows = await sql<{ id: string }>(db.url, 'SELECT id FROM payments WHERE idempotency_key = $1', [key]);
      if (rows.length === 0) return null;
      const intents = await sql(db.url, `SELECT 1 FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [rows[0]!.id]);
      return intents.length === 1 ? rows : null;
    }, 10_000, 'the provider charge of the first request');
    await doomed.kill('SIGKILL');
    expect(await first).toBeNull();
    expect(await sql(db.url, 'SELECT status FROM payments WHERE id = $1', [payment!.id])).toEqual([{ status: 'pending' }]);
    expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'provider_call' }]);

    // The merchant retries on the other process: it waits out the dead request's lease and resumes it.
    const retry = await createPayment(survivor.url!, key, body);
    // The first answer the merchant gets (the dead request answered nothing): 201, not a replay, though the
    // provider had charged already and this request only looked the charge up.
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBeNull();
    expect(retry.body.data).toMatchObject({ id: payment!.id, status: 'completed' });

    const intents = await sql<{ id: string; status: string }>(db.url, `SELECT id, status FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [payment!.id]);
    expect(intents).toHaveLength(1);
    expect(intents[0]!.status).toBe('succeeded');
    expect(await sql(db.url, 'SELECT provider_ref FROM payments WHERE id = $1', [payment!.id])).toEqual([{ provider_ref: intents[0]!.id }]);
    expect(await sql(db.url, 'SELECT recovery_point FROM idempotency_keys WHERE key = $1', [key])).toEqual([{ recovery_point: 'finished' }]);

    // And from now on the key simply replays.
    const again = await createPayment(survivor.url!, key, body);
    expect(again.status).toBe(200);
    expect(again.replayed).toBe('true');
    expect(again.body.data!.id).toBe(payment!.id);
    expect(await sql(db.url, `SELECT 1 FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [payment!.id])).toHaveLength(1);
  }, 90_000);

  it('leaves no API key or provider secret in any process log', async () => {
    await stopAllProcesses();
    expect(findSecretsInFiles(processLogFiles(), secrets)).toEqual([]);
  }, 60_000);
});
