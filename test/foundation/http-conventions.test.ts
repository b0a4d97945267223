import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { openApiDocument } from '../../server/http/openapi.js';
import { rawRequest } from '../support/raw-http.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

let t: TestService;
let key: string;
beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('Conventions'));
});
afterAll(async () => t.stop());

describe('error envelope', () => {
  it('400 BAD_REQUEST for malformed JSON', async () => {
    const res = await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).set('Content-Type', 'application/json').send('{"webhook_url": ');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ success: false, error: { code: 'BAD_REQUEST', message: expect.any(String), request_id: expect.any(String) } });
  });

  it('413 PAYLOAD_TOO_LARGE over 100 KiB, and nothing changes', async () => {
    const res = await t.http
      .put('/v1/merchant/webhook')
      .set('X-API-Key', key)
      .send({ webhook_url: `https://example.com/${'a'.repeat(110 * 1024)}` });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    const me = await t.http.get('/v1/merchant').set('X-API-Key', key);
    expect(me.body.data.webhook_url).toBeNull();
  });

  it('a body not sent as JSON is refused 400 naming application/json, and nothing is done', async () => {
    const { apiKey } = await t.createMerchant('Not JSON');
    const receiver = await new WebhookReceiver().start();
    try {
      await t.http.put('/v1/merchant/webhook').set('X-API-Key', apiKey).send({ webhook_url: receiver.url }).expect(200);
      await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({
        provider: 'mobilemoney',
        mobilemoney: { env: 'sandbox', consumer_key: 'ck', consumer_secret: 'cs-not-json', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' },
      }).expect(200);
      const since = new Date(Date.now() - 3 * 86_400_000).toISOString();
      const refused = [
        // curl -d sends application/x-www-form-urlencoded: read as {}, this ran the default 48-hour reconcile (as JSON it is 422).
        await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', apiKey).type('form').send(JSON.stringify({ since })),
        // text/plain read as {} sent a test event (as JSON, `url` is an unknown field: 422).
        await t.http.post('/v1/webhooks/test').set('X-API-Key', apiKey).set('Content-Type', 'text/plain').send(JSON.stringify({ url: 'x' })),
      ];
      // No Content-Type at all (fetch sets none for bytes).
      const bare = await fetch(`${t.baseUrl}/v1/payments/mobilemoney/reconcile`, { method: 'POST', headers: { 'X-API-Key': apiKey }, body: new TextEncoder().encode(JSON.stringify({ since })) });
      refused.push({ status: bare.status, body: await bare.json() } as never);
      for (const res of refused) {
        expect([res.status, res.body]).toEqual([400, { success: false, error: { code: 'BAD_REQUEST', message: expect.stringContaining('Content-Type: application/json'), request_id: expect.any(String) } }]);
      }
      const logs = await t.http.get('/v1/webhooks/logs').set('X-API-Key', apiKey).expect(200);
      expect([logs.body.meta.total, receiver.received.length]).toEqual([0, 0]);
      // Over 100 KiB is 413 whatever the type (it was never read, so never refused).
      const large = await t.http.post('/v1/webhooks/test').set('X-API-Key', apiKey).set('Content-Type', 'text/plain').send('x'.repeat(200 * 1024));
      expect([large.status, large.body.error?.code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
      // JSON with parameters or a +json type is JSON; an empty body needs no type; GET and DELETE carry none.
      const json = await t.http.post('/v1/webhooks/test').set('X-API-Key', apiKey).set('Content-Type', 'application/vnd.api+json; charset=utf-8').send('{"url":"x"}');
      expect([json.status, json.body.error?.code]).toEqual([422, 'VALIDATION_ERROR']);
      await t.http.post('/v1/webhooks/test').set('X-API-Key', apiKey).set('Content-Type', 'text/plain').send('').expect(200);
      await t.http.get('/v1/merchant').set('X-API-Key', apiKey).expect(200);
      await t.http.delete('/v1/merchant/credentials/mobilemoney').set('X-API-Key', apiKey).expect(200);
    } finally {
      await receiver.stop();
    }
  });

  it('a body of just {} is taken whatever its type: a capture sent with curl -d \'{}\' or fetch\'s text/plain captures (decisions.md)', async () => {
    const { apiKey } = await t.createMerchant('Bare Capture');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
      .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'bare-capture-client', client_secret: 'bare-capture-secret' } }).expect(200);
    const approved = async () => {
      const p = (await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `bare-${Date.now()}-${Math.random()}`)
        .send({ provider: 'walletpay', amount: '12.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' }).expect(201)).body.data;
      await fetch(`${p.next_action.url}${p.next_action.url.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
      return p.id as string;
    };
    const viaForm = await approved();
    // curl -d '{}' without -H: application/x-www-form-urlencoded. Was 400 while the order waited, then expired.
    const form = await t.http.post(`/v1/payments/${viaForm}/capture`).set('X-API-Key', apiKey).type('form').send('{}');
    expect([form.status, form.body.data?.status]).toEqual([200, 'completed']);
    const viaFetch = await approved();
    const text = await fetch(`${t.baseUrl}/v1/payments/${viaFetch}/capture`, { method: 'POST', headers: { 'X-API-Key': apiKey }, body: ' { } ' });
    expect([text.status, ((await text.json()) as { data?: { status?: string } }).data?.status]).toEqual([200, 'completed']);
  }, 60_000);

  it('an unknown route is 404 and an anonymous caller 401 before the body is read', async () => {
    const malformed = (req: ReturnType<typeof t.http.post>) => req.set('Content-Type', 'application/json').send('{');
    const cases = [
      [await malformed(t.http.post('/v1/no-such-route')), 404, 'NOT_FOUND'],
      [await malformed(t.http.post('/v1/payments')), 401, 'UNAUTHORIZED'],
      [await malformed(t.http.post('/v1/payments').set('X-API-Key', 'pk_unknown')), 401, 'UNAUTHORIZED'],
      [await t.http.post('/v1/payments').set('Content-Type', 'text/plain').send('x'.repeat(200 * 1024)), 401, 'UNAUTHORIZED'],
      [await t.http.post('/v1/no-such-route').set('Content-Type', 'text/plain').send('hello'), 404, 'NOT_FOUND'],
      // A known route and a caller it knows: the body's own fault.
      [await malformed(t.http.post('/v1/payments').set('X-API-Key', key)), 400, 'BAD_REQUEST'],
    ] as const;
    for (const [res, status, code] of cases) expect([res.status, res.body.error?.code]).toEqual([status, code]);
  });

  it('404 NOT_FOUND in the envelope for an unknown route and method', async () => {
    for (const res of [await t.http.get('/v1/nothing-here'), await t.http.post('/v1/merchant').set('X-API-Key', key), await t.http.get('/')]) {
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
    }
  });

  it('422 VALIDATION_ERROR with field details', async () => {
    const res = await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 42 } });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ field: 'cardpay.secret_key', issue: expect.any(String) }] });
  });

  it('500 INTERNAL_ERROR without internals when the database fails under a request', async () => {
    await t.sql('ALTER TABLE provider_credentials RENAME TO provider_credentials_away');
    try {
      const res = await t.http.get('/v1/merchant/credentials').set('X-API-Key', key);
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ success: false, error: { code: 'INTERNAL_ERROR', message: expect.any(String), request_id: res.headers['x-request-id'] } });
      expect(JSON.stringify(res.body)).not.toMatch(/provider_credentials|relation|at .*\.(ts|js)|select/i);
    } finally {
      await t.sql('ALTER TABLE provider_credentials_away RENAME TO provider_credentials');
    }
  });
});

describe('caching', () => {
  it('no /v1 answer may be kept by a cache: the key is in X-API-Key, which shared caches do not treat as Authorization', async () => {
    for (const path of ['/v1/merchant', '/v1/payments', '/v1/merchant/credentials']) {
      const res = await t.http.get(path).set('X-API-Key', key);
      expect(res.status).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
    }
    const anonymous = await t.http.get('/v1/payments');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['cache-control']).toBe('no-store');
  });
});

describe('request ids', () => {
  it('puts X-Request-Id on every response and honours a well-formed incoming one', async () => {
    const generated = await t.http.get('/healthz');
    expect(generated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const honoured = await t.http.get('/v1/merchant').set('X-API-Key', key).set('X-Request-Id', 'trace-abc.123');
    expect(honoured.headers['x-request-id']).toBe('trace-abc.123');
    const error = await t.http.get('/v1/merchant').set('X-Request-Id', 'trace-err-1');
    expect(error.body.error.request_id).toBe('trace-err-1');
    const hostile = await t.http.get('/healthz').set('X-Request-Id', 'bad id with spaces <script>');
    expect(hostile.headers['x-request-id']).not.toContain(' ');
  });
});

describe('requests the HTTP parser refuses', () => {
  /** A request no HTTP client would send, with one extra header as written. */
  const sendWithHeader = (name: string, value: string) => rawRequest(Number(new URL(t.baseUrl).port), { method: 'GET', target: '/healthz', headers: [[name, value]] });
  const envelopeOf = (res: { headers: Record<string, string>; body: string }) => {
    expect(res.headers).toMatchObject({ connection: 'close', 'content-type': expect.stringMatching(/^application\/json/), 'x-request-id': expect.stringMatching(/^[0-9a-f-]{36}$/) });
    return JSON.parse(res.body);
  };

  it('a 20,000-byte header: 431 in the error envelope, with X-Request-Id', async () => {
    const res = await sendWithHeader('X-Padding', 'a'.repeat(20_000));
    expect(res.status).toBe(431);
    expect(envelopeOf(res)).toEqual({ success: false, error: { code: 'BAD_REQUEST', message: expect.any(String), request_id: res.headers['x-request-id'] } });
    expect(res.body).not.toContain('aaaa');
  });

  it('a control character in a header value: 400 in the error envelope, with X-Request-Id, the value not echoed', async () => {
    const res = await sendWithHeader('X-Note', 'sneaky\x01value');
    expect(res.status).toBe(400);
    expect(envelopeOf(res)).toEqual({ success: false, error: { code: 'BAD_REQUEST', message: expect.any(String), request_id: res.headers['x-request-id'] } });
    expect(res.body).not.toContain('sneaky');
  });
});

describe('operations endpoints', () => {
  it('/healthz and /readyz report the process, the database and the job runner', async () => {
    expect((await t.http.get('/healthz')).status).toBe(200);
    const ready = await t.http.get('/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.data.checks).toEqual({ database: true, job_runner: true });
  });

  it('/metrics exposes request counts and latencies by route and status', async () => {
    await t.http.get('/v1/merchant').set('X-API-Key', key);
    const res = await t.http.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/http_requests_total\{method="GET",route="\/v1\/merchant",status="200"\} \d+/);
    expect(res.text).toMatch(/http_request_duration_seconds_bucket\{.*route="\/v1\/merchant"/);
  });

  it('/openapi.json serves the generated document and /docs renders the reference', async () => {
    const doc = await t.http.get('/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.paths['/v1/merchant/credentials']).toBeDefined();
    expect(doc.body.components.securitySchemes.ApiKey).toEqual({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    const docs = await t.http.get('/docs/');
    expect(docs.status).toBe(200);
    expect(docs.text).toContain('swagger-ui');
    const readme = await t.http.get('/docs/README.md');
    expect(readme.status).toBe(200);
    expect(readme.text).toContain('## Quick start');
  });

  it('/docs is never framed nor loads anything from elsewhere, and Swagger UI\'s stock Petstore page is not served', async () => {
    const docs = await t.http.get('/docs/');
    expect(docs.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(docs.headers['content-security-policy']).toContain("script-src 'self';");
    expect(docs.headers['x-content-type-options']).toBe('nosniff');
    // swagger-ui-dist's own index.html loads swagger-initializer.js, which fetches petstore.swagger.io's document.
    for (const stock of ['/docs/index.html', '/docs/swagger-initializer.js', '/docs/%69ndex.html', '/docs//index.html', '/docs/%73wagger-initializer.js']) {
      const res = await t.http.get(stock);
      expect(res.status).toBe(404);
      expect(res.text).not.toContain('petstore');
    }
  });

  it('the committed openapi.json is what the contract generates', async () => {
    const committed = JSON.parse(await readFile('openapi.json', 'utf8'));
    expect(committed).toEqual(JSON.parse(JSON.stringify(openApiDocument())));
  });
});
