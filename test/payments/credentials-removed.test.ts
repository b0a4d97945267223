import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * A merchant who removed a provider's credentials (interface.md: "provider credentials not configured
 * (payments and refunds)" → 422): a refund or capture is refused before anything is written, and a
 * create retried with a key that already answered still replays its payment. The webhook endpoint the
 * service registered for them is deleted at the provider.
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
