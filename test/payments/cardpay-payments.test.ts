import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let merchantId: string;
let counter = 0;

const nextKey = () => `order-${Date.now()}-${++counter}`;
const create = (body: Record<string, unknown>, idempotencyKey = nextKey(), apiKey = key) =>
  t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', idempotencyKey).send(body);
const card = (payment_method: string, extra: Record<string, unknown> = {}) => ({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method, ...extra });

async function paymentStatus(id: string) {
  const res = await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key);
  return res.body.data.status as string;
}

beforeAll(async () => {
  t = await startTestService();
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key, merchantId } = await t.createMerchant('Card Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  // No webhook_secret: the service registers its own callback URL at the provider and keeps the secret.
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_cardshop_0001' } }).expect(200);
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('POST /v1/payments with cardpay', () => {
  it('charges a card at once: 201 completed with the intent id, and payment.completed is delivered', async () => {
    const res = await create(card('pm_card_visa'));
    expect(res.status).toBe(201);
    const p = res.body.data;
    expect(p).toMatchObject({
      merchant_id: merchantId, amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'completed',
      amount_refunded: '0.00', next_action: null, failure_reason: null,
    });
    expect(p.provider_ref).toMatch(/^pi_/);
    expect(p.reference).toMatch(/^[A-Z0-9]{12}$/);
    const delivered = await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === p.id), 10_000, 'payment.completed');
    expect(delivered.json).toEqual({
      id: expect.any(String), type: 'payment.completed', created_at: expect.any(String),
      data: { payment_id: p.id, amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'completed', previous_status: 'pending' },
    });
    expect(delivered.headers['x-event-type']).toBe('payment.completed');
  });

  it('an amount under the provider minimum is refused as the real provider refuses it: 502 naming amount_too_small', async () => {
    const res = await create(card('pm_card_visa', { amount: '0.49' }));
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringContaining('Amount must be at least $0.50 usd') });
  });

  it('KES 1.00 (about $0.01, under the $0.50 the USD account settles at least) is refused as the real provider refuses it: 502 naming the amount, nothing charged', async () => {
    // A merchant of its own, so its simulated account holds only what this request charged.
    const shop = await t.createMerchant('Shilling Shop');
    const secretKey = 'sk_test_shillingshop_0001';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
    const idempotencyKey = nextKey();
    const res = await create(card('pm_card_visa', { amount: '1.00', currency: 'KES' }), idempotencyKey, shop.apiKey);
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({
      code: 'PROVIDER_ERROR',
      message: expect.stringContaining('Amount must convert to at least 50 cents. KES 1.00 converts to approximately $0.01 USD.'),
      details: [{ field: 'amount', issue: expect.stringContaining('KES 1.00 converts to approximately $0.01 USD') }],
    });
    const intents = await t.http.get('/sandbox/cardpay/v1/payment_intents').set('Authorization', `Bearer ${secretKey}`).expect(200);
    expect(intents.body.data).toEqual([]);
    const [failed] = await t.sql<{ status: string; failure_reason: string; provider_ref: string | null }>(
      'SELECT status, failure_reason, provider_ref FROM payments WHERE merchant_id = $1', [shop.merchantId],
    );
    expect(failed).toEqual({ status: 'failed', failure_reason: expect.stringContaining('KES 1.00 converts to approximately $0.01 USD'), provider_ref: null });
    // KES 100.00 (about $0.77) is charged.
    const enough = await create(card('pm_card_visa', { amount: '100.00', currency: 'KES' }), nextKey(), shop.apiKey);
    expect(enough.status).toBe(201);
    expect(enough.body.data).toMatchObject({ status: 'completed', amount: '100.00', currency: 'KES' });
  });

  it('records a decline as failed with the reason and emits payment.failed', async () => {
    const res = await create(card('pm_card_chargeDeclined'));
    expect(res.status).toBe(201);
    // failure_reason is the provider's decline text, as the simulator's generic decline words it.
    expect(res.body.data).toMatchObject({ status: 'failed', failure_reason: 'Your card was declined.' });
    const id = res.body.data.id;
    const failed = await eventually(() => receiver.events('payment.failed').find((e) => e.json.data.payment_id === id), 10_000, 'payment.failed');
    expect(failed.json.data).toEqual({ payment_id: id, amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'failed', previous_status: 'pending' });
  });

  it('asks for 3DS with a redirect next_action; completing it settles the payment by callback', async () => {
    const res = await create(card('pm_card_threeDSecureRequired', { return_url: 'https://shop.example.com/return' }));
    expect(res.status).toBe(201);
    expect(res.body.data.status).toBe('pending');
    expect(res.body.data.next_action).toEqual({ type: 'redirect', url: expect.stringContaining('/sandbox/cardpay/') });
    const id = res.body.data.id;
    const page = await fetch(`${res.body.data.next_action.url}${res.body.data.next_action.url.includes('?') ? '&' : '?'}auto=complete`, { redirect: 'manual' });
    expect([200, 302, 303]).toContain(page.status);
    await eventually(async () => (await paymentStatus(id)) === 'completed', 10_000, '3DS completion');
    const detail = await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key);
    expect(detail.body.data.next_action).toBeNull();
    expect(detail.body.data.provider_response).toEqual(expect.objectContaining({ id: detail.body.data.provider_ref }));
  });

  it('fails a payment whose 3DS authentication fails, with the provider\'s authentication-failure text, and emits payment.failed', async () => {
    const res = await create(card('pm_card_threeDSecureRequired', { return_url: 'https://shop.example.com/return' }));
    expect(res.status).toBe(201);
    const id: string = res.body.data.id;
    const url: string = res.body.data.next_action.url;
    await fetch(`${url}${url.includes('?') ? '&' : '?'}auto=fail`, { redirect: 'manual' });
    await eventually(async () => (await paymentStatus(id)) === 'failed', 10_000, '3DS failure');
    const detail = await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200);
    expect(detail.body.data).toMatchObject({
      status: 'failed',
      next_action: null,
      failure_reason: 'The provided PaymentMethod has failed authentication. You can provide payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent again.',
    });
    const failed = await eventually(() => receiver.events('payment.failed').find((e) => e.json.data.payment_id === id), 10_000, 'payment.failed');
    expect(failed.json.data).toEqual({ payment_id: id, amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'failed', previous_status: 'pending' });
    expect(failed.headers['x-event-type']).toBe('payment.failed');
  });

  it('an intent cancelled at the provider (its dashboard) while 3-D Secure is unfinished: the payment fails by the provider\'s event and payment.failed is sent', async () => {
    const res = await create(card('pm_card_threeDSecureRequired', { return_url: 'https://shop.example.com/return' }));
    expect(res.body.data).toMatchObject({ status: 'pending', next_action: { type: 'redirect' } });
    const { id, provider_ref: intentId } = res.body.data as { id: string; provider_ref: string };
    // Someone cancels the intent in the provider's dashboard (the simulator's API, with the account's key).
    await t.http.post(`/sandbox/cardpay/v1/payment_intents/${intentId}/cancel`).set('Authorization', 'Bearer sk_test_cardshop_0001')
      .type('form').send({ cancellation_reason: 'requested_by_customer' }).expect(200);
    // The status sync's first check is a minute away (STATUS_SYNC_SCHEDULE): only the event can settle it this soon.
    await eventually(async () => (await paymentStatus(id)) === 'failed', 15_000, 'the payment failed');
    const detail = (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
    expect(detail).toMatchObject({ status: 'failed', next_action: null, failure_reason: 'Payment canceled (requested_by_customer)' });
    const failed = await eventually(() => receiver.events('payment.failed').find((e) => e.json.data.payment_id === id), 10_000, 'payment.failed');
    expect(failed.json.data).toEqual({ payment_id: id, amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'failed', previous_status: 'pending' });
    const moves = (await t.http.get(`/v1/payments/${id}/transitions`).set('X-API-Key', key).expect(200)).body.data as { to_status: string; trigger: string; accepted: boolean }[];
    expect(moves.filter((m) => m.to_status === 'failed')).toEqual([expect.objectContaining({ accepted: true, trigger: 'callback:payment_intent.canceled' })]);
  });

  it.each([
    ['zero amount', { amount: '0' }, 'amount'],
    ['negative amount', { amount: -5 }, 'amount'],
    ['too many decimals', { amount: '10.005' }, 'amount'],
    ['decimals for JPY', { amount: '100.5', currency: 'JPY' }, 'amount'],
    ['not a number', { amount: 'ten' }, 'amount'],
    ['above the maximum', { amount: '1000000000.00' }, 'amount'],
    ['unknown currency', { currency: 'XYZ' }, 'currency'],
    ['bad currency format', { currency: 'US' }, 'currency'],
    ['missing payment method', { payment_method: undefined }, 'payment_method'],
    ['unknown field', { colour: 'red' }, 'colour'],
    ['invalid provider', { provider: 'paypal' }, 'provider'],
  ])('rejects %s with 422 naming the field and writes nothing', async (_name, patch, field) => {
    const before = await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM payments');
    const res = await create({ ...card('pm_card_visa'), ...patch });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    const after = await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM payments');
    expect(after[0]!.n).toBe(before[0]!.n);
  });

  it('accepts JSON numbers and formats amounts with the currency digits (JPY 0, KWD 3)', async () => {
    const yen = await create(card('pm_card_visa', { amount: 1500, currency: 'jpy' }));
    expect(yen.status).toBe(201);
    expect(yen.body.data).toMatchObject({ amount: '1500', currency: 'JPY' });
    // cardpay takes three-decimal amounts whose last digit is 0 (cardpay-currencies.test.ts).
    const dinar = await create(card('pm_card_visa', { amount: '12.34', currency: 'KWD' }));
    expect(dinar.body.data.amount).toBe('12.340');
    const cents = await create(card('pm_card_visa', { amount: 10.1 }));
    expect(cents.body.data.amount).toBe('10.10');
  });

  it('requires the Idempotency-Key header', async () => {
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).send(card('pm_card_visa'));
    expect(res.status).toBe(422);
    expect(res.body.error.details[0].field).toBe('idempotency-key');
  });

  it('refuses a provider the merchant has not configured with 422', async () => {
    const res = await create({ provider: 'walletpay', amount: '5.00', currency: 'USD', return_url: 'https://a.example/r', cancel_url: 'https://a.example/c' });
    expect(res.status).toBe(422);
    expect(res.body.error.message).toContain('walletpay credentials are not configured');
  });
});

describe('idempotency', () => {
  it('replays the original payment for the same key and body, with Idempotent-Replayed', async () => {
    const idem = nextKey();
    const first = await create(card('pm_card_visa'), idem);
    const second = await create(card('pm_card_visa'), idem);
    expect(second.status).toBe(200);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.body.data.id).toBe(first.body.data.id);
    const rows = await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM payments WHERE idempotency_key = $1', [idem]);
    expect(rows[0]!.n).toBe(1);
  });

  it('answers 409 for the same key with a different body, and for another merchant', async () => {
    const idem = nextKey();
    await create(card('pm_card_visa'), idem).expect(201);
    const different = await create(card('pm_card_visa', { amount: '26.00' }), idem);
    expect(different.status).toBe(409);
    expect(different.body.error.code).toBe('CONFLICT');
    const other = await t.createMerchant('Other Shop');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_other_0002' } }).expect(200);
    const foreign = await create(card('pm_card_visa'), idem, other.apiKey);
    expect(foreign.status).toBe(409);
  });

  it('20 concurrent requests with one key make one provider payment intent', async () => {
    const idem = nextKey();
    const responses = await Promise.all(Array.from({ length: 20 }, () => create(card('pm_card_visa', { amount: '7.00' }), idem)));
    const ids = new Set(responses.map((r) => r.body.data?.id));
    expect(responses.every((r) => r.status === 200 || r.status === 201)).toBe(true);
    expect(responses.filter((r) => r.status === 201)).toHaveLength(1);
    expect(ids.size).toBe(1);
    const [payment] = await t.sql<{ provider_ref: string; id: string }>('SELECT id, provider_ref FROM payments WHERE idempotency_key = $1', [idem]);
    const intents = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [payment!.id]);
    expect(intents[0]!.n).toBe(1);
  });
});

describe('reading payments', () => {
  it("returns 404 for an unknown id, a non-UUID id and another merchant's payment", async () => {
    const mine = await create(card('pm_card_visa'));
    const other = await t.createMerchant('Nosy Shop');
    expect((await t.http.get(`/v1/payments/${mine.body.data.id}`).set('X-API-Key', other.apiKey)).status).toBe(404);
    expect((await t.http.get('/v1/payments/00000000-0000-4000-8000-000000000000').set('X-API-Key', key)).status).toBe(404);
    const notUuid = await t.http.get('/v1/payments/not-a-uuid').set('X-API-Key', key);
    expect(notUuid.status).toBe(404);
    expect(notUuid.body.error.code).toBe('NOT_FOUND');
  });
});

describe('state machine', () => {
  it('refuses and records a callback-driven move out of a terminal or completed state', async () => {
    const res = await create(card('pm_card_chargeDeclined'));
    const id = res.body.data.id;
    const svc = t.service.container.services.payments;
    const applied = await t.inContext(() => svc.applyUpdate(id, { status: 'completed' }, 'test'));
    expect(applied.transitioned).toBe(false);
    expect(await paymentStatus(id)).toBe('failed');
    const done = await create(card('pm_card_visa'));
    await t.inContext(() => svc.applyUpdate(done.body.data.id, { status: 'failed' }, 'test'));
    await t.inContext(() => svc.applyUpdate(done.body.data.id, { status: 'pending' }, 'test'));
    expect(await paymentStatus(done.body.data.id)).toBe('completed');
    const refused = await t.sql('SELECT from_status, to_status, accepted FROM payment_transitions WHERE payment_id = ANY($1) AND NOT accepted ORDER BY id', [[id, done.body.data.id]]);
    expect(refused).toEqual([
      { from_status: 'failed', to_status: 'completed', accepted: false },
      { from_status: 'completed', to_status: 'failed', accepted: false },
      { from_status: 'completed', to_status: 'pending', accepted: false },
    ]);
  });
});
