import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t.stop());

describe('API key authentication', () => {
  it('rejects a request without X-API-Key with 401 UNAUTHORIZED in the envelope', async () => {
    const res = await t.http.get('/v1/merchant');
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ success: false, error: { code: 'UNAUTHORIZED' } });
    expect(res.body.error.request_id).toBe(res.headers['x-request-id']);
  });

  it('rejects an unknown key and a malformed key', async () => {
    for (const key of ['pk_' + 'A'.repeat(43), 'not-a-key', '']) {
      const res = await t.http.get('/v1/merchant').set('X-API-Key', key);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('UNAUTHORIZED');
    }
  });

  it('rejects a revoked key', async () => {
    const { apiKey, keyId } = await t.createMerchant('Revoked Ltd');
    expect((await t.http.get('/v1/merchant').set('X-API-Key', apiKey)).status).toBe(200);
    await t.inContext(() => t.service.container.services.apiKeys.revoke(keyId));
    const res = await t.http.get('/v1/merchant').set('X-API-Key', apiKey);
    expect(res.status).toBe(401);
  });

  it('answers 403 FORBIDDEN naming the missing scope', async () => {
    const { apiKey } = await t.createMerchant('Reader', ['merchant:read']);
    const res = await t.http.put('/v1/merchant/webhook').set('X-API-Key', apiKey).send({ webhook_url: 'https://example.com/hook' });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('FORBIDDEN');
    expect(res.body.error.message).toContain('merchant:write');
  });

  it('checks the key before the body: an anonymous invalid request is 401, not 422', async () => {
    const res = await t.http.put('/v1/merchant/credentials').send({ provider: 'nope' });
    expect(res.status).toBe(401);
  });

  it('stores only a SHA-256 hash of each key', async () => {
    const { apiKey, keyId } = await t.createMerchant('Hash Co');
    const rows = await t.sql<{ key_hash: string }>('SELECT key_hash FROM api_keys WHERE id = $1', [keyId]);
    expect(rows[0]!.key_hash).toMatch(/^[0-9a-f]{64}$/);
    const dump = JSON.stringify(await t.sql('SELECT * FROM api_keys'));
    expect(dump).not.toContain(apiKey);
    expect(apiKey).toMatch(/^pk_[A-Za-z0-9_-]{43}$/);
  });
});

describe('merchant isolation', () => {
  it("shows each key only its own merchant's settings", async () => {
    const a = await t.createMerchant('Merchant A');
    const b = await t.createMerchant('Merchant B');
    await t.http
      .put('/v1/merchant/credentials')
      .set('X-API-Key', a.apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_aaaaaaaa1111', webhook_secret: 'whsec_aaaa2222' } })
      .expect(200);
    const meA = await t.http.get('/v1/merchant').set('X-API-Key', a.apiKey);
    const meB = await t.http.get('/v1/merchant').set('X-API-Key', b.apiKey);
    expect(meA.body.data).toMatchObject({ id: a.merchantId, name: 'Merchant A', providers: ['cardpay'] });
    expect(meB.body.data).toMatchObject({ id: b.merchantId, name: 'Merchant B', providers: [] });
    const credsB = await t.http.get('/v1/merchant/credentials').set('X-API-Key', b.apiKey);
    expect(credsB.body).toEqual({ success: true, data: [], meta: { page: 1, page_size: 0, total: 0 } });
    const del = await t.http.delete('/v1/merchant/credentials/cardpay').set('X-API-Key', b.apiKey);
    expect(del.status).toBe(404);
    const stillThere = await t.http.get('/v1/merchant/credentials').set('X-API-Key', a.apiKey);
    expect(stillThere.body.data).toHaveLength(1);
    expect(stillThere.body.meta).toEqual({ page: 1, page_size: 1, total: 1 });
  });
});
