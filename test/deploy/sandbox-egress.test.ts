import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminMerchant, baseEnv, callApi, databaseForProcesses, freePort, startProcess, storeCardpayCredentials, type ServiceProcess } from '../support/processes.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * Where the simulators' webhooks and callbacks may go. Anyone with an sk_test_ key registers a webhook
 * endpoint at the cardpay simulator, so on a demo or staging deployment (NODE_ENV=production,
 * SANDBOX=true) its sends follow the merchant webhooks' address policy: no private or loopback address
 * while WEBHOOK_ALLOW_PRIVATE_URLS is off (checked on the address connected to), the service's own
 * origin excepted (the simulators' callbacks to the service), and no redirect followed anywhere.
 */

/** A loopback listener that records the paths it is sent to and answers each with `answer`. */
async function listener(answer: (res: http.ServerResponse) => void = (res) => res.writeHead(200).end('ok')) {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      paths.push(req.url ?? '');
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    paths,
    port,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const newKey = () => `sk_test_${randomUUID().replace(/-/g, '')}`;

/** One call to the cardpay simulator at `base`, as Stripe's clients send them (form-encoded, Bearer key). */
async function simulator(base: string, key: string, path: string, fields: Record<string, string>) {
  const res = await fetch(`${base}/sandbox/cardpay${path}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/x-www-form-urlencoded', 'Idempotency-Key': randomUUID() },
    body: form(fields),
  });
  const body = (await res.json()) as Record<string, any>;
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

const payWithVisa = (base: string, key: string) =>
  simulator(base, key, '/v1/payment_intents', {
    amount: '700', currency: 'usd', payment_method: 'pm_card_visa', confirm: 'true',
    'automatic_payment_methods[enabled]': 'true', 'automatic_payment_methods[allow_redirects]': 'never',
  });

/** The log lines of `file` that hold `text`. */
const linesWith = (file: string, text: string) => readFileSync(file, 'utf8').split('\n').filter((line) => line.includes(text));

describe('on a production deployment with the sandbox on and private webhook URLs refused', () => {
  const db = databaseForProcesses();
  let api: ServiceProcess;
  let target: Awaited<ReturnType<typeof listener>>;

  beforeAll(async () => {
    target = await listener();
    const port = await freePort();
    api = await startProcess('all', baseEnv(db.url, `http://127.0.0.1:${port}`, {
      NODE_ENV: 'production', SANDBOX: 'true', WEBHOOK_ALLOW_PRIVATE_URLS: 'false', HOST: '127.0.0.1', PORT: String(port),
      METRICS_TOKEN: 'a-token-of-16-chars-or-more',
    }));
  }, 120_000); // startProcess waits up to 60 s for /readyz: its error, not jest's, says why a boot failed
  afterAll(async () => {
    await target?.stop();
  }, 10_000);

  it('the cardpay simulator sends nothing to an endpoint anyone registered on a loopback address, by literal or by name', async () => {
    const key = newKey();
    const literal = await simulator(api.url!, key, '/v1/webhook_endpoints', { url: `http://127.0.0.1:${target.port}/literal?token=literal-secret`, 'enabled_events[0]': '*' });
    const named = await simulator(api.url!, key, '/v1/webhook_endpoints', { url: `http://localhost:${target.port}/named?token=named-secret`, 'enabled_events[0]': '*' });
    const intent = await payWithVisa(api.url!, key);
    expect(intent.status).toBe('succeeded');

    // Every event to each endpoint is attempted, refused, retried and given up (6 attempts each).
    const gaveUp = (endpoint: string) => linesWith(api.logFile, 'cardpay simulator gave up delivering event').filter((line) => line.includes(endpoint));
    // (Or an event reaches the listener: the failure below then shows it.)
    await eventually(() => target.paths.length > 0 || (gaveUp(literal.id).length >= 3 && gaveUp(named.id).length >= 3), 60_000, 'the simulator to give up on both endpoints');
    expect(target.paths).toEqual([]);
    // Each refusal is logged, naming the URL without its query (a token may ride there).
    const refused = linesWith(api.logFile, 'sandbox callback refused');
    expect(refused.some((line) => line.includes(`http://127.0.0.1:${target.port}/literal`))).toBe(true);
    expect(refused.some((line) => line.includes(`http://localhost:${target.port}/named`))).toBe(true);
    expect(readFileSync(api.logFile, 'utf8')).not.toMatch(/literal-secret|named-secret/);
  }, 90_000);

  it("the simulator's callbacks to the service itself (its own origin, on loopback) still arrive", async () => {
    const merchant = await adminMerchant(db.url, 'Own Origin Shop');
    // No webhook secret: the service registers its own endpoint (PUBLIC_BASE_URL/v1/webhooks/cardpay) at the simulator.
    expect(await storeCardpayCredentials(api.url!, merchant.apiKey, newKey())).toBe(200);
    const created = await callApi(api.url!, 'POST', '/v1/payments', merchant.apiKey,
      { provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': randomUUID() });
    expect(created.status).toBe(201);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await eventually(async () => (await client.query('SELECT 1 FROM provider_events WHERE provider = $1 AND payment_id = $2', ['cardpay', created.body.data.id])).rowCount! > 0,
        30_000, "the simulator's event to reach the service's inbox");
    } finally {
      await client.end();
    }
    // The service commits the inbox row before it answers, and the simulator logs the delivery once it has the
    // answer: the line may come after the row.
    await eventually(() => linesWith(api.logFile, 'cardpay simulator delivered event').length > 0, 10_000, "the simulator's log of the delivery");
  }, 60_000);
});

describe('with private webhook URLs allowed (development)', () => {
  let t: TestService;
  let final: Awaited<ReturnType<typeof listener>>;
  let redirecting: Awaited<ReturnType<typeof listener>>;
  beforeAll(async () => {
    t = await startTestService();
    final = await listener();
    redirecting = await listener((res) => res.writeHead(307, { Location: `http://127.0.0.1:${final.port}/moved` }).end());
  });
  afterAll(async () => {
    await final.stop();
    await redirecting.stop();
    await t.stop();
  });

  it('the cardpay simulator follows no redirect: a 307 is a failed delivery, retried at the same URL, and its target receives nothing', async () => {
    const key = newKey();
    const endpoint = await simulator(t.baseUrl, key, '/v1/webhook_endpoints', { url: `http://127.0.0.1:${redirecting.port}/hook`, 'enabled_events[0]': 'payment_intent.succeeded' });
    await payWithVisa(t.baseUrl, key);
    // payment_intent.succeeded: 6 attempts, each answered 307, then given up.
    // (Or the redirect is followed: the failure below then shows it.)
    await eventually(() => final.paths.length > 0 || redirecting.paths.length >= 6, 30_000, 'every attempt of the event at the redirecting endpoint');
    await eventually(async () => (await t.sql("SELECT 1 FROM agenda_jobs WHERE name = 'sandbox.cardpay.send-event' AND data->>'endpointId' = $1 AND (next_run_at IS NOT NULL OR locked_at IS NOT NULL)", [endpoint.id])).length === 0,
      10_000, 'no attempt left to run');
    expect(final.paths).toEqual([]);
    expect(redirecting.paths).toEqual(Array(6).fill('/hook'));
  }, 60_000);
});
