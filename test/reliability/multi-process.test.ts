import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, callApi, freePort, processLogFiles, startProcess, stopAllProcesses, type ServiceProcess } from '../support/processes.js';
import { findSecretsInFiles } from '../support/secret-audit.js';
import { UpstreamProbe } from '../support/upstream-probe.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// Two api and two worker processes on one database. What must hold however the work is spread:
// one reconciliation job per merchant that never runs twice at once, every webhook delivery sent once,
// and one provider callback applied once whichever process receives it.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let apis: ServiceProcess[] = [];
let workers: ServiceProcess[] = [];
let probe: UpstreamProbe;
let receiver: WebhookReceiver;
const secrets: string[] = [];
/** How long the probe holds each pull query: longer than the reconciliation interval (1 s). */
const PULL_HOLD_MS = 1500;

const api = (i: number) => apis[i % apis.length]!.url!;

beforeAll(async () => {
  db = await createTestDatabase();
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const common = { MOBILEMONEY_RECONCILE_INTERVAL: '1s' };
  apis = await Promise.all([
    startProcess('api', baseEnv(db.url, publicUrl, { ...common, PORT: String(port) }), { name: 'api1' }),
    startProcess('api', baseEnv(db.url, publicUrl, common), { name: 'api2' }),
  ]);
  // The workers reach the operator through the probe, which sees every pull query a reconciliation makes.
  probe = await new UpstreamProbe(
    `${publicUrl}/sandbox/mobilemoney`,
    (path, body) => (path.startsWith('/pulltransactions/v1/query') ? String((JSON.parse(body) as { ShortCode?: string }).ShortCode) : null),
    PULL_HOLD_MS,
  ).start();
  receiver = await new WebhookReceiver().start();
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await probe?.stop();
  await receiver?.stop();
  await db?.drop();
}, 60_000);

async function startWorkers() {
  const port = new URL(apis[0]!.url!).port;
  const env = baseEnv(db.url, `http://127.0.0.1:${port}`, { MOBILEMONEY_RECONCILE_INTERVAL: '1s', MOBILEMONEY_BASE_URL: probe.url });
  workers = await Promise.all([startProcess('worker', env, { name: 'worker1' }), startProcess('worker', env, { name: 'worker2' })]);
}

describe('automatic mobile-money reconciliation across processes', () => {
  const merchants: { merchantId: string; apiKey: string; shortcode: string }[] = [];

  it('keeps one job row per merchant when credentials are stored concurrently through both api processes and both workers boot at once', async () => {
    for (const [i, shortcode] of ['600111', '600222'].entries()) {
      const m = await adminMerchant(db.url, `Reconciled ${i}`);
      merchants.push({ ...m, shortcode });
      const creds = { env: 'sandbox', consumer_key: `ck-multi-${i}`, consumer_secret: `cs-multi-secret-${i}`, passkey: `pk-multi-passkey-${i}`, shortcode };
      secrets.push(m.apiKey, creds.consumer_secret, creds.passkey);
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, n) => callApi(api(n), 'PUT', '/v1/merchant/credentials', m.apiKey, { provider: 'mobilemoney', mobilemoney: creds })),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    }
    // Both workers schedule every merchant's job as they start.
    await startWorkers();
    for (const m of merchants) {
      const rows = await sql(db.url, `SELECT id FROM agenda_jobs WHERE name = 'mobilemoney.reconcile' AND data->>'merchantId' = $1`, [m.merchantId]);
      expect(rows).toHaveLength(1);
    }
  }, 90_000);

  it('runs each merchant\'s job again and again, never two runs of one merchant at once', async () => {
    // Each pull query is held 1.5 s, longer than the 1 s interval: overlapping runs would show here.
    for (const m of merchants) {
      await eventually(() => probe.callsFor(m.shortcode).length >= 3, 45_000, `three reconciliation runs for ${m.shortcode}`);
    }
    for (const m of merchants) expect(probe.peakConcurrency(m.shortcode)).toBe(1);
    const logged = workers.map((w) => readFileSync(w.logFile, 'utf8').split('\n').filter((l) => l.includes('automatic mobilemoney reconciliation')).length);
    expect(logged.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(merchants.length * 2);
  }, 90_000);
});

describe('webhook delivery with two workers', () => {
  it('sends every delivery exactly once when the receiver always answers 200', async () => {
    const m = await adminMerchant(db.url, 'Delivered Once');
    secrets.push(m.apiKey, 'sk_test_multi_delivery_01');
    const hook = await callApi(api(0), 'PUT', '/v1/merchant/webhook', m.apiKey, { webhook_url: receiver.url });
    expect(hook.status).toBe(200);
    secrets.push(hook.body.data.webhook_secret as string);
    expect((await callApi(api(1), 'PUT', '/v1/merchant/credentials', m.apiKey, { provider: 'cardpay', cardpay: { secret_key: 'sk_test_multi_delivery_01' } })).status).toBe(200);

    const total = 60;
    for (let batch = 0; batch < total; batch += 10) {
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          callApi(api(batch + i), 'POST', '/v1/payments', m.apiKey, { provider: 'cardpay', amount: `${batch + i + 1}.00`, currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': `once-${batch + i}-${Date.now()}` }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(201));
    }
    const deliveries = await eventually(async () => {
      const rows = await sql<{ id: string; event_id: string; status: string }>(db.url, 'SELECT id, event_id, status FROM webhook_deliveries WHERE merchant_id = $1', [m.merchantId]);
      return rows.length === total && rows.every((r) => r.status === 'delivered') ? rows : null;
    }, 60_000, 'every delivery delivered');
    // A duplicate would come from a second worker or the sweeper: give both time to act (several sweeps).
    await new Promise((r) => setTimeout(r, 3000));

    const mine = new Set(deliveries.map((d) => d.id));
    const received = receiver.received.filter((r) => mine.has(String(r.headers['x-webhook-id'])));
    const perId = new Map<string, number>();
    for (const r of received) perId.set(String(r.headers['x-webhook-id']), (perId.get(String(r.headers['x-webhook-id'])) ?? 0) + 1);
    expect([...perId.values()].filter((n) => n !== 1)).toEqual([]);
    expect(perId.size).toBe(total);
    const eventOf = new Map(deliveries.map((d) => [d.id, d.event_id]));
    for (const r of received) expect(r.json.id).toBe(eventOf.get(String(r.headers['x-webhook-id'])));
    const attempts = await sql<{ n: number }>(db.url, 'SELECT count(*)::int AS n FROM delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.merchant_id = $1', [m.merchantId]);
    expect(attempts[0]!.n).toBe(total);
  }, 120_000);
});

describe('provider callbacks received by both api processes', () => {
  const SIGNING_SECRET = 'whsec_multi_process_callbacks_0001';
  let apiKey: string;
  let n = 0;

  const sign = (body: string) => signatureHeader(body, SIGNING_SECRET);
  const succeeded = (intentId: string, paymentId: string, eventId: string) =>
    JSON.stringify({
      id: eventId, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type: 'payment_intent.succeeded',
      data: { object: { object: 'payment_intent', id: intentId, status: 'succeeded', amount: 3000, amount_received: 3000, currency: 'eur', metadata: { payment_id: paymentId } } },
    });

  async function pendingPayment() {
    const res = await callApi(api(0), 'POST', '/v1/payments', apiKey, {
      provider: 'cardpay', amount: '30.00', currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r',
    }, { 'Idempotency-Key': `cb-multi-${Date.now()}-${++n}` });
    expect(res.body.data.status).toBe('pending');
    return res.body.data as { id: string; provider_ref: string };
  }

  async function history(paymentId: string) {
    return {
      transitions: await sql(db.url, 'SELECT from_status, to_status FROM payment_transitions WHERE payment_id = $1 AND accepted ORDER BY id', [paymentId]),
      events: await sql(db.url, 'SELECT type FROM events WHERE payment_id = $1', [paymentId]),
    };
  }

  beforeAll(async () => {
    ({ apiKey } = await adminMerchant(db.url, 'Callback Shop'));
    secrets.push(apiKey, SIGNING_SECRET, 'sk_test_multi_callbacks_01');
    const res = await callApi(api(1), 'PUT', '/v1/merchant/credentials', apiKey, { provider: 'cardpay', cardpay: { secret_key: 'sk_test_multi_callbacks_01', webhook_secret: SIGNING_SECRET } });
    expect(res.status).toBe(200);
  }, 60_000);

  it('applies one signed event posted 20 times at once to both processes exactly once', async () => {
    const p = await pendingPayment();
    const body = succeeded(p.provider_ref, p.id, `evt_multi_${Date.now()}`);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => callApi(api(i), 'POST', '/v1/webhooks/cardpay', null, body, { 'Cardpay-Signature': sign(body) })));
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(await history(p.id)).toEqual({
      transitions: [{ from_status: null, to_status: 'pending' }, { from_status: 'pending', to_status: 'completed' }],
      events: [{ type: 'payment.completed' }],
    });
    expect(await sql(db.url, 'SELECT count(*)::int AS n FROM provider_events WHERE payment_id = $1', [p.id])).toEqual([{ n: 1 }]);
  }, 60_000);

  it('applies one transition when ten different events saying the same thing race', async () => {
    const p = await pendingPayment();
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => {
        const body = succeeded(p.provider_ref, p.id, `evt_multi_distinct_${Date.now()}_${i}`);
        return callApi(api(i), 'POST', '/v1/webhooks/cardpay', null, body, { 'Cardpay-Signature': sign(body) });
      }),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    expect(await history(p.id)).toEqual({
      transitions: [{ from_status: null, to_status: 'pending' }, { from_status: 'pending', to_status: 'completed' }],
      events: [{ type: 'payment.completed' }],
    });
  }, 60_000);
});

describe('logs of every process', () => {
  it('hold none of the API keys, provider secrets or webhook secrets used above', async () => {
    await stopAllProcesses();
    expect(processLogFiles()).toHaveLength(4);
    expect(findSecretsInFiles(processLogFiles(), secrets)).toEqual([]);
  }, 60_000);
});
