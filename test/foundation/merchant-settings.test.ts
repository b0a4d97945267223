import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

let t: TestService;
let key: string;
let merchantId: string;
beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key, merchantId } = await t.createMerchant('Settings Shop'));
});
afterAll(async () => t.stop());

const put = (body: unknown) => t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send(body as object);

describe('GET /v1/merchant', () => {
  it('returns id, name, webhook_url, providers and created_at', async () => {
    const res = await t.http.get('/v1/merchant').set('X-API-Key', key).expect(200);
    expect(res.body).toEqual({
      success: true,
      data: { id: merchantId, name: 'Settings Shop', webhook_url: null, providers: [], created_at: expect.any(String) },
    });
  });
});

describe('PUT /v1/merchant/webhook', () => {
  it('returns a whsec_ secret once and rotates it on re-registration', async () => {
    const first = await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: 'https://shop.example.com/hooks' });
    expect(first.status).toBe(200);
    expect(first.body.data.webhook_url).toBe('https://shop.example.com/hooks');
    // whsec_ + 32 random bytes in the characters base64url and standard base64 share (decisions.md: base64url).
    expect(first.body.data.webhook_secret).toMatch(/^whsec_[A-Za-z0-9]{43}=$/);

    const me = await t.http.get('/v1/merchant').set('X-API-Key', key);
    expect(me.body.data.webhook_url).toBe('https://shop.example.com/hooks');
    expect(JSON.stringify(me.body)).not.toContain(first.body.data.webhook_secret);

    const second = await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: 'https://shop.example.com/hooks' });
    expect(second.body.data.webhook_secret).not.toBe(first.body.data.webhook_secret);
    const stored = await t.sql<{ webhook_secret_enc: string }>('SELECT webhook_secret_enc FROM merchants WHERE id = $1', [merchantId]);
    expect(stored[0]!.webhook_secret_enc).not.toContain(second.body.data.webhook_secret);
    const secret = await t.inContext(() => t.service.container.services.merchants.webhookSecret(merchantId));
    expect(secret).toBe(second.body.data.webhook_secret);
  });

  it('concurrent re-registrations: each answers the URL and secret its own write stored, and the merchant keeps the last write whole', async () => {
    const a = 'https://shop.example.com/concurrent-a';
    const b = 'https://shop.example.com/concurrent-b';
    // Every write, in the order the row took them (an UPDATE waits for the row lock of the one before it
    // to be released at its commit): what the last commit stored is the last line.
    await t.sql(`CREATE TABLE IF NOT EXISTS test_webhook_writes (seq bigserial PRIMARY KEY, merchant_id uuid, webhook_url text, webhook_secret_enc text)`);
    await t.sql(`CREATE OR REPLACE FUNCTION test_log_webhook_write() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN INSERT INTO test_webhook_writes (merchant_id, webhook_url, webhook_secret_enc) VALUES (NEW.id, NEW.webhook_url, NEW.webhook_secret_enc); RETURN NEW; END $$`);
    await t.sql(`CREATE TRIGGER test_log_webhook_write AFTER UPDATE ON merchants FOR EACH ROW EXECUTE FUNCTION test_log_webhook_write()`);
    const open = (sealed: string) => t.service.container.services.merchants.openWebhookSecret(sealed);
    try {
      for (let round = 0; round < 8; round += 1) {
        await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: a }).expect(200);
        await t.sql('DELETE FROM test_webhook_writes');
        // Half of them register the URL already stored, half another one, all at once.
        const answers = await Promise.all([a, b, a, b, a, b].map(async (url) => {
          const res = await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: url });
          expect(res.status).toBe(200);
          return res.body.data as { webhook_url: string; webhook_secret: string };
        }));
        const writes = await t.sql<{ webhook_url: string; webhook_secret_enc: string }>(
          'SELECT webhook_url, webhook_secret_enc FROM test_webhook_writes WHERE merchant_id = $1 ORDER BY seq', [merchantId]);
        // One write per call, each storing exactly the URL and secret its call answered.
        expect(writes.map((w) => ({ webhook_url: w.webhook_url, webhook_secret: open(w.webhook_secret_enc) })).sort((x, y) => x.webhook_secret!.localeCompare(y.webhook_secret!)))
          .toEqual([...answers].sort((x, y) => x.webhook_secret.localeCompare(y.webhook_secret)));
        // What the merchant has now is the last write, whole: URL and secret from the same call.
        const last = writes[writes.length - 1]!;
        const me = await t.http.get('/v1/merchant').set('X-API-Key', key).expect(200);
        expect(me.body.data.webhook_url).toBe(last.webhook_url);
        const secret = await t.inContext(() => t.service.container.services.merchants.webhookSecret(merchantId));
        expect(secret).toBe(open(last.webhook_secret_enc));
        expect(answers).toContainEqual({ webhook_url: last.webhook_url, webhook_secret: secret });
      }
    } finally {
      await t.sql('DROP TRIGGER test_log_webhook_write ON merchants');
      await t.sql('DROP FUNCTION test_log_webhook_write(); DROP TABLE test_webhook_writes');
    }
  }, 30_000);

  it('issues secrets that are base64url and standard base64 at once, each 32 bytes, none repeated', async () => {
    // Three in four draws of 32 random bytes have a + or / in standard base64: twenty rotations would
    // show one if the service issued plain standard base64.
    const secrets: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      const res = await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: 'https://shop.example.com/hooks' }).expect(200);
      secrets.push(res.body.data.webhook_secret);
    }
    for (const secret of secrets) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9]{43}=$/);
      const body = secret.slice('whsec_'.length);
      const asUrl = Buffer.from(body, 'base64url');
      expect(asUrl).toHaveLength(32);
      expect(asUrl.equals(Buffer.from(body, 'base64'))).toBe(true);
      expect(asUrl.toString('base64url')).toBe(body.replace(/=+$/, '')); // canonical: the encoding of its own bytes
    }
    expect(new Set(secrets).size).toBe(secrets.length);
  });

  it('refuses plain http and private addresses when private URLs are not allowed', async () => {
    const strict = await startTestService({ WEBHOOK_ALLOW_PRIVATE_URLS: 'false' });
    try {
      const m = await strict.createMerchant();
      for (const url of ['http://shop.example.com/hook', 'https://127.0.0.1/hook', 'https://10.1.2.3/hook', 'https://[::1]/hook', 'https://192.168.0.10/x']) {
        const res = await strict.http.put('/v1/merchant/webhook').set('X-API-Key', m.apiKey).send({ webhook_url: url });
        expect(res.status).toBe(422);
        expect(res.body.error.details[0].field).toBe('webhook_url');
      }
      const ok = await strict.http.put('/v1/merchant/webhook').set('X-API-Key', m.apiKey).send({ webhook_url: 'https://93.184.215.14/hook' });
      expect(ok.status).toBe(200);
    } finally {
      await strict.stop();
    }
  });

  it('rejects a missing or malformed URL with 422 naming the field', async () => {
    const res = await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: 'not a url' });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: 'webhook_url', issue: expect.any(String) }]);
    const missing = await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({});
    expect(missing.body.error.details).toEqual([{ field: 'webhook_url', issue: 'is required' }]);
  });
});

describe('provider credentials', () => {
  it('masks every secret of all three providers as **** + last four (**** alone up to 8 characters); env and shortcode as given', async () => {
    const card = await put({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_51HxCARD4242', webhook_secret: 'whsec_signing9f1a' } });
    expect(card.status).toBe(200);
    expect(card.body.data).toEqual({ provider: 'cardpay', config_summary: { secret_key: '****4242', webhook_secret: '****9f1a' } });

    const wallet = await put({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'client-id-AB12', client_secret: 'client-secret-CD34', webhook_id: 'WH-1' } });
    expect(wallet.status).toBe(200);
    expect(wallet.body.data.config_summary).toEqual({ env: 'sandbox', client_id: '****AB12', client_secret: '****CD34', webhook_id: 'WH-1' });

    const mobile = await put({
      provider: 'mobilemoney',
      mobilemoney: {
        env: 'sandbox', consumer_key: 'consumer-key-EF56', consumer_secret: 'consumer-secret-GH78',
        passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
        initiator: 'testapi', security_credential: 'Safaricom999!*!XYZ9', nominated_number: '254708374149',
      },
    });
    expect(mobile.status).toBe(200);
    expect(mobile.body.data.config_summary).toEqual({
      env: 'sandbox', consumer_key: '****EF56', consumer_secret: '****GH78', passkey: '****c919', shortcode: '174379',
      initiator: '****tapi', security_credential: '****XYZ9', nominated_number: '****4149',
    });

    const list = await t.http.get('/v1/merchant/credentials').set('X-API-Key', key).expect(200);
    expect(list.body.data.map((c: { provider: string }) => c.provider)).toEqual(['cardpay', 'mobilemoney', 'walletpay']);
    expect(list.body.meta).toEqual({ page: 1, page_size: 3, total: 3 }); // a list: the envelope's meta, all on one page
    expect(JSON.stringify(list.body)).not.toMatch(/sk_test_51HxCARD4242|client-secret-CD34|bfb279f9aa9b/);
    const me = await t.http.get('/v1/merchant').set('X-API-Key', key);
    expect(me.body.data.providers).toEqual(['cardpay', 'mobilemoney', 'walletpay']);
  });

  it('masks every secret as **** and its last four, and one of four characters or fewer as **** alone', async () => {
    const wallet = await put({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'client-8', client_secret: 'abcd' } });
    expect(wallet.status).toBe(200);
    expect(wallet.body.data.config_summary).toMatchObject({ env: 'sandbox', client_id: '****nt-8', client_secret: '****' });
    const list = await t.http.get('/v1/merchant/credentials').set('X-API-Key', key).expect(200);
    const listed = JSON.stringify(list.body.data.find((c: { provider: string }) => c.provider === 'walletpay'));
    expect(listed).not.toMatch(/abcd|client-8/);
    // Five characters: the last four are shown, as for any longer secret.
    const five = await put({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'c-id5', client_secret: 'abcd' } });
    expect(five.body.data.config_summary).toMatchObject({ client_id: '****-id5', client_secret: '****' });
  });

  it('keeps no plaintext secret in the database row', async () => {
    await put({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_PLAINTEXT_CANARY_1', webhook_secret: 'whsec_PLAINTEXT_CANARY_2' } }).expect(200);
    const rows = await t.sql('SELECT * FROM provider_credentials WHERE merchant_id = $1', [merchantId]);
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain('PLAINTEXT_CANARY');
    const card = rows.find((r) => r.provider === 'cardpay')!;
    expect(String(card.secrets_enc)).toMatch(/^v2\./);
    const decrypted = await t.inContext(() => t.service.container.services.credentials.find(merchantId, 'cardpay'));
    // With the Stripe account the key acts on, read when they were stored (payments record it: ProviderGateway.otherAccount).
    expect(decrypted).toEqual({ secret_key: 'sk_test_PLAINTEXT_CANARY_1', webhook_secret: 'whsec_PLAINTEXT_CANARY_2', provider_account: expect.stringMatching(/^acct_/) });
  });

  it('replaces the credentials of one provider and deletes them', async () => {
    await put({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_replaced_9999', webhook_secret: 'whsec_x_0000' } }).expect(200);
    const rows = await t.sql('SELECT count(*)::int AS n FROM provider_credentials WHERE merchant_id = $1 AND provider = $2', [merchantId, 'cardpay']);
    expect(rows[0]!.n).toBe(1);
    await t.http.delete('/v1/merchant/credentials/cardpay').set('X-API-Key', key).expect(200, {
      success: true, data: { provider: 'cardpay', deleted: true },
    });
    expect((await t.http.delete('/v1/merchant/credentials/cardpay').set('X-API-Key', key)).status).toBe(404);
    expect((await t.http.delete('/v1/merchant/credentials/paypal').set('X-API-Key', key)).status).toBe(404);
  });

  it.each([
    ['unknown provider', { provider: 'paypal', paypal: {} }, 'provider'],
    ['sub-object for another provider', { provider: 'cardpay', walletpay: { env: 'sandbox', client_id: 'a', client_secret: 'b' } }, 'cardpay'],
    ['unknown field', { provider: 'cardpay', cardpay: { secret_key: 'sk_test_1', colour: 'blue' } }, 'cardpay.colour'],
    ['missing secret', { provider: 'cardpay', cardpay: {} }, 'cardpay.secret_key'],
    ['bad env', { provider: 'walletpay', walletpay: { env: 'prod', client_id: 'a', client_secret: 'b' } }, 'walletpay.env'],
    ['bad shortcode', { provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'a', consumer_secret: 'b', passkey: 'c', shortcode: 'abc' } }, 'mobilemoney.shortcode'],
  ])('rejects %s with 422 naming the field, and stores nothing', async (_name, body, field) => {
    const before = await t.sql('SELECT provider, config_summary, updated_at FROM provider_credentials WHERE merchant_id = $1 ORDER BY provider', [merchantId]);
    const res = await put(body);
    expect(res.status).toBe(422);
    expect(res.body.success).toBe(false);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    const after = await t.sql('SELECT provider, config_summary, updated_at FROM provider_credentials WHERE merchant_id = $1 ORDER BY provider', [merchantId]);
    expect(after).toEqual(before);
  });
});
