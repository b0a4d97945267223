import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from '../../server/config/config.js';
import { counterBucket } from '../../server/domain/auth/rate-limiter.js';
import { startTestService, TEST_ENCRYPTION_KEY, type TestService } from '../support/service.js';

// Limits that hold against abuse: per API key (on by default in production), and per source address
// on the unauthenticated provider callbacks, counted in PostgreSQL so every api process shares them.
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
  it('is on in production by default: 100 requests a second per API key, 1200 callbacks a minute per address', () => {
    expect(production().rateLimit).toEqual({ limit: 100, windowMs: 1000 });
    expect(production().callbackRateLimit).toEqual({ limit: 1200, windowMs: 60_000 });
    expect(loadConfig({ NODE_ENV: 'development' }).rateLimit.limit).toBe(0);
  });

  it('takes a per-second or a per-minute limit, 0 turning it off, but not both', () => {
    expect(production({ RATE_LIMIT_PER_MINUTE: '600' }).rateLimit).toEqual({ limit: 600, windowMs: 60_000 });
    expect(production({ RATE_LIMIT_PER_SECOND: '25' }).rateLimit).toEqual({ limit: 25, windowMs: 1000 });
    expect(production({ RATE_LIMIT_PER_SECOND: '0' }).rateLimit.limit).toBe(0);
    expect(production({ CALLBACK_RATE_LIMIT_PER_MINUTE: '0' }).callbackRateLimit.limit).toBe(0);
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
    t = await startTestService({ CALLBACK_RATE_LIMIT_PER_MINUTE: '50' });
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
});
