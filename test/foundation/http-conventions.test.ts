import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { openApiDocument } from '../../server/http/openapi.js';
import { startTestService, type TestService } from '../support/service.js';

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

  it('the committed openapi.json is what the contract generates', async () => {
    const committed = JSON.parse(await readFile('openapi.json', 'utf8'));
    expect(committed).toEqual(JSON.parse(JSON.stringify(openApiDocument())));
  });
});
