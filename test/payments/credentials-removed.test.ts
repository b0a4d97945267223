import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SEND_EVENT_JOB } from '../../server/sandbox/cardpay/events.js';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A merchant who removed a provider's credentials (interface.md: "provider credentials not configured
 * (payments and refunds)" → 422): a refund or capture is refused before anything is written, and a
 * create retried with a key that already answered still replays its payment. The webhook endpoint the
 * service registered for them is deleted at the provider, and so is it when credentials stored again no
 * longer use it.
 */
let t: TestService;
let key: string;
let n = 0;

const cardpayCredentials = { provider: 'cardpay', cardpay: { secret_key: 'sk_test_credentials_removed', webhook_secret: 'whsec_credentials_removed' } };
const walletpayCredentials = { provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'removed-client', client_secret: 'removed-secret' } };
const cardBody = { provider: 'cardpay', amount: '30.00', currency: 'USD', payment_method: 'pm_card_visa' };

const store = (body: object) => t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send(body).expect(200);
const remove = (provider: string) => t.http.delete(`/v1/merchant/credentials/${provider}`).set('X-API-Key', key).expect(200);
const createPayment = (body: object, idem = `removed-${++n}`) => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem).send(body);
const refund = (paymentId: string, idem?: string) => {
  const req = t.http.post('/v1/refunds').set('X-API-Key', key);
  return (idem ? req.set('Idempotency-Key', idem) : req).send({ payment_id: paymentId });
};
const refundsOf = async (paymentId: string) => (await t.http.get(`/v1/refunds?payment_id=${paymentId}`).set('X-API-Key', key).expect(200)).body;

function expectCredentialsError(res: { status: number; body: { success: boolean; error: { code: string; details?: unknown } } }, provider: string) {
  expect(res.status).toBe(422);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe('VALIDATION_ERROR');
  expect(res.body.error.details).toEqual([expect.objectContaining({ field: 'provider', issue: expect.stringContaining(`no ${provider} credentials configured`) })]);
}

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('Credentials Removed Shop'));
});
afterAll(async () => {
  await t?.stop();
});

describe('after a merchant removes a provider’s credentials', () => {
  it('a refund is 422 and writes nothing: no failed refund, no event; the same Idempotency-Key works once credentials are back', async () => {
    await store(cardpayCredentials);
    const paid = await createPayment(cardBody);
    expect(paid.status).toBe(201);
    expect(paid.body.data.status).toBe('completed');
    const paymentId = paid.body.data.id as string;
    await remove('cardpay');

    expectCredentialsError(await refund(paymentId), 'cardpay');
    expectCredentialsError(await refund(paymentId, `refund-${paymentId}`), 'cardpay');
    expect((await refundsOf(paymentId)).meta.total).toBe(0);
    const events = await t.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1 ORDER BY created_at', [paymentId]);
    expect(events.map((e) => e.type)).toEqual(['payment.completed']);

    await store(cardpayCredentials);
    const refunded = await refund(paymentId, `refund-${paymentId}`);
    expect(refunded.status).toBe(201);
    expect(refunded.body.data).toMatchObject({ payment_id: paymentId, status: 'completed', amount: '30.00' });
    expect(refunded.headers['idempotent-replayed']).toBeUndefined();
  });

  it('a create retried with the key of a payment it already made replays that payment (200); a new key is 422', async () => {
    await store(cardpayCredentials);
    const idem = `replay-after-removal-${Date.now()}`;
    const first = await createPayment(cardBody, idem);
    expect(first.status).toBe(201);
    await remove('cardpay');

    const again = await createPayment(cardBody, idem);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toMatchObject({ id: first.body.data.id, status: 'completed' });

    // The same key with another body is still a conflict, not a replay.
    const other = await createPayment({ ...cardBody, amount: '31.00' }, idem);
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('CONFLICT');

    expectCredentialsError(await createPayment(cardBody), 'cardpay');
    const [row] = await t.sql<{ count: string }>(`SELECT count(*) FROM payments WHERE merchant_id = (SELECT merchant_id FROM payments WHERE id = $1)`, [first.body.data.id]);
    expect(Number(row!.count)).toBe(2); // the two created in these tests; nothing for the refused ones
  });

  it('a walletpay capture is 422 and the payment stays pending; with credentials back it captures', async () => {
    await store(walletpayCredentials);
    const created = await createPayment({ provider: 'walletpay', amount: '12.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    expect(created.status).toBe(201);
    const p = created.body.data;
    await fetch(`${p.next_action.url}${p.next_action.url.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
    await remove('walletpay');

    const capture = (idem?: string) => {
      const req = t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key);
      return (idem ? req.set('Idempotency-Key', idem) : req).send({});
    };
    expectCredentialsError(await capture(), 'walletpay');
    expectCredentialsError(await capture(`capture-${p.id}`), 'walletpay');
    const [row] = await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [p.id]);
    expect(row!.status).toBe('pending');

    await store(walletpayCredentials);
    const captured = await capture(`capture-${p.id}`);
    expect(captured.status).toBe(200);
    expect(captured.body.data).toMatchObject({ id: p.id, status: 'completed' });
  });
});

describe('removing cardpay credentials whose webhook endpoint the service registered', () => {
  it("deletes the merchant's endpoint at the provider; another merchant's on the same account stays", async () => {
    const secretKey = 'sk_test_credentials_removed_endpoint';
    const endpoints = async () =>
      (await t.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${secretKey}`).expect(200)).body.data as { url: string }[];
    const { apiKey: otherKey, merchantId: otherId } = await t.createMerchant('Same Account Shop');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', otherKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
    await store({ provider: 'cardpay', cardpay: { secret_key: secretKey } });
    expect(await endpoints()).toHaveLength(2);

    await remove('cardpay');
    const left = await endpoints();
    expect(left).toEqual([expect.objectContaining({ url: expect.stringContaining(`merchant=${otherId}`) })]);
  });

  it('a provider that cannot be reached leaves the removal 200 (the row is gone) and the endpoint where it is', async () => {
    const secretKey = 'sk_test_credentials_removed_outage';
    const endpoints = async () => (await t.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${secretKey}`).expect(200)).body.data;
    await store({ provider: 'cardpay', cardpay: { secret_key: secretKey } });
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      await remove('cardpay');
    } finally {
      await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    const stored = (await t.http.get('/v1/merchant/credentials').set('X-API-Key', key).expect(200)).body.data as { provider: string }[];
    expect(stored.map((c) => c.provider)).not.toContain('cardpay');
    expect(await endpoints()).toHaveLength(1);
  });
});

describe('storing cardpay credentials again, no longer using the endpoint the service registered', () => {
  type Endpoint = { id: string; url: string; secret?: string };
  const uniqueKey = (name: string) => `sk_test_${name}_${randomUUID().replace(/-/g, '')}`;
  /** What the provider's dashboard lists for the account of `secretKey`, at the merchant's URL. */
  const endpointsOf = async (secretKey: string, merchantId: string) =>
    ((await t.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${secretKey}`).expect(200)).body.data as Endpoint[])
      .filter((e) => new URL(e.url).searchParams.get('merchant') === merchantId)
      .map((e) => e.id);
  const merchantUrl = (merchantId: string) => `${t.baseUrl}/v1/webhooks/cardpay?merchant=${merchantId}`;
  /** An endpoint the merchant makes in the provider's dashboard, at the URL the service registers. */
  const madeInDashboard = async (secretKey: string, merchantId: string): Promise<Endpoint> =>
    (await t.http.post('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${secretKey}`).type('form')
      .send({ url: merchantUrl(merchantId), 'enabled_events[]': ['payment_intent.succeeded', 'payment_intent.payment_failed', 'charge.refunded', 'refund.updated'] })
      .expect(200)).body;
  const storeFor = (apiKey: string, cardpay: object) => t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay });

  it("a dashboard endpoint's webhook_secret: the registered endpoint is deleted, the merchant's own at the same URL stays and alone receives the account's events", async () => {
    const { apiKey, merchantId } = await t.createMerchant('Dashboard Endpoint Shop');
    const secretKey = uniqueKey('restore_dashboard');
    await storeFor(apiKey, { secret_key: secretKey }).expect(200);
    const [registered] = await endpointsOf(secretKey, merchantId);
    const own = await madeInDashboard(secretKey, merchantId);

    await storeFor(apiKey, { secret_key: secretKey, webhook_secret: own.secret }).expect(200);
    expect(await endpointsOf(secretKey, merchantId)).toEqual([own.id]);

    // A payment the provider's event completes: every delivery of its events is accepted (the registered
    // endpoint, left, would have been sent each of them too, and refused each with 401 until it gave up).
    const rejected = async () => total(await scrapeMetrics(t), 'provider_callbacks_total', { provider: 'cardpay', outcome: 'rejected' });
    const rejectedBefore = await rejected();
    const created = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', randomUUID())
      .send({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' })
      .expect(201);
    const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
    await fetch(`${p.next_action.url}${p.next_action.url.includes('?') ? '&' : '?'}auto=complete`, { redirect: 'manual' });
    await eventually(
      async () => (await t.sql(`SELECT 1 FROM payment_transitions WHERE payment_id = $1 AND accepted AND trigger = 'callback:payment_intent.succeeded'`, [p.id])).length > 0,
      15_000,
      'the payment completed by the provider event',
    );
    // Every delivery of its events done, none waiting to be sent again.
    await eventually(
      async () => (await t.sql(`SELECT 1 FROM agenda_jobs WHERE name = $1 AND data->>'body' LIKE $2`, [SEND_EVENT_JOB, `%${p.provider_ref}%`])).length === 0,
      10_000,
      'the provider to have delivered every event of the payment',
    );
    expect((await rejected()) - rejectedBefore).toBe(0);
    expect(registered).not.toBe(own.id);
  });

  it("a secret key of another account: the endpoint registered on the replaced key's account is deleted, whether the new one is registered or the merchant's own", async () => {
    const { apiKey, merchantId } = await t.createMerchant('Account Moving Shop');
    const [first, second, third] = [uniqueKey('restore_first'), uniqueKey('restore_second'), uniqueKey('restore_third')];
    await storeFor(apiKey, { secret_key: first }).expect(200);
    expect(await endpointsOf(first, merchantId)).toHaveLength(1);

    await storeFor(apiKey, { secret_key: second }).expect(200);
    expect(await endpointsOf(first, merchantId)).toEqual([]);
    expect(await endpointsOf(second, merchantId)).toHaveLength(1);

    const own = await madeInDashboard(third, merchantId);
    await storeFor(apiKey, { secret_key: third, webhook_secret: own.secret }).expect(200);
    expect(await endpointsOf(second, merchantId)).toEqual([]);
    expect(await endpointsOf(third, merchantId)).toEqual([own.id]);
  });

  it('the registered endpoint\'s own secret stored again keeps it: nothing is deleted', async () => {
    const { apiKey, merchantId } = await t.createMerchant('Endpoint Keeping Shop');
    const secretKey = uniqueKey('restore_keep');
    await storeFor(apiKey, { secret_key: secretKey }).expect(200);
    const [registered] = await endpointsOf(secretKey, merchantId);
    // Its secret as the dashboard reveals it.
    const [row] = await t.sql<{ secret: string }>('SELECT secret FROM sandbox_cardpay_webhook_endpoints WHERE id = $1', [registered]);

    await storeFor(apiKey, { secret_key: secretKey, webhook_secret: row!.secret }).expect(200);
    expect(await endpointsOf(secretKey, merchantId)).toEqual([registered]);
  });

  it("the registered endpoint's secret rolled in the dashboard, stored again: the endpoint (the one in use) stays and its events are accepted", async () => {
    const { apiKey, merchantId } = await t.createMerchant('Secret Rolling Shop');
    const secretKey = uniqueKey('restore_roll');
    await storeFor(apiKey, { secret_key: secretKey }).expect(200);
    const [registered] = await endpointsOf(secretKey, merchantId);
    // "Roll secret" in the dashboard: the same endpoint signs with a new secret from now on.
    const rolled = `whsec_rolled_${randomUUID().replace(/-/g, '')}`;
    await t.sql('UPDATE sandbox_cardpay_webhook_endpoints SET secret = $1 WHERE id = $2', [rolled, registered]);

    await storeFor(apiKey, { secret_key: secretKey, webhook_secret: rolled }).expect(200);
    expect(await endpointsOf(secretKey, merchantId)).toEqual([registered]);

    // A payment the provider's event completes: delivered by that endpoint, signed with the rolled secret.
    const created = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', randomUUID())
      .send({ provider: 'cardpay', amount: '14.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' })
      .expect(201);
    const p = created.body.data as { id: string; next_action: { url: string } };
    await fetch(`${p.next_action.url}${p.next_action.url.includes('?') ? '&' : '?'}auto=complete`, { redirect: 'manual' });
    await eventually(
      async () => (await t.sql(`SELECT 1 FROM payment_transitions WHERE payment_id = $1 AND accepted AND trigger = 'callback:payment_intent.succeeded'`, [p.id])).length > 0,
      15_000,
      'the payment completed by the provider event',
    );
  });

  it('a provider that cannot be reached leaves the store 200 (the new credentials stored) and the endpoint where it is', async () => {
    const { apiKey, merchantId } = await t.createMerchant('Restore Outage Shop');
    const secretKey = uniqueKey('restore_outage');
    await storeFor(apiKey, { secret_key: secretKey }).expect(200);
    const before = await endpointsOf(secretKey, merchantId);
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      const res = await storeFor(apiKey, { secret_key: secretKey, webhook_secret: 'whsec_restore_outage_0001' });
      expect(res.status).toBe(200);
      expect(res.body.data.config_summary).toEqual({ secret_key: expect.any(String), webhook_secret: '****0001' });
    } finally {
      await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    expect(await endpointsOf(secretKey, merchantId)).toEqual(before);
  });
});
