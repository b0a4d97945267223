import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from '../../server/config/config.js';
import { counterBucket } from '../../server/domain/auth/rate-limiter.js';
import { startTestService, TEST_ENCRYPTION_KEY, type TestService } from '../support/service.js';

// Limits that hold against abuse: per API key (on by default in production), per source address on the
// unauthenticated provider callbacks, and per source address on failed authentications (missing, unknown
// or revoked API keys), counted in PostgreSQL so every api process shares them.
// Windows are filled in the database ahead of time, so the tests do not race the clock.

const production = (env: Record<string, string> = {}) => loadConfig({ NODE_ENV: 'production', DATABASE_URL: 'postgres://payments@db.internal/payments', ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, ...env });

/** Marks the next `seconds` one-second (or one-minute) windows of `bucket` (a key id, `callback:<address>`) as used up to `count`. */
async function fillWindows(t: TestService, bucket: string, count: number, windowMs: number, seconds = 120) {
  await t.sql(
    `INSERT INTO rate_limit_windows (bucket, window_start, count)
     SELECT $1, to_timestamp(w / 1000.0), $2 FROM generate_series($3::bigint, $4::bigint, $5::bigint) AS w
     ON CONFLICT (bucket, window_start) DO UPDATE SET count = EXCLUDED.count`,
    [counterBucket(bucket, windowMs), count, Math.floor(Date.now() / windowMs) * windowMs, Date.now() + seconds * 1000, windowMs],
  );
}

describe('rate-limit configuration', () => {
  it('is on in production by default: 100 requests a second per API key, 1200 callbacks and 60 failed authentications a minute per address', () => {
    expect(production().rateLimit).toEqual({ limit: 100, windowMs: 1000 });
    expect(production().callbackRateLimit).toEqual({ limit: 1200, windowMs: 60_000 });
    expect(production().failedAuthRateLimit).toEqual({ limit: 60, windowMs: 60_000 });
    expect(loadConfig({ NODE_ENV: 'development' }).rateLimit.limit).toBe(0);
    expect(loadConfig({ NODE_ENV: 'development' }).failedAuthRateLimit.limit).toBe(0);
  });

  it('takes a per-second or a per-minute limit, 0 turning it off, but not both', () => {
    expect(production({ RATE_LIMIT_PER_MINUTE: '600' }).rateLimit).toEqual({ limit: 600, windowMs: 60_000 });
    expect(production({ RATE_LIMIT_PER_SECOND: '25' }).rateLimit).toEqual({ limit: 25, windowMs: 1000 });
    expect(production({ RATE_LIMIT_PER_SECOND: '0' }).rateLimit.limit).toBe(0);
    expect(production({ CALLBACK_RATE_LIMIT_PER_MINUTE: '0' }).callbackRateLimit.limit).toBe(0);
    expect(production({ FAILED_AUTH_RATE_LIMIT_PER_MINUTE: '0' }).failedAuthRateLimit.limit).toBe(0);
    expect(production({ FAILED_AUTH_RATE_LIMIT_PER_MINUTE: '10' }).failedAuthRateLimit).toEqual({ limit: 10, windowMs: 60_000 });
    expect(() => production({ RATE_LIMIT_PER_MINUTE: '1', RATE_LIMIT_PER_SECOND: '1' })).toThrow(ConfigError);
  });
});

describe('a production service', () => {
  let t: TestService;
  beforeAll(async () => {
    // Production defaults for the limits; the simulators stay mounted so walletpay can be exercised.
    t = await startTestService({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
  });
  afterAll(async () => t?.stop());

  it('limits each API key to 100 requests a second: 429 RATE_LIMITED with Retry-After, other keys unaffected', async () => {
    const busy = await t.createMerchant('Busy');
    const quiet = await t.createMerchant('Quiet');
    const first = await t.http.get('/v1/merchant').set('X-API-Key', busy.apiKey);
    expect(first.status).toBe(200);
    expect(first.headers['x-ratelimit-limit']).toBe('100');
    expect(first.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);

    await fillWindows(t, busy.keyId, 100, 1000);
    const limited = await t.http.get('/v1/merchant').set('X-API-Key', busy.apiKey);
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ success: false, error: { code: 'RATE_LIMITED', message: expect.stringContaining('100 a second') } });
    expect(limited.headers['retry-after']).toBe('1');
    expect(limited.headers['x-ratelimit-remaining']).toBe('0');
    expect((await t.http.get('/v1/merchant').set('X-API-Key', quiet.apiKey)).status).toBe(200);
  });

  it('limits failed authentications to 60 a minute per address: 429 instead of 401, valid keys from it still served', async () => {
    const { apiKey } = await t.createMerchant('Behind the same NAT');
    const unknown = await t.http.get('/v1/merchant').set('X-API-Key', 'pk_test_unknown');
    expect(unknown.status).toBe(401);
    const [row] = await t.sql<{ bucket: string }>(`SELECT bucket FROM rate_limit_windows WHERE bucket LIKE 'auth-failed:%' LIMIT 1`);
    expect(row!.bucket).toMatch(/^auth-failed:(.*127\.0\.0\.1|::1)\/60s$/);
    await fillWindows(t, row!.bucket.replace(/\/60s$/, ''), 60, 60_000);
    const limited = await t.http.get('/v1/merchant').set('X-API-Key', 'pk_test_unknown');
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ success: false, error: { code: 'RATE_LIMITED', message: expect.stringContaining('60 a minute') } });
    expect(limited.headers['x-ratelimit-limit']).toBe('60');
    expect((await t.http.get('/v1/merchant').set('X-API-Key', apiKey)).status).toBe(200);
  });
});

describe('failed authentications per source address', () => {
  let t: TestService;
  // TRUST_PROXY=loopback: each test names its own client address in X-Forwarded-For, so the tests count apart.
  const from = (address: string, key?: string) => {
    const req = t.http.get('/v1/merchant').set('X-Forwarded-For', address);
    return key === undefined ? req : req.set('X-API-Key', key);
  };
  const unknownKey = (i: number) => `pk_test_${'0'.repeat(20)}${i}`;

  beforeAll(async () => {
    t = await startTestService({ FAILED_AUTH_RATE_LIMIT_PER_MINUTE: '3', TRUST_PROXY: 'loopback' });
  });
  afterAll(async () => t?.stop());

  it('answers 429 with Retry-After once an address is past its failed-authentication budget; valid keys from it are still served', async () => {
    const { apiKey } = await t.createMerchant('Shared office');
    const answers = [];
    for (let i = 0; i < 7; i += 1) answers.push(await from('203.0.113.10', i % 2 ? unknownKey(i) : undefined));
    // Seven quick requests span at most two one-minute windows, three failures allowed in each.
    expect(answers.slice(0, 3).map((r) => r.status)).toEqual([401, 401, 401]);
    for (const refused of answers.filter((r) => r.status === 401)) {
      expect(refused.body.error.code).toBe('UNAUTHORIZED');
      // A 401 is as before: it carries no budget headers.
      expect(refused.headers['x-ratelimit-limit']).toBeUndefined();
    }
    const limited = answers.find((r) => r.status === 429);
    expect(limited).toBeDefined();
    expect(limited!.body).toMatchObject({
      success: false,
      error: { code: 'RATE_LIMITED', message: 'Too many requests from this address with a missing, unknown or revoked API key: at most 3 a minute' },
    });
    expect(Number(limited!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited!.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(limited!.headers['x-ratelimit-limit']).toBe('3');
    expect(limited!.headers['x-ratelimit-remaining']).toBe('0');

    // Kept over budget for the next two minutes, so what follows does not race the clock.
    await fillWindows(t, 'auth-failed:203.0.113.10', 3, 60_000);
    expect((await from('203.0.113.10', unknownKey(99))).status).toBe(429);
    // Another client behind the same address, with a valid key: served, and its own budget untouched.
    const served = await from('203.0.113.10', apiKey);
    expect(served.status).toBe(200);
    expect(served.body.data.name).toBe('Shared office');
    // Another address is not affected.
    expect((await from('198.51.100.20', unknownKey(1))).status).toBe(401);
  });

  it('counts a revoked key as a failed authentication', async () => {
    const { apiKey, keyId } = await t.createMerchant('Rotated');
    expect((await from('203.0.113.30', apiKey)).status).toBe(200);
    await t.inContext(() => t.service.container.services.apiKeys.revoke(keyId));
    // Each window has room for one more failure: of three requests (at most two windows) one is refused 429.
    await fillWindows(t, 'auth-failed:203.0.113.30', 2, 60_000);
    const statuses = [];
    for (let i = 0; i < 3; i += 1) statuses.push((await from('203.0.113.30', apiKey)).status);
    expect(statuses[0]).toBe(401);
    expect(statuses).toContain(429);
  });
});

describe('provider callbacks', () => {
  let t: TestService;
  let key: string;
  let order: { id: string; provider_ref: string };

  const verifyCalls = async () => {
    const text = await (await t.http.get('/metrics')).text;
    const line = text.split('\n').find((l) => l.startsWith('http_requests_total') && l.includes('verify-webhook-signature'));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };
  const forged = (headers: Record<string, string>) => {
    const body = JSON.stringify({
      id: 'WH-FORGED-2', event_type: 'PAYMENT.CAPTURE.COMPLETED', resource_type: 'capture',
      resource: { id: 'CAP-FORGED', status: 'COMPLETED', custom_id: order.id, supplementary_data: { related_ids: { order_id: order.provider_ref } } },
    });
    let req = t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json');
    for (const [name, value] of Object.entries(headers)) req = req.set(name, value);
    return req.send(body);
  };
  const wellFormed = () => ({
    'Walletpay-Transmission-Id': 'b3c1f0e2-4a5b-4c6d-8e9f-0a1b2c3d4e5f',
    'Walletpay-Transmission-Time': new Date().toISOString(),
    'Walletpay-Transmission-Sig': Buffer.from('x'.repeat(64)).toString('base64'),
    'Walletpay-Cert-Url': `${t.baseUrl}/sandbox/walletpay/v1/notifications/certs/CERT-X`,
    'Walletpay-Auth-Algo': 'SHA256withRSA',
  });

  beforeAll(async () => {
    t = await startTestService({ CALLBACK_RATE_LIMIT_PER_MINUTE: '50', FAILED_AUTH_RATE_LIMIT_PER_MINUTE: '0' });
    ({ apiKey: key } = await t.createMerchant('Wallet'));
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
      .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'abuse-client', client_secret: 'abuse-secret-0001' } }).expect(200);
    order = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', 'abuse-order-1')
      .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' })).body.data;
    expect(order.provider_ref).toEqual(expect.any(String));
  });
  afterAll(async () => t?.stop());

  it('refuses a walletpay callback with malformed signature headers before any verification call', async () => {
    const before = await verifyCalls();
    const good = wellFormed();
    const malformed: Record<string, string>[] = [
      { ...good, 'Walletpay-Transmission-Id': 'x' },
      { ...good, 'Walletpay-Transmission-Time': 'yesterday' },
      { ...good, 'Walletpay-Transmission-Time': new Date(Date.now() - 8 * 86_400_000).toISOString() },
      { ...good, 'Walletpay-Transmission-Time': new Date(Date.now() + 3_600_000).toISOString() },
      { ...good, 'Walletpay-Transmission-Sig': 'not base64 !' },
      { ...good, 'Walletpay-Cert-Url': 'file:///etc/passwd' },
      { ...good, 'Walletpay-Auth-Algo': 'none' },
    ];
    for (const headers of malformed) {
      const res = await forged(headers);
      expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 401, code: 'UNAUTHORIZED' });
    }
    expect(await verifyCalls()).toBe(before);
    // Well-formed but naming a certificate the provider's host does not have: refused without asking the
    // provider either (each such forgery cost a postback with the merchant's credentials, using up their rate limit).
    for (let i = 0; i < 3; i++) expect((await forged(good)).status).toBe(401);
    expect(await verifyCalls()).toBe(before);
    const [payment] = await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [order.id]);
    expect(payment!.status).toBe('pending');
  });

  it('limits callbacks per source address: 429 with Retry-After, before any lookup or verification', async () => {
    const first = await forged({ ...wellFormed(), 'Walletpay-Transmission-Id': 'short' });
    expect(first.headers['x-ratelimit-limit']).toBe('50');
    const [row] = await t.sql<{ bucket: string }>(`SELECT bucket FROM rate_limit_windows WHERE bucket LIKE 'callback:%' LIMIT 1`);
    // Counted per address, in one-minute windows.
    expect(row!.bucket).toMatch(/^callback:(.*127\.0\.0\.1|::1)\/60s$/);
    await fillWindows(t, row!.bucket.replace(/\/60s$/, ''), 50, 60_000);
    const before = await verifyCalls();
    const limited = await forged(wellFormed());
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ success: false, error: { code: 'RATE_LIMITED' } });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    for (const path of ['/v1/webhooks/cardpay', '/v1/webhooks/mobilemoney']) {
      expect((await t.http.post(path).set('Content-Type', 'application/json').send('{}')).status).toBe(429);
    }
    expect(await verifyCalls()).toBe(before);
    // Merchant routes are counted per API key, not per address.
    expect((await t.http.get('/v1/merchant').set('X-API-Key', key)).status).toBe(200);
  });

  it('keeps answering 401 to unknown keys when the failed-authentication budget is off (0)', async () => {
    const statuses = [];
    for (let i = 0; i < 10; i += 1) statuses.push((await t.http.get('/v1/merchant').set('X-API-Key', `pk_test_unknown_${i}`)).status);
    expect(statuses).toEqual(Array(10).fill(401));
    expect(await t.sql(`SELECT bucket FROM rate_limit_windows WHERE bucket LIKE 'auth-failed:%'`)).toEqual([]);
  });
});
