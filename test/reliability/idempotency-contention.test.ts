import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, processLogFiles, startProcess, stopAllProcesses, type ServiceProcess, storeCardpayCredentials } from '../support/processes.js';
import { findSecretsInFiles } from '../support/secret-audit.js';
import { eventually } from '../support/webhook-receiver.js';

// Two api processes and a worker, each a real `node server/main.ts`, on one database. Concurrent
// requests with one Idempotency-Key meet only in PostgreSQL (the advisory lock and the unique key).

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let api1: ServiceProcess;
let api2: ServiceProcess;
let apiKey: string;
const secrets: string[] = [];
const CARDPAY_SECRET_KEY = 'sk_test_contention_0001';

interface Answer {
  status: number;
  replayed: string | null;
  retryAfter: string | null;
  body: { success: boolean; data?: { id: string; status: string }; error?: { code: string } };
}

async function createPayment(baseUrl: string, key: string, body: object): Promise<Answer> {
  const res = await fetch(`${baseUrl}/v1/payments`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey, 'Idempotency-Key': key },
    body: JSON.stringify(body),
  });
  return { status: res.status, replayed: res.headers.get('idempotent-replayed'), retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Answer['body'] };
}

/** Provider calls that create a payment intent, as the simulators logged them (each api process calls its own: providers/base-url.ts). */
function intentCreations(): number {
  return [api1, api2]
    .flatMap((api) => readFileSync(api.logFile, 'utf8').split('\n'))
    .filter((line) => line.includes('"msg":"request"') && line.includes('"method":"POST"') && line.includes('"route":"/v1/payment_intents"'))
    .length;
}

beforeAll(async () => {
  db = await createTestDatabase();
  const port = await freePort();
  const env = baseEnv(db.url, `http://127.0.0.1:${port}`);
  // All three start together on the empty database: boot-time migrations must not race.
  [api1, api2] = await Promise.all([
    startProcess('api', { ...env, PORT: String(port) }, { name: 'api1' }),
    startProcess('api', env, { name: 'api2' }),
    startProcess('worker', env, { name: 'worker1' }),
  ]);
  ({ apiKey } = await adminMerchant(db.url, 'Contention Shop'));
  secrets.push(apiKey, CARDPAY_SECRET_KEY);
  expect(await storeCardpayCredentials(api2.url!, apiKey, CARDPAY_SECRET_KEY)).toBe(200);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await db?.drop();
}, 60_000);

describe('one Idempotency-Key, many concurrent requests, two api processes', () => {
  it('makes exactly one payment and one provider charge; every other answer waits for it and replays that payment', async () => {
    const key = `contended-${Date.now()}`;
    const body = { provider: 'cardpay', amount: '42.00', currency: 'USD', payment_method: 'pm_card_visa' };
    const before = intentCreations();
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => createPayment((i % 2 === 0 ? api1 : api2).url!, key, body)));

    // The provider answers in milliseconds, far inside the 10 s wait: no request may give up with the
    // passing 409 (Retry-After: 1). One 201, the first; 49 replays of it.
    expect(answers.map((a) => a.status).sort()).toEqual([...Array<number>(49).fill(200), 201]);
    const created = answers.filter((a) => a.status === 201);
    const paymentId = created[0]!.body.data!.id;
    expect(created[0]!.body.data!.status).toBe('completed');
    expect(created[0]!.replayed).toBeNull();
    for (const a of answers.filter((x) => x.status === 200)) {
      expect(a.body.data!.id).toBe(paymentId);
      expect(a.replayed).toBe('true');
    }

    expect(await sql(db.url, 'SELECT id FROM payments WHERE idempotency_key = $1', [key])).toEqual([{ id: paymentId }]);
    const charges = await sql(db.url, `SELECT id, status FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [paymentId]);
    expect(charges).toHaveLength(1);
    expect(charges[0]!.status).toBe('succeeded');
    // One creation request reached the provider at all (not one charge plus replays of it). The
    // simulator's access-log line is written as its answer goes out, so give it a moment to appear.
    await eventually(() => intentCreations() > before, 5_000, 'the provider call in the log');
    expect(intentCreations() - before).toBe(1);
    const transitions = await sql(db.url, 'SELECT to_status FROM payment_transitions WHERE payment_id = $1 AND accepted ORDER BY id', [paymentId]);
    expect(transitions).toEqual([{ to_status: 'pending' }, { to_status: 'completed' }]);
  }, 60_000);

  it('with two different bodies racing for one key, one body wins (one 201, the rest replays) and the other is always 409', async () => {
    const key = `contended-bodies-${Date.now()}`;
    const bodies = [
      { provider: 'cardpay', amount: '10.00', currency: 'USD', payment_method: 'pm_card_visa' },
      { provider: 'cardpay', amount: '11.00', currency: 'USD', payment_method: 'pm_card_visa' },
    ];
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => createPayment((i % 2 === 0 ? api1 : api2).url!, key, bodies[Math.floor(i / 2) % 2]!).then((a) => ({ ...a, bodyIndex: Math.floor(i / 2) % 2 }))),
    );
    const payments = await sql<{ id: string; amount_minor: string }>(db.url, 'SELECT id, amount_minor::text FROM payments WHERE idempotency_key = $1', [key]);
    expect(payments).toHaveLength(1);
    const winner = payments[0]!.amount_minor === '1000' ? 0 : 1;
    for (const a of answers) {
      if (a.bodyIndex === winner) {
        // The winning body's requests wait for the first (milliseconds) and replay it; none gives up with 409.
        expect([200, 201]).toContain(a.status);
        expect(a.body.data!.id).toBe(payments[0]!.id);
        expect(a.replayed).toBe(a.status === 200 ? 'true' : null);
      } else {
        // Another body's conflict is final: no Retry-After (that marks only the passing "still running" 409).
        expect({ status: a.status, code: a.body.error?.code, retryAfter: a.retryAfter }).toEqual({ status: 409, code: 'CONFLICT', retryAfter: null });
      }
    }
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(await sql(db.url, `SELECT 1 FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [payments[0]!.id])).toHaveLength(1);
  }, 60_000);

  it('leaves no API key or provider secret in any process log', async () => {
    await stopAllProcesses();
    expect(processLogFiles().length).toBeGreaterThanOrEqual(3);
    expect(findSecretsInFiles(processLogFiles(), secrets)).toEqual([]);
  }, 60_000);
});
