import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { sampleConnections } from '../support/connection-sampler.js';
import { createTestDatabase } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, processLogFiles, startProcess, stopAllProcesses, type ServiceProcess, storeCardpayCredentials } from '../support/processes.js';
import { findSecretsInFiles } from '../support/secret-audit.js';

// A provider that takes 2 s to answer must not turn into 409s or pool exhaustion: the idempotency
// claim is a lease, so no connection is held while the provider is called. And when the database
// really has no connection to give before anything was sent, the answer is 503 with Retry-After, never
// 409 (after the provider acted it is 500 with Payments-Outcome: unknown: outcome-not-recorded.test.ts).

let db: Awaited<ReturnType<typeof createTestDatabase>>;
const secrets: string[] = [];
const CARDPAY_SECRET_KEY = 'sk_test_slow_provider_0001';
const POOL_MAX = 6;
/**
 * What one api process may open: its ORM pool, Agenda's (min(8, POOL_MAX)), the 2 scheduling-lock
 * connections, the simulators' pool (min(10, POOL_MAX)) and the 2 listeners (access changes, Agenda's wake-ups).
 */
const PROCESS_POOLS = POOL_MAX + Math.min(8, POOL_MAX) + 2 + Math.min(10, POOL_MAX) + 2;

interface Answer {
  status: number;
  retryAfter: string | null;
  outcome: string | null;
  body: { success: boolean; data?: { id: string; status: string }; error?: { code: string; message: string } };
}

async function createPayment(baseUrl: string, apiKey: string, key: string): Promise<Answer> {
  const res = await fetch(`${baseUrl}/v1/payments`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey, 'Idempotency-Key': key },
    body: JSON.stringify({ provider: 'cardpay', amount: '12.34', currency: 'USD', payment_method: 'pm_card_visa' }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), outcome: res.headers.get('payments-outcome'), body: (await res.json()) as Answer['body'] };
}

async function merchantOn(api: ServiceProcess, name: string): Promise<string> {
  const { apiKey } = await adminMerchant(db.url, name);
  secrets.push(apiKey);
  expect(await storeCardpayCredentials(api.url!, apiKey, CARDPAY_SECRET_KEY)).toBe(200);
  return apiKey;
}

beforeAll(async () => {
  db = await createTestDatabase();
  secrets.push(CARDPAY_SECRET_KEY);
}, 60_000);

afterAll(async () => {
  await stopAllProcesses();
  await db?.drop();
}, 60_000);

describe('a provider that answers in 2 s', () => {
  it('200 concurrent creates with their own keys all answer 201; the connections open never exceed the pools', async () => {
    const port = await freePort();
    const api = await startProcess('api', {
      ...baseEnv(db.url, `http://127.0.0.1:${port}`, {
        DATABASE_POOL_MAX: String(POOL_MAX), SANDBOX_LATENCY_MS: '2000', DATABASE_ACQUIRE_TIMEOUT: '20s', PROVIDER_TIMEOUT_MS: '20000',
      }),
      PORT: String(port),
    }, { name: 'slow-api' });
    // Generous pool and provider timeouts: on a shared, busy test machine a short queue for the pool or a
    // slow answer is not the failure this test looks for (connections held across the provider call would
    // exhaust the pool for minutes; 200 × 2 s / 6 connections).
    const apiKey = await merchantOn(api, 'Slow Provider Shop');

    const sampler = sampleConnections(db.url, 20);
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => createPayment(api.url!, apiKey, `slow-${i}-${started}`)));
    const elapsedMs = Date.now() - started;
    const connections = await sampler.stop();

    const statuses: Record<number, number> = {};
    for (const a of answers) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
    expect(statuses).toEqual({ 201: 200 });
    expect(new Set(answers.map((a) => a.body.data!.id)).size).toBe(200);
    expect(answers.every((a) => a.body.data!.status === 'completed')).toBe(true);
    // Each answer took the provider's 2 s; held connections would have serialised them POOL_MAX at a time.
    expect(elapsedMs).toBeGreaterThanOrEqual(2000);
    expect(connections.samples).toBeGreaterThan(10);
    expect(connections.peak).toBeLessThanOrEqual(PROCESS_POOLS);
    await api.stop();
  }, 180_000);
});

describe('a database with no connection to give', () => {
  it('answers 503 SERVICE_UNAVAILABLE with Retry-After, never 409; the same keys then succeed', async () => {
    const port = await freePort();
    const api = await startProcess('api', {
      ...baseEnv(db.url, `http://127.0.0.1:${port}`, { DATABASE_POOL_MAX: '2', DATABASE_ACQUIRE_TIMEOUT: '300ms' }),
      PORT: String(port),
    }, { name: 'tiny-pool-api' });
    const apiKey = await merchantOn(api, 'Tiny Pool Shop');

    // Hold the idempotency table: the first requests wait inside their claim, each holding one of the
    // process's two pooled connections, and every other request finds the pool empty.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE');
    const keys = Array.from({ length: 12 }, (_, i) => `exhausted-${i}-${Date.now()}`);
    const inFlight = Promise.all(keys.map((key) => createPayment(api.url!, apiKey, key)));
    await new Promise((r) => setTimeout(r, 1500));
    await holder.query('ROLLBACK');
    await holder.end();
    const answers = await inFlight;

    expect(answers.filter((a) => a.status === 409)).toEqual([]);
    const unavailable = answers.filter((a) => a.status === 503);
    expect(unavailable.length).toBeGreaterThan(0);
    for (const a of unavailable) {
      expect(a.body.success).toBe(false);
      expect(a.body.error!.code).toBe('SERVICE_UNAVAILABLE');
      expect(Number(a.retryAfter)).toBeGreaterThan(0);
      // Refused before the claim: nothing reserved, nothing sent, so no unknown outcome either.
      expect(a.outcome).toBeNull();
    }
    expect(answers.every((a) => a.status === 201 || a.status === 503)).toBe(true);

    // Nothing was done for a 503: retrying each key now creates its payment.
    const retried = await Promise.all(keys.map(async (key, i) => (answers[i]!.status === 503 ? createPayment(api.url!, apiKey, key) : answers[i]!)));
    expect(retried.map((a) => a.status).filter((s) => s !== 201 && s !== 200)).toEqual([]);
    expect(new Set(retried.map((a) => a.body.data!.id)).size).toBe(keys.length);
    await api.stop();
  }, 120_000);

  it('leaves no API key or provider secret in any process log', async () => {
    await stopAllProcesses();
    expect(findSecretsInFiles(processLogFiles(), secrets)).toEqual([]);
  });
});
