import { hostname } from 'node:os';
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, processLogFiles, startProcess, stopAllProcesses, type ServiceProcess } from '../support/processes.js';
import { findSecretsInFiles } from '../support/secret-audit.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// Workers are SIGKILLed at random moments while 200 payments complete and their webhooks go out, and
// restarted each time. The outbox must still reach the merchant: every event delivered at least once,
// under its delivery's stable X-Webhook-Id, with nothing lost.

const PAYMENTS = 200;
const CARDPAY_SECRET_KEY = 'sk_test_crash_safety_0001';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let apis: ServiceProcess[] = [];
const workers: ServiceProcess[] = [];
let workerEnv: Record<string, string>;
let receiver: WebhookReceiver;
let apiKey: string;
let merchantId: string;
let webhookSecret: string;

/** A small seeded PRNG (mulberry32): the kill moments are random but the same on every run. */
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The index of the worker whose Agenda holds the `webhook.sweep` lock (Agenda names itself `worker-<host>-<pid>`). */
async function sweepHolder(): Promise<number> {
  return eventually(async () => {
    const rows = await sql<{ by: string }>(db.url, `SELECT last_modified_by AS by FROM agenda_jobs WHERE name = 'webhook.sweep' AND locked_at IS NOT NULL`);
    const index = workers.findIndex((w) => rows[0]?.by === `worker-${hostname()}-${w.pid}`);
    return index >= 0 ? { index } : null;
  }, 20_000, 'a worker to hold the sweep lock').then((found) => found.index);
}

async function call(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { 'X-API-Key': apiKey, 'Content-Type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

beforeAll(async () => {
  db = await createTestDatabase();
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  // A short attempt timeout keeps the lease (timeout + 30 s) of an attempt cut short by a kill modest.
  const tuning = { DELIVERY_SWEEP_INTERVAL: '1s', WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,500ms,1s,2s', WEBHOOK_TIMEOUT_MS: '1000' };
  workerEnv = baseEnv(db.url, publicUrl, tuning);
  apis = await Promise.all([
    startProcess('api', baseEnv(db.url, publicUrl, { ...tuning, PORT: String(port) }), { name: 'api1' }),
    startProcess('api', baseEnv(db.url, publicUrl, tuning), { name: 'api2' }),
  ]);
  workers.push(...(await Promise.all([startProcess('worker', workerEnv, { name: 'workerA' }), startProcess('worker', workerEnv, { name: 'workerB' })])));
  receiver = await new WebhookReceiver().start();
  ({ apiKey, merchantId } = await adminMerchant(db.url, 'Crash Shop'));
  const hook = await call(apis[0]!.url!, 'PUT', '/v1/merchant/webhook', { webhook_url: receiver.url });
  expect(hook.status).toBe(200);
  webhookSecret = hook.body.data.webhook_secret as string;
  expect((await call(apis[1]!.url!, 'PUT', '/v1/merchant/credentials', { provider: 'cardpay', cardpay: { secret_key: CARDPAY_SECRET_KEY } })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await receiver?.stop();
  await db?.drop();
}, 60_000);

describe('workers killed mid-flight', () => {
  it('lose no event: every outbox row reaches the merchant under its delivery id', async () => {
    const random = prng(20261122);
    let created = 0;
    const createAll = (async () => {
      const next = { i: 0 };
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = next.i++; i < PAYMENTS; i = next.i++) {
            const res = await call(apis[i % 2]!.url!, 'POST', '/v1/payments', { provider: 'cardpay', amount: `${(i % 50) + 1}.25`, currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': `crash-${i}` });
            expect(res.status).toBe(201);
            created += 1;
          }
        }),
      );
    })();
    // Awaited below, after the kills; a failure meanwhile must not surface as an unhandled rejection.
    createAll.catch(() => undefined);

    // Three kills at random moments while payments are still being created, each followed by a restart.
    // The first one hits whichever worker holds the delivery sweeper's job lock: the sweeper is what
    // rescues a dead worker's deliveries, so it must not die with it.
    const kills: string[] = [];
    for (let k = 0; k < 3; k += 1) {
      await new Promise((r) => setTimeout(r, 300 + Math.floor(random() * 1500)));
      const victim = k === 0 ? await sweepHolder() : Math.floor(random() * workers.length);
      const old = workers[victim]!;
      await old.kill('SIGKILL');
      kills.push(`${old.name} after ${created} payments`);
      workers[victim] = await startProcess('worker', workerEnv, { name: `${old.name.replace(/-r\d+$/, '')}-r${k + 1}` });
    }
    await createAll;
    expect(created).toBe(PAYMENTS);
    expect(kills).toHaveLength(3);

    const outbox = await sql<{ event_id: string; delivery_id: string | null }>(
      db.url,
      `SELECT e.id AS event_id, d.id AS delivery_id FROM events e LEFT JOIN webhook_deliveries d ON d.event_id = e.id WHERE e.merchant_id = $1`,
      [merchantId],
    );
    expect(outbox).toHaveLength(PAYMENTS);
    expect(outbox.filter((r) => r.delivery_id === null)).toEqual([]);
    const eventOf = new Map(outbox.map((r) => [r.delivery_id!, r.event_id]));

    const receivedIds = () => new Set(receiver.received.map((r) => String(r.headers['x-webhook-id'])));
    await eventually(() => {
      const got = receivedIds();
      return outbox.every((r) => got.has(r.delivery_id!));
    }, 120_000, 'every delivery to reach the receiver');
    await eventually(async () => {
      const rows = await sql<{ n: number }>(db.url, `SELECT count(*)::int AS n FROM webhook_deliveries WHERE merchant_id = $1 AND status <> 'delivered'`, [merchantId]);
      return rows[0]!.n === 0;
    }, 60_000, 'every delivery marked delivered');

    const bodiesPerId = new Map<string, Set<string>>();
    for (const r of receiver.received) {
      const id = String(r.headers['x-webhook-id']);
      // Only deliveries from the outbox, each with its own event, correctly signed.
      expect(eventOf.has(id)).toBe(true);
      expect(r.json.id).toBe(eventOf.get(id));
      const ts = String(r.headers['x-payments-timestamp']);
      expect(r.headers['x-payments-signature']).toBe(`sha256=${createHmac('sha256', webhookSecret).update(`${ts}.${r.body}`).digest('hex')}`);
      bodiesPerId.set(id, (bodiesPerId.get(id) ?? new Set()).add(r.body));
    }
    expect(bodiesPerId.size).toBe(PAYMENTS);
    // A re-sent delivery is byte-for-byte the same event.
    expect([...bodiesPerId.values()].filter((bodies) => bodies.size !== 1)).toEqual([]);
  }, 240_000);

  it('leaves no API key or secret in any process log', async () => {
    await stopAllProcesses();
    expect(findSecretsInFiles(processLogFiles(), [apiKey, CARDPAY_SECRET_KEY, webhookSecret])).toEqual([]);
  }, 60_000);
});
