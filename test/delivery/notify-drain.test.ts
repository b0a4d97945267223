import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminMerchant, baseEnv, freePort, startProcess, stopAllProcesses, storeCardpayCredentials, type ServiceProcess } from '../support/processes.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// First attempts start from the NOTIFY of the outbox commit, not from a job: real api and worker
// processes on one database. The sweeper runs once an hour here, so only a worker's listener (or its
// look at startup) can send a delivery within the test.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let api: ServiceProcess;
let publicUrl: string;
let receiver: WebhookReceiver;
let merchant: { merchantId: string; apiKey: string };
let workers: ServiceProcess[] = [];
let created = 0;

const env = (extra: Record<string, string> = {}) => baseEnv(db.url, publicUrl, { DELIVERY_SWEEP_INTERVAL: '1h', ...extra });

async function createPayments(count: number): Promise<void> {
  for (let done = 0; done < count; done += 10) {
    const statuses = await Promise.all(
      Array.from({ length: Math.min(10, count - done) }, async () => {
        const n = ++created;
        const res = await fetch(`${api.url}/v1/payments`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-API-Key': merchant.apiKey, 'Idempotency-Key': `notify-drain-${n}` },
          body: JSON.stringify({ provider: 'cardpay', amount: `${n}.00`, currency: 'USD', payment_method: 'pm_card_visa' }),
        });
        await res.arrayBuffer();
        return res.status;
      }),
    );
    expect(statuses.every((s) => s === 201)).toBe(true);
  }
}

const deliveries = () => sql<{ id: string; status: string }>(db.url, 'SELECT id, status FROM webhook_deliveries WHERE merchant_id = $1', [merchant.merchantId]);

/** Waits until every delivery of the merchant is delivered; returns how often the receiver got each. */
async function allDelivered(expected: number): Promise<Map<string, number>> {
  const rows = await eventually(async () => {
    const r = await deliveries();
    return r.length === expected && r.every((d) => d.status === 'delivered') ? r : null;
  }, 60_000, `${expected} deliveries delivered`);
  const perId = new Map<string, number>(rows.map((r) => [r.id, 0]));
  for (const req of receiver.received) {
    const id = String(req.headers['x-webhook-id']);
    if (perId.has(id)) perId.set(id, perId.get(id)! + 1);
  }
  return perId;
}

/** Delivery jobs ever booked in Agenda (a test trigger logs every insert into agenda_jobs). */
const bookedDeliveryJobs = () => sql(db.url, `SELECT 1 FROM test_booked_jobs WHERE name = 'webhook.deliver'`);

beforeAll(async () => {
  db = await createTestDatabase();
  const port = await freePort();
  publicUrl = `http://127.0.0.1:${port}`;
  api = await startProcess('api', env({ PORT: String(port) }), { name: 'api' });
  receiver = await new WebhookReceiver().start();
  merchant = await adminMerchant(db.url, 'Notified');
  const hook = await fetch(`${api.url}/v1/merchant/webhook`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': merchant.apiKey },
    body: JSON.stringify({ webhook_url: receiver.url }),
  });
  expect(hook.status).toBe(200);
  expect(await storeCardpayCredentials(api.url!, merchant.apiKey, 'sk_test_notify_drain_01')).toBe(200);
  // Agenda made its table as the api started: log every job inserted from now on.
  await sql(db.url, `CREATE TABLE test_booked_jobs (name text NOT NULL, delivery_id text)`);
  await sql(db.url, `CREATE FUNCTION test_log_job() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO test_booked_jobs VALUES (NEW.name, NEW.data->>'deliveryId'); RETURN NULL; END $$`);
  await sql(db.url, `CREATE TRIGGER test_log_job AFTER INSERT ON agenda_jobs FOR EACH ROW EXECUTE FUNCTION test_log_job()`);
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await receiver?.stop();
  await db?.drop();
}, 60_000);

describe('first attempts from the NOTIFY after the commit', () => {
  it('sends the deliveries committed while no worker listened once a worker starts', async () => {
    await createPayments(5);
    expect((await deliveries()).map((d) => d.status)).toEqual(Array(5).fill('pending'));
    expect(receiver.received).toHaveLength(0);

    workers = [await startProcess('worker', env(), { name: 'worker1' })];
    const perId = await allDelivered(5);
    expect([...perId.values()]).toEqual(Array(5).fill(1));
  }, 120_000);

  it('sends a new delivery on the NOTIFY after its commit, with no job booked for it', async () => {
    const before = receiver.received.length;
    await createPayments(1);
    const perId = await allDelivered(6);
    expect([...perId.values()]).toEqual(Array(6).fill(1));
    expect(receiver.received).toHaveLength(before + 1);
    expect(await bookedDeliveryJobs()).toHaveLength(0);
  }, 60_000);

  it('two workers draining one backlog, then sharing new deliveries, send each delivery once', async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await createPayments(100);
    expect((await deliveries()).filter((d) => d.status === 'pending')).toHaveLength(100);

    workers = await Promise.all([startProcess('worker', env(), { name: 'worker2' }), startProcess('worker', env(), { name: 'worker3' })]);
    // And while both listen, new commits wake both at once.
    await createPayments(40);
    const perId = await allDelivered(146);
    expect([...perId.entries()].filter(([, n]) => n !== 1)).toEqual([]);
    const attempts = await sql<{ n: number }>(db.url, 'SELECT count(*)::int AS n FROM delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.merchant_id = $1', [merchant.merchantId]);
    expect(attempts[0]!.n).toBe(146);
    expect(await bookedDeliveryJobs()).toHaveLength(0);
  }, 180_000);
});
