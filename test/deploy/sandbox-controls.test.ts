import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminMerchant, baseEnv, callApi, databaseForProcesses, freePort, logWithLine, startProcess, type ServiceProcess } from '../support/processes.js';

/**
 * The simulators' test controls (`POST /sandbox/<provider>/_control/…`: outages, lost and held answers,
 * misreports, expired tokens, reversals) take no credentials and act on the provider for every merchant
 * of the deployment. On a demo or staging deployment (NODE_ENV=production, SANDBOX=true) the API's port
 * is reachable by others, so there they are off unless SANDBOX_CONTROLS=true: each control path answers
 * as a path the provider does not have, and changes nothing; the simulated APIs themselves keep working.
 */

const db = databaseForProcesses();
const SANDBOX_DIR = path.resolve(new URL('../../server/sandbox', import.meta.url).pathname);
const WARNING = 'SANDBOX_CONTROLS is on with NODE_ENV=production';

/** Every control, with a body it accepts (with the controls on, each of these is carried out). */
const CONTROLS: { provider: 'cardpay' | 'walletpay' | 'mobilemoney'; path: string; body: unknown }[] = [
  { provider: 'cardpay', path: 'outage', body: { mode: 'error' } },
  { provider: 'cardpay', path: 'misreport', body: { amount: 1 } },
  { provider: 'cardpay', path: 'lose-answers', body: { count: 2 } },
  { provider: 'cardpay', path: 'lose-attach-answers', body: { count: 1 } },
  { provider: 'cardpay', path: 'api-errors', body: { count: 1 } },
  { provider: 'cardpay', path: 'roll-key', body: { expires_in_seconds: 0 } },
  { provider: 'walletpay', path: 'outage', body: { mode: 'captures_hang' } },
  { provider: 'walletpay', path: 'misreport', body: { currency: 'EUR' } },
  { provider: 'walletpay', path: 'expire-tokens', body: {} },
  { provider: 'walletpay', path: 'reverse-capture', body: { capture_id: 'NO-SUCH-CAPTURE' } },
  { provider: 'mobilemoney', path: 'outage', body: { mode: 'hang' } },
  { provider: 'mobilemoney', path: 'misreport', body: { amount: 1 } },
  { provider: 'mobilemoney', path: 'lose-results', body: { count: 1 } },
  { provider: 'mobilemoney', path: 'hold-results', body: { count: 1 } },
  { provider: 'mobilemoney', path: 'release-results', body: { count: 1 } },
  { provider: 'mobilemoney', path: 'lose-answers', body: { count: 1 } },
  { provider: 'mobilemoney', path: 'queue-timeouts', body: { count: 1 } },
  { provider: 'mobilemoney', path: 'stall-requests', body: { count: 1 } },
  { provider: 'mobilemoney', path: 'refuse-stalled', body: {} },
  { provider: 'mobilemoney', path: 'pull-rows', body: { shortcode: '600400', pages: [[{ transactionId: 'X' }]] } },
];

/** The `/_control/<name>` paths the simulators' sources mount. */
function mountedControlNames(dir: string): string[] {
  const names = new Set<string>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) mountedControlNames(file).forEach((n) => names.add(n));
    else if (entry.name.endsWith('.ts')) for (const m of readFileSync(file, 'utf8').matchAll(/'\/_control\/([a-z-]+)'/g)) names.add(m[1]!);
  }
  return [...names].sort();
}

const CARD_KEY = `sk_test_${randomUUID().replace(/-/g, '')}`;
const basic = (user: string, secret: string) => `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;

/** A control request as anyone who reaches the port sends it: no credentials (cardpay's unknown paths want a key first, as Stripe's). */
async function control(base: string, provider: string, controlPath: string, body: unknown) {
  const res = await fetch(`${base}/sandbox/${provider}/${controlPath}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(provider === 'cardpay' ? { Authorization: `Bearer ${CARD_KEY}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** What each simulator answers to a path it does not have: its own 404, never the service's envelope. */
function unknownPath(provider: string, method: string, requestPath: string) {
  if (provider === 'cardpay') return { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${requestPath}).` } };
  if (provider === 'walletpay') {
    return {
      name: 'RESOURCE_NOT_FOUND', message: 'The specified resource does not exist.', debug_id: expect.any(String),
      links: [{ href: 'https://developer.paypal.com/docs/api/orders/v2/#error-RESOURCE_NOT_FOUND', rel: 'information_link', method: 'GET' }],
    };
  }
  return { requestId: expect.any(String), errorCode: '404.001.01', errorMessage: 'Resource not found' };
}

async function sql<T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query<T>(text, params)).rows;
  } finally {
    await client.end();
  }
}

/** The simulated providers answer as usual: a card payment through the service completes, walletpay and mobilemoney tokens are issued and honoured. */
async function providersAnswerNormally(api: ServiceProcess, walletpayToken: string) {
  const merchant = await adminMerchant(db.url, `Demo Shop ${randomUUID().slice(0, 8)}`);
  const stored = await callApi(api.url!, 'PUT', '/v1/merchant/credentials', merchant.apiKey,
    { provider: 'cardpay', cardpay: { secret_key: CARD_KEY, webhook_secret: 'whsec_demo_not_registered' } });
  expect(stored.status).toBe(200);
  const created = await callApi(api.url!, 'POST', '/v1/payments', merchant.apiKey,
    { provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': randomUUID() });
  expect([created.status, created.body.data?.status, created.body.data?.amount]).toEqual([201, 'completed', '12.00']);

  // The walletpay token taken before the controls were tried is still good (expire-tokens did nothing).
  const hooks = await fetch(`${api.url}/sandbox/walletpay/v1/notifications/webhooks`, { headers: { Authorization: `Bearer ${walletpayToken}` } });
  expect([hooks.status, await hooks.json()]).toEqual([200, { webhooks: [] }]);

  const mm = await fetch(`${api.url}/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials`, { headers: { Authorization: basic('demo-consumer', 'demo-secret') } });
  expect(mm.status).toBe(200);
  expect(await mm.json()).toMatchObject({ access_token: expect.any(String) });
}

async function walletpayToken(base: string): Promise<string> {
  const res = await fetch(`${base}/sandbox/walletpay/v1/oauth2/token`, {
    method: 'POST',
    headers: { Authorization: basic('demo-client', 'demo-secret'), 'Content-Type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

async function startDemo(extra: Record<string, string> = {}): Promise<ServiceProcess> {
  const port = await freePort();
  return startProcess('api', baseEnv(db.url, `http://127.0.0.1:${port}`, { NODE_ENV: 'production', SANDBOX: 'true', PORT: String(port), ...extra }));
}

describe('the simulators\' controls on a demo deployment (NODE_ENV=production, SANDBOX=true)', () => {
  it('this test covers every control the simulators mount', () => {
    expect([...new Set(CONTROLS.map((c) => c.path))].sort()).toEqual(mountedControlNames(SANDBOX_DIR));
  });

  describe('with SANDBOX_CONTROLS unset (off by default in production)', () => {
    let api: ServiceProcess;
    beforeAll(async () => {
      api = await startDemo();
    }, 120_000); // startProcess waits up to 60 s for /readyz: its error, not jest's, says why a boot failed
    afterAll(async () => {
      await api?.stop();
    }, 30_000);

    it('answers every control as a path the provider does not have, and changes nothing: the providers still answer normally', async () => {
      const token = await walletpayToken(api.url!);
      for (const { provider, path: name, body } of CONTROLS) {
        // Also as Express would route them: another case, a trailing slash.
        for (const controlPath of [`_control/${name}`, `_CONTROL/${name}`, `_control/${name}/`]) {
          const answer = await control(api.url!, provider, controlPath, body);
          expect({ provider, controlPath, ...answer }).toEqual({ provider, controlPath, status: 404, body: unknownPath(provider, 'POST', `/${controlPath}`) });
        }
      }
      expect(await sql('SELECT provider FROM sandbox_controls')).toEqual([]);
      expect(await sql('SELECT shortcode FROM sandbox_mobilemoney_listed_rows')).toEqual([]);
      expect(await sql('SELECT account FROM sandbox_cardpay_api_errors')).toEqual([]);
      // The key was not rolled: it still works (providersAnswerNormally stores it and pays with it).
      expect(await sql('SELECT key_hash FROM sandbox_cardpay_keys')).toEqual([]);
      await providersAnswerNormally(api, token);
      expect(readFileSync(api.logFile, 'utf8')).not.toContain(WARNING);
    }, 60_000);
  });

  describe('with SANDBOX_CONTROLS=true', () => {
    let api: ServiceProcess;
    beforeAll(async () => {
      api = await startDemo({ SANDBOX_CONTROLS: 'true' });
    }, 120_000);
    afterAll(async () => {
      await api?.stop();
    }, 30_000);

    it('refuses what a web page can make a browser send cross-site without asking (a form post, text/plain, no Content-Type) and changes nothing', async () => {
      const token = await walletpayToken(api.url!);
      const state = async () => ({
        controls: await sql('SELECT * FROM sandbox_controls ORDER BY provider'),
        listedRows: await sql('SELECT * FROM sandbox_mobilemoney_listed_rows'),
        apiErrors: await sql('SELECT * FROM sandbox_cardpay_api_errors'),
        keys: await sql('SELECT * FROM sandbox_cardpay_keys'),
      });
      const before = await state();
      const post = async (provider: string, name: string, contentType: string | null, body: string | undefined) => {
        const res = await fetch(`${api.url}/sandbox/${provider}/_control/${name}`, {
          method: 'POST',
          headers: {
            Origin: 'https://attacker.example',
            ...(contentType ? { 'Content-Type': contentType } : {}),
            ...(provider === 'cardpay' ? { Authorization: `Bearer ${CARD_KEY}` } : {}),
          },
          body,
        });
        return { provider, name, contentType, status: res.status, body: await res.json() };
      };
      const refused = (provider: string, name: string, contentType: string | null) =>
        ({ provider, name, contentType, status: 415, body: { error: 'a test control takes a JSON request (Content-Type: application/json)' } });
      try {
        // An HTML form on any page the developer opens: a "simple" request, no preflight, and the port is reachable from their browser.
        expect(await post('cardpay', 'outage', 'application/x-www-form-urlencoded', 'mode=hang')).toEqual(refused('cardpay', 'outage', 'application/x-www-form-urlencoded'));
        // navigator.sendBeacon / a text/plain fetch to the controls that read no body field.
        expect(await post('walletpay', 'expire-tokens', 'text/plain', '')).toEqual(refused('walletpay', 'expire-tokens', 'text/plain'));
        expect(await post('mobilemoney', 'refuse-stalled', 'text/plain', '')).toEqual(refused('mobilemoney', 'refuse-stalled', 'text/plain'));
        for (const { provider, path: name, body } of CONTROLS) {
          const form = new URLSearchParams(Object.entries(body as object).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])).toString();
          expect(await post(provider, name, 'application/x-www-form-urlencoded', form)).toEqual(refused(provider, name, 'application/x-www-form-urlencoded'));
          expect(await post(provider, name, 'text/plain;charset=UTF-8', JSON.stringify(body))).toEqual(refused(provider, name, 'text/plain;charset=UTF-8'));
          expect(await post(provider, name, null, undefined)).toEqual(refused(provider, name, null));
        }
        expect(await state()).toEqual(before);
        // The walletpay token was not expired, the cardpay key not rolled, and no outage is on.
        await providersAnswerNormally(api, token);
      } finally {
        await control(api.url!, 'cardpay', '_control/outage', { mode: 'ok' });
      }
    }, 60_000);

    it('the controls work, and every boot says they are open to anyone who reaches the port', async () => {
      expect(await logWithLine(api.logFile, WARNING)).toContain(WARNING);
      const token = await walletpayToken(api.url!);
      expect(await control(api.url!, 'mobilemoney', '_control/outage', { mode: 'error' })).toEqual({ status: 200, body: { provider: 'mobilemoney', mode: 'error' } });
      const down = await fetch(`${api.url}/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials`, { headers: { Authorization: basic('demo-consumer', 'demo-secret') } });
      expect(down.status).toBe(500);
      expect(await control(api.url!, 'mobilemoney', '_control/outage', { mode: 'ok' })).toEqual({ status: 200, body: { provider: 'mobilemoney', mode: 'ok' } });
      await providersAnswerNormally(api, token);
    }, 60_000);
  });
});
