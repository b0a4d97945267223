import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A secret key rolled as in Stripe's Dashboard ("Roll key…", docs.stripe.com/keys): the new key belongs to
 * the SAME account, and the rolled one expires at once or at a chosen time up to 7 days later, after which
 * Stripe answers it 401 `api_key_expired` ("Expired API Key provided: sk_test_****abcd"). The simulator's
 * roll-key control does the same, so a merchant's developer can rehearse rotating a leaked key: the
 * service checks the account of the stored key against each payment's (GET /v1/account), and a payment
 * left pending must still be settled once the new key is stored.
 */
let t: TestService;
beforeAll(async () => {
  // The status sync is run by hand where a test says so; the provider's events settle the rest.
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
});
afterAll(async () => t.stop());

const base = '/sandbox/cardpay';
const newKey = () => `sk_test_${randomUUID().replace(/-/g, '')}`;
const get = (key: string, path: string) => t.http.get(`${base}${path}`).set('Authorization', `Bearer ${key}`);
const post = (key: string, path: string, form: Record<string, string>) => t.http.post(`${base}${path}`).set('Authorization', `Bearer ${key}`).type('form').send(form);
const roll = (key: string, body: unknown = {}) => t.http.post(`${base}/_control/roll-key`).set('Authorization', `Bearer ${key}`).send(body as object);
const accountId = async (key: string): Promise<string> => (await get(key, '/v1/account').expect(200)).body.id as string;
const masked = (key: string) => `${key.slice(0, 8)}****${key.slice(-4)}`;
const expiredAnswer = (key: string) => ({
  error: { type: 'invalid_request_error', code: 'api_key_expired', doc_url: 'https://docs.stripe.com/error-codes/api-key-expired', message: `Expired API Key provided: ${masked(key)}` },
});
/** Time passes for a key rolled with a delay: its expiry moved into the past (by the database's clock, as the simulator reads it). */
const expireNow = (key: string) => t.sql(`UPDATE sandbox_cardpay_keys SET expires_at = now() - interval '1 second' WHERE key_hash = encode(sha256($1::bytea), 'hex')`, [key]);
const visaForm = (extra: Record<string, string> = {}) => ({
  amount: '2000', currency: 'usd', payment_method: 'pm_card_visa', confirm: 'true',
  'automatic_payment_methods[enabled]': 'true', 'automatic_payment_methods[allow_redirects]': 'never', ...extra,
});
const sandboxTrips = async () => Number(/^db_round_trips_total\{pool="sandbox"\} (\S+)$/m.exec((await t.http.get('/metrics').expect(200)).text)?.[1] ?? 0);

describe('the roll-key control', () => {
  it("issues a new key of the same account: GET /v1/account answers the same id; the old key's objects are the new key's; a create with it costs two round trips", async () => {
    const old = newKey();
    const intent = (await post(old, '/v1/payment_intents', visaForm()).expect(200)).body as { id: string };
    const rolled = await roll(old, { expires_in_seconds: 3600 }).expect(200);
    expect(rolled.body).toEqual({ provider: 'cardpay', secret_key: expect.stringMatching(/^sk_test_[A-Za-z0-9]{99}$/), rolled_key_expires_at: expect.any(Number) });
    const fresh = rolled.body.secret_key as string;
    expect(Math.abs(rolled.body.rolled_key_expires_at - (Math.floor(Date.now() / 1000) + 3600))).toBeLessThan(60);

    expect(await accountId(fresh)).toBe(await accountId(old));
    expect((await get(fresh, `/v1/payment_intents/${intent.id}`).expect(200)).body).toMatchObject({ id: intent.id, status: 'succeeded' });
    const before = await sandboxTrips();
    const second = (await post(fresh, '/v1/payment_intents', visaForm()).set('Idempotency-Key', randomUUID()).expect(200)).body as { id: string };
    expect((await sandboxTrips()) - before).toBe(2);
    // Still before the rolled key's expiry: it sees what the new key made.
    expect((await get(old, `/v1/payment_intents/${second.id}`).expect(200)).body.id).toBe(second.id);
    // Another key is still another account.
    expect(await accountId(newKey())).not.toBe(await accountId(fresh));
    await get(newKey(), `/v1/payment_intents/${intent.id}`).expect(404);
  });

  it('expires the rolled key at once by default: 401 api_key_expired on every route, the new key answered; an expired key cannot be rolled', async () => {
    const old = newKey();
    const intent = (await post(old, '/v1/payment_intents', visaForm()).expect(200)).body as { id: string };
    const rolled = await roll(old).expect(200);
    expect(rolled.body.rolled_key_expires_at).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    const fresh = rolled.body.secret_key as string;

    expect((await get(old, `/v1/payment_intents/${intent.id}`).expect(401)).body).toEqual(expiredAnswer(old));
    expect((await get(old, '/v1/account').expect(401)).body).toEqual(expiredAnswer(old));
    expect((await post(old, '/v1/payment_intents', visaForm()).set('Idempotency-Key', randomUUID()).expect(401)).body).toEqual(expiredAnswer(old));
    expect((await get(old, '/v1/no_such_thing').expect(401)).body).toEqual(expiredAnswer(old));
    expect(JSON.stringify((await get(old, '/v1/account')).body)).not.toContain(old);
    // Through the Basic scheme as well.
    await t.http.get(`${base}/v1/account`).set('Authorization', `Basic ${Buffer.from(`${old}:`).toString('base64')}`).expect(401);
    // The controls that act on the caller's account refuse it too, and it cannot be rolled again.
    expect((await t.http.post(`${base}/_control/api-errors`).set('Authorization', `Bearer ${old}`).send({ count: 1 }).expect(401)).body.error).toContain(`Expired API Key provided: ${masked(old)}`);
    expect((await roll(old).expect(401)).body.error).toContain(`Expired API Key provided: ${masked(old)}`);

    expect((await get(fresh, `/v1/payment_intents/${intent.id}`).expect(200)).body.id).toBe(intent.id);
  });

  it('with a delay, the rolled key works until its expiry, then is 401 api_key_expired', async () => {
    const old = newKey();
    const fresh = (await roll(old, { expires_in_seconds: 7 * 24 * 3600 }).expect(200)).body.secret_key as string;
    const intent = (await post(old, '/v1/payment_intents', visaForm()).expect(200)).body as { id: string };
    expect((await get(fresh, `/v1/payment_intents/${intent.id}`).expect(200)).body.id).toBe(intent.id);
    await expireNow(old);
    expect((await get(old, `/v1/payment_intents/${intent.id}`).expect(401)).body).toEqual(expiredAnswer(old));
    expect((await get(fresh, `/v1/payment_intents/${intent.id}`).expect(200)).body.id).toBe(intent.id);
  });

  it('a rolled key can be rolled again, on the same account; a second roll of a key in its delay never puts its expiry off', async () => {
    const first = newKey();
    const second = (await roll(first, { expires_in_seconds: 60 }).expect(200)).body;
    const third = (await roll(second.secret_key, { expires_in_seconds: 0 }).expect(200)).body;
    expect(await accountId(third.secret_key)).toBe(await accountId(first));
    expect((await get(second.secret_key, '/v1/account').expect(401)).body).toEqual(expiredAnswer(second.secret_key));
    // The first key, still in its 60 s, rolled again asking for a week: it keeps its 60 s.
    const again = (await roll(first, { expires_in_seconds: 7 * 24 * 3600 }).expect(200)).body;
    expect(again.rolled_key_expires_at).toBe(second.rolled_key_expires_at);
    expect(await accountId(again.secret_key)).toBe(await accountId(first));
    // A restricted key rolls into a restricted key.
    const restricted = `rk_test_${randomUUID().replace(/-/g, '')}`;
    expect((await roll(restricted).expect(200)).body.secret_key).toMatch(/^rk_test_/);
  });

  it('refuses a bad expires_in_seconds (400) and a missing or refused key (401), rolling nothing; stores hashes of keys, never a key', async () => {
    const key = newKey();
    for (const expires_in_seconds of [-1, 1.5, '60', null, 7 * 24 * 3600 + 1]) {
      const res = await roll(key, { expires_in_seconds }).expect(400);
      expect(res.body).toEqual({ error: 'expires_in_seconds must be a whole number from 0 (now) to 604800 (7 days)' });
    }
    await t.http.post(`${base}/_control/roll-key`).send({}).expect(401);
    await roll('sk_test_invalid_key_0001').expect(401);
    expect(await t.sql(`SELECT 1 FROM sandbox_cardpay_keys WHERE key_hash = encode(sha256($1::bytea), 'hex')`, [key])).toEqual([]);
    await get(key, '/v1/account').expect(200);

    const fresh = (await roll(key, { expires_in_seconds: 60 }).expect(200)).body.secret_key as string;
    const stored = JSON.stringify(await t.sql('SELECT * FROM sandbox_cardpay_keys'));
    expect(stored).not.toContain(key);
    expect(stored).not.toContain(fresh);
    expect(stored).not.toContain(fresh.slice(8));
  });
});

/**
 * What a merchant sees: a card payment left pending (3-D Secure unfinished), the key rolled as after a
 * leak, the new key stored through the credentials API. The service reads the new key's account (GET
 * /v1/account): the same as the payment's, so the payment is still asked about and settled, not left
 * pending as another account's.
 */
describe("a merchant rotating a leaked cardpay key with a payment pending", () => {
  const storeKey = (apiKey: string, cardpay: Record<string, string>) =>
    t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay }).expect(200);
  async function pendingThreeDsPayment(apiKey: string) {
    const res = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', randomUUID())
      .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' })
      .expect(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: expect.stringMatching(/^pi_/) });
    return res.body.data as { id: string; provider_ref: string; next_action: { url: string } };
  }
  const completeThreeDs = async (url: string) => {
    const res = await fetch(`${url}${url.includes('?') ? '&' : '?'}auto=complete`, { redirect: 'manual' });
    expect(res.status).toBe(302);
  };
  const payment = async (apiKey: string, id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', apiKey).expect(200)).body.data;
  const providerAccount = async (id: string) => (await t.sql<{ provider_account: string }>('SELECT provider_account FROM payments WHERE id = $1', [id]))[0]!.provider_account;
  const completedBy = async (id: string) =>
    (await t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND accepted AND to_status = 'completed'`, [id])).map((r) => r.trigger);

  it("the service registered its webhook endpoint: the new key stored is answered as the same account, and the buyer's 3-D Secure then completes the payment by the provider's event", async () => {
    const shop = await t.createMerchant('Rotating Shop');
    const leaked = newKey();
    await storeKey(shop.apiKey, { secret_key: leaked });
    const pending = await pendingThreeDsPayment(shop.apiKey);

    const fresh = (await roll(leaked).expect(200)).body.secret_key as string;
    await storeKey(shop.apiKey, { secret_key: fresh });
    // The endpoint registered under the leaked key is replaced by one registered under the new key, on
    // the same account; nothing is asked of the expired key, so no clean-up failure is logged.
    const endpoints = async () => ((await get(fresh, '/v1/webhook_endpoints?limit=100').expect(200)).body.data as { url: string }[]).filter((e) => e.url.includes(shop.merchantId));
    await eventually(async () => (await endpoints()).length === 1, 10_000, 'one endpoint left for the merchant');
    const log = readFileSync(path.resolve('test-results', 'logs', `${new URL(t.databaseUrl).pathname.slice(1)}.log`), 'utf8');
    expect(log.split('\n').filter((l) => l.includes(shop.merchantId) && l.includes('cleaning up'))).toEqual([]);
    // The same account recorded for what is made under the new key.
    const paid = await t.http.post('/v1/payments').set('X-API-Key', shop.apiKey).set('Idempotency-Key', randomUUID())
      .send({ provider: 'cardpay', amount: '5.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
    expect(paid.body.data.status).toBe('completed');
    expect(await providerAccount(paid.body.data.id)).toBe(await providerAccount(pending.id));
    expect(await providerAccount(pending.id)).toBe(`${await accountId(fresh)}:test`);

    await completeThreeDs(pending.next_action.url);
    await eventually(async () => (await completedBy(pending.id)).length > 0, 15_000, 'the pending payment completed');
    expect(await completedBy(pending.id)).toEqual(['callback:payment_intent.succeeded']);
    expect(await payment(shop.apiKey, pending.id)).toMatchObject({ status: 'completed', provider_ref: pending.provider_ref });
  });

  it('credentials with a webhook secret of their own (no event reaches the service): the status sync finds the payment through the new key and completes it', async () => {
    const shop = await t.createMerchant('Rotating Sync Shop');
    const leaked = newKey();
    await storeKey(shop.apiKey, { secret_key: leaked, webhook_secret: 'whsec_rotating_not_registered' });
    const pending = await pendingThreeDsPayment(shop.apiKey);
    // The buyer finished 3-D Secure at the provider; the service has not heard of it.
    await completeThreeDs(pending.next_action.url);

    const fresh = (await roll(leaked).expect(200)).body.secret_key as string;
    await storeKey(shop.apiKey, { secret_key: fresh, webhook_secret: 'whsec_rotating_not_registered' });
    await t.inContext(() => t.service.container.services.statusSync.syncOne(pending.id, Date.now()));
    expect(await payment(shop.apiKey, pending.id)).toMatchObject({ status: 'completed', provider_ref: pending.provider_ref });
    expect(await completedBy(pending.id)).toHaveLength(1);
  });
});
