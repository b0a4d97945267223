import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sql } from '../support/database.js';
import { adminCli, adminMerchant, baseEnv, freePort, startProcess, stopAllProcesses, type ServiceProcess } from '../support/processes.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';
import { WEBHOOK_HEADERS, signWebhook } from '../../server/domain/delivery/signature.js';

// Each process caches API keys and decrypted provider credentials. A change made anywhere — through the
// other process, the admin CLI or SQL by hand — must be honoured by every process within a second; the
// worker's webhook signatures are held to the same bound.

const WITHIN_MS = 1000;
const ALL_SCOPES = 'payments:read,payments:write,refunds:read,refunds:write,merchant:read,merchant:write,webhooks:read,webhooks:write';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let api1: ServiceProcess;
let api2: ServiceProcess;
let receiver: WebhookReceiver;
let merchantId: string;
let n = 0;

async function call(proc: ServiceProcess, method: string, path: string, apiKey: string, body?: unknown) {
  const res = await fetch(`${proc.url}${path}`, {
    method,
    headers: {
      'X-API-Key': apiKey,
      ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      ...(method === 'POST' ? { 'Idempotency-Key': `cache-${Date.now()}-${++n}` } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const readMerchant = (proc: ServiceProcess, apiKey: string) => call(proc, 'GET', '/v1/merchant', apiKey).then((r) => r.status);
const pay = (proc: ServiceProcess, apiKey: string) =>
  call(proc, 'POST', '/v1/payments', apiKey, { provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' });

/** The simulator account (sha256 of the secret key) a payment was created under. */
async function simulatorAccountOf(paymentId: string): Promise<string | undefined> {
  const rows = await sql<{ account: string }>(db.url, 'SELECT i.account FROM payments p JOIN sandbox_cardpay_intents i ON i.id = p.provider_ref WHERE p.id = $1', [paymentId]);
  return rows[0]?.account;
}
const accountFor = (secretKey: string) => createHash('sha256').update(secretKey).digest('hex');

/**
 * How long after `since` the first request that saw the change was sent (polling every 20 ms), or
 * Infinity when none did within 5 s.
 */
async function msUntil(since: number, sawChange: () => Promise<boolean>): Promise<number> {
  for (;;) {
    const sentAt = Date.now();
    if (await sawChange()) return sentAt - since;
    if (sentAt - since > 5000) return Infinity;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function newKey(scopes = ALL_SCOPES): Promise<{ id: string; key: string }> {
  return adminCli<{ id: string; key: string }>(db.url, ['key', 'create', '--merchant', merchantId, '--scopes', scopes]);
}

/** Both processes have answered with the key (so each holds it in its cache). */
async function warm(apiKey: string): Promise<void> {
  for (let i = 0; i < 3; i += 1) expect([await readMerchant(api1, apiKey), await readMerchant(api2, apiKey)]).toEqual([200, 200]);
}

beforeAll(async () => {
  db = await createTestDatabase();
  // Both reach the simulator (and take provider callbacks) at the first one's address.
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  // The worker is stopped with the others (stopAllProcesses); nothing here reads it.
  [api1, api2] = await Promise.all([
    startProcess('api', baseEnv(db.url, publicUrl, { PORT: String(port) }), { name: 'api1' }),
    startProcess('api', baseEnv(db.url, publicUrl), { name: 'api2' }),
    startProcess('worker', baseEnv(db.url, publicUrl), { name: 'worker' }),
  ]);
  receiver = await new WebhookReceiver().start();
  ({ merchantId } = await adminMerchant(db.url, 'Cached Access'));
}, 120_000);

afterAll(async () => {
  await stopAllProcesses();
  await receiver?.stop();
  await db?.drop();
}, 60_000);

describe('API keys cached in each api process', () => {
  it('refuses a key revoked with the admin CLI in both processes within a second', async () => {
    const { id, key } = await newKey();
    await warm(key);
    // Both processes keep answering with the key while the CLI runs (so they serve it from their caches).
    const answers: { at: number; status: number }[] = [];
    let reading = true;
    const readers = Promise.all(
      [api1, api2, api1, api2].map(async (proc) => {
        while (reading) {
          const at = Date.now();
          answers.push({ at, status: await readMerchant(proc, key) });
        }
      }),
    );
    let revokedAt = Infinity;
    try {
      revokedAt = Date.parse((await adminCli<{ revoked_at: string }>(db.url, ['key', 'revoke', '--id', id])).revoked_at);
      await eventually(() => answers.filter((a) => a.at >= revokedAt + WITHIN_MS).length >= 20, 30_000, 'answers a second after the revocation');
    } finally {
      reading = false;
      await readers;
    }
    expect(answers.filter((a) => a.at < revokedAt).map((a) => a.status)).toContain(200);
    const late = answers.filter((a) => a.at >= revokedAt + WITHIN_MS);
    expect(late.map((a) => a.status)).toEqual(late.map(() => 401));
  }, 60_000);

  it('honours scopes changed and a revocation made by hand in SQL within a second', async () => {
    const { id, key } = await newKey();
    await warm(key);
    await sql(db.url, `UPDATE api_keys SET scopes = '{payments:read}' WHERE id = $1`, [id]);
    let since = Date.now();
    expect(await msUntil(since, async () => (await readMerchant(api2, key)) === 403)).toBeLessThan(WITHIN_MS);
    expect(await readMerchant(api1, key)).toBe(403);
    expect((await call(api1, 'GET', '/v1/payments', key)).status).toBe(200);

    await sql(db.url, 'UPDATE api_keys SET revoked_at = now() WHERE id = $1', [id]);
    since = Date.now();
    expect(await msUntil(since, async () => (await call(api2, 'GET', '/v1/payments', key)).status === 401)).toBeLessThan(WITHIN_MS);
  }, 60_000);

  it('takes a newly issued key at once, and never lets an unknown key in', async () => {
    expect(await readMerchant(api1, `pk_${'0'.repeat(40)}`)).toBe(401);
    const { key } = await newKey();
    expect([await readMerchant(api1, key), await readMerchant(api2, key)]).toEqual([200, 200]);
  }, 60_000);
});

describe('provider credentials cached in each api process', () => {
  let apiKey: string;
  beforeAll(async () => {
    ({ key: apiKey } = await newKey());
  }, 60_000);

  const store = (proc: ServiceProcess, secretKey: string) => call(proc, 'PUT', '/v1/merchant/credentials', apiKey, { provider: 'cardpay', cardpay: { secret_key: secretKey } });

  it('uses credentials changed through the other process within a second', async () => {
    const oldKey = 'sk_test_cache_old_secret_0001';
    const newSecret = 'sk_test_cache_new_secret_0002';
    expect((await store(api1, oldKey)).status).toBe(200);
    for (let i = 0; i < 3; i += 1) {
      const created = await pay(api2, apiKey);
      expect(created.status).toBe(201);
      expect(await simulatorAccountOf(created.body.data.id as string)).toBe(accountFor(oldKey));
    }
    expect((await store(api1, newSecret)).status).toBe(200);
    const since = Date.now();
    const ms = await msUntil(since, async () => {
      const created = await pay(api2, apiKey);
      return created.status === 201 && (await simulatorAccountOf(created.body.data.id as string)) === accountFor(newSecret);
    });
    expect(ms).toBeLessThan(WITHIN_MS);
  }, 60_000);

  it('answers 422 in the other process within a second once the credentials are removed', async () => {
    expect((await store(api1, 'sk_test_cache_removed_0003')).status).toBe(200);
    expect((await pay(api2, apiKey)).status).toBe(201);
    expect((await call(api1, 'DELETE', '/v1/merchant/credentials/cardpay', apiKey)).status).toBe(200);
    const since = Date.now();
    expect(await msUntil(since, async () => (await pay(api2, apiKey)).status === 422)).toBeLessThan(WITHIN_MS);
  }, 60_000);
});

describe('webhook signing secrets in the worker', () => {
  /** Whether the delivery of `paymentId`'s event (once it arrives) is signed with `secret`. */
  async function signedWith(paymentId: string, secret: string): Promise<boolean> {
    const delivery = await eventually(() => receiver.received.find((r) => r.body.includes(paymentId)), 10_000, `the webhook of ${paymentId}`);
    const header = (name: string) => String(delivery.headers[name.toLowerCase()]);
    return header(WEBHOOK_HEADERS.signature) === signWebhook(secret, Number(header(WEBHOOK_HEADERS.timestamp)), delivery.body);
  }

  it('signs with a secret rotated through an api process within a second, while it delivers a steady stream', async () => {
    const { key: apiKey } = await newKey();
    expect((await call(api1, 'PUT', '/v1/merchant/credentials', apiKey, { provider: 'cardpay', cardpay: { secret_key: 'sk_test_cache_hooks_0004' } })).status).toBe(200);
    const register = async (proc: ServiceProcess) => {
      const res = await call(proc, 'PUT', '/v1/merchant/webhook', apiKey, { webhook_url: receiver.url });
      expect(res.status).toBe(200);
      return res.body.data.webhook_secret as string;
    };
    const first = await register(api1);
    // Payments created one after another by four clients: the worker signs deliveries several times a
    // second (a cache of the secret would be in use).
    const sent: { id: string; at: number }[] = [];
    let streaming = true;
    const stream = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (streaming) {
          const at = Date.now();
          const created = await pay(api1, apiKey);
          if (created.status === 201) sent.push({ id: created.body.data.id as string, at });
        }
      }),
    );
    try {
      await eventually(() => sent.length >= 20, 30_000, 'twenty payments');
      expect(await signedWith(sent[0]!.id, first)).toBe(true);
      const second = await register(api2);
      const rotatedAt = Date.now();
      await eventually(() => sent.filter((p) => p.at >= rotatedAt + WITHIN_MS).length >= 10, 30_000, 'ten payments a second after the rotation');
      streaming = false;
      await stream;
      const late = sent.filter((p) => p.at >= rotatedAt + WITHIN_MS);
      const signedWithNew = await Promise.all(late.map((p) => signedWith(p.id, second)));
      expect(signedWithNew).toEqual(late.map(() => true));
    } finally {
      streaming = false;
      await stream;
    }
  }, 120_000);
});

describe('when the listening connection is lost', () => {
  const listenerOf = (proc: ServiceProcess) =>
    sql<{ pid: number }>(db.url, 'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [`payments-change-listener:${proc.pid}`]);

  it('reads the database until it listens again, then caches and is invalidated as before', async () => {
    const first = await newKey();
    await warm(first.key);
    const [listener] = await listenerOf(api2);
    expect(listener).toBeDefined();
    await sql(db.url, 'SELECT pg_terminate_backend($1)', [listener!.pid]);
    // A change made while the process may not be listening yet.
    await sql(db.url, 'UPDATE api_keys SET revoked_at = now() WHERE id = $1', [first.id]);
    const since = Date.now();
    expect(await msUntil(since, async () => (await readMerchant(api2, first.key)) === 401)).toBeLessThan(WITHIN_MS);

    // It listens again on a new connection, and a later revocation reaches it as before.
    await eventually(async () => (await listenerOf(api2)).some((l) => l.pid !== listener!.pid), 10_000, 'a new listening connection');
    const second = await newKey();
    await warm(second.key);
    await sql(db.url, 'UPDATE api_keys SET revoked_at = now() WHERE id = $1', [second.id]);
    const again = Date.now();
    expect(await msUntil(again, async () => (await readMerchant(api2, second.key)) === 401)).toBeLessThan(WITHIN_MS);
  }, 60_000);
});
