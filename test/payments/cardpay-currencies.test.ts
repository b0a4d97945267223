import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * cardpay amounts in the currencies where Stripe's API units are not ISO 4217's minor units
 * (docs.stripe.com/currencies): MGA is zero-decimal at the provider (ISO: two digits), ISK two-decimal
 * with whole krónur only (ISO: none), KWD three-decimal with a last digit of 0. The merchant's amount is
 * what the simulator charges and refunds — read from the simulator's own rows — and what the provider
 * reports back is recognised as the payment's amount, so payments and refunds complete.
 */
let t: TestService;
let key: string;
let n = 0;
const SECRET_KEY = 'sk_test_currencies_0001';

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('World Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: SECRET_KEY } }).expect(200);
});
afterAll(async () => t.stop());

const pay = (amount: string, currency: string, paymentMethod = 'pm_card_visa') =>
  t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `world-${Date.now()}-${++n}`)
    .send({ provider: 'cardpay', amount, currency, payment_method: paymentMethod, return_url: 'https://shop.example.com/return' });
const refund = (paymentId: string, amount?: string) => t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: paymentId, ...(amount ? { amount } : {}) });
const payment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const chargedAtProvider = async (intentId: string) =>
  (await t.sql<{ amount: string; currency: string }>('SELECT amount::text, currency FROM sandbox_cardpay_intents WHERE id = $1', [intentId]))[0];
/** The provider's refunds of an intent, in its units, smallest first (refunds made within one second have no order there). */
const refundedAtProvider = async (intentId: string) =>
  (await t.sql<{ amount: string }>('SELECT amount::text FROM sandbox_cardpay_refunds WHERE payment_intent = $1 ORDER BY amount', [intentId])).map((r) => r.amount);
const counts = async () =>
  (await t.sql<{ payments: number; intents: number }>('SELECT (SELECT count(*)::int FROM payments) AS payments, (SELECT count(*)::int FROM sandbox_cardpay_intents) AS intents'))[0];

describe('a card payment is charged exactly the merchant amount, in the provider units', () => {
  it.each([
    ['1500', 'JPY', '1500', 'jpy'],
    ['5000', 'MGA', '5000', 'mga'], // ISO writes 5000.00 (500000 minor units); the provider charges 5000
    ['500', 'ISK', '50000', 'isk'], // ISO has no decimals; the provider writes 500 ISK as 50000
    ['12.340', 'KWD', '12340', 'kwd'],
  ])('%s %s is charged as %s %s and completes', async (amount, currency, providerAmount, providerCurrency) => {
    const res = await pay(amount, currency);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'completed', currency });
    expect(await chargedAtProvider(res.body.data.provider_ref)).toEqual({ amount: providerAmount, currency: providerCurrency });
    expect((await payment(res.body.data.id)).integrity).toEqual({ status: 'ok', mismatches: [] });
  });

  it('a 3-D Secure payment in MGA completes by the provider event (whose amount is in the provider units too)', async () => {
    const res = await pay('2500', 'MGA', 'pm_card_threeDSecureRequired');
    expect(res.body.data).toMatchObject({ status: 'pending', next_action: { type: 'redirect' } });
    const url: string = res.body.data.next_action.url;
    const page = await fetch(url);
    expect(await page.text()).toContain('2500 MGA');
    await fetch(`${url}${url.includes('?') ? '&' : '?'}auto=complete`, { redirect: 'manual' });
    await eventually(async () => (await payment(res.body.data.id)).status === 'completed', 10_000, 'the payment_intent.succeeded event');
    expect(await chargedAtProvider(res.body.data.provider_ref)).toEqual({ amount: '2500', currency: 'mga' });
  });

  it.each([
    ['50.50', 'MGA', 'must be a whole number of MGA for cardpay'],
    ['1.234', 'KWD', 'must be a multiple of 0.010 KWD for cardpay'],
    // The provider takes at most eight digits in its units (twelve for IDR): 999,999.99 USD, ¥99,999,999.
    ['1000000.00', 'USD', 'must be at most 999999.99 USD for cardpay'],
    ['100000000', 'JPY', 'must be at most 99999999 JPY for cardpay'],
    ['1000000', 'ISK', 'must be at most 999999 ISK for cardpay'], // 1,000,000 ISK is 100000000 at the provider
  ])('%s %s, which the provider cannot charge, is refused with 422 before anything is written or sent', async (amount, currency, issue) => {
    const before = await counts();
    const res = await pay(amount, currency);
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ field: 'amount', issue: expect.stringContaining(issue) }] });
    expect(await counts()).toEqual(before);
  });
});

describe('the largest amounts', () => {
  it('999,999.99 USD, the largest the provider takes, is charged; 999,999,999.99 IDR, above eight digits, too (twelve there)', async () => {
    const usd = await pay('999999.99', 'USD');
    expect(usd.body.data).toMatchObject({ status: 'completed', amount: '999999.99' });
    expect(await chargedAtProvider(usd.body.data.provider_ref)).toEqual({ amount: '99999999', currency: 'usd' });
    const idr = await pay('999999999.99', 'IDR');
    expect(idr.body.data).toMatchObject({ status: 'completed' });
  });
});

describe('a currency the provider does not support', () => {
  it('IQD (Stripe presents no IQD): the payment fails with the provider reason, nothing is charged', async () => {
    const before = await counts();
    const res = await pay('1000.000', 'IQD');
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringContaining('Invalid currency: iqd.') });
    expect(await counts()).toEqual({ payments: before!.payments + 1, intents: before!.intents });
    const [failed] = await t.sql<{ status: string; failure_reason: string }>(`SELECT status, failure_reason FROM payments WHERE currency = 'IQD'`);
    expect(failed).toEqual({ status: 'failed', failure_reason: expect.stringContaining('Invalid currency: iqd.') });
  });
});

describe('refunds in those currencies refund the merchant amount', () => {
  it('ISK: a partial refund, a dashboard refund and the rest; the payment ends refunded', async () => {
    const p = (await pay('500', 'ISK')).body.data;
    const partial = await refund(p.id, '120');
    expect(partial.status).toBe(201);
    expect(partial.body.data).toMatchObject({ status: 'completed', amount: '120' });
    // Made in the provider dashboard, in the provider units: 10000 is 100 ISK.
    await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${SECRET_KEY}`).type('form')
      .send({ payment_intent: p.provider_ref, amount: '10000' }).expect(200);
    await eventually(async () => (await payment(p.id)).amount_refunded === '220', 10_000, 'the dashboard refund');
    const rest = await refund(p.id);
    expect(rest.body.data).toMatchObject({ status: 'completed', amount: '280' });
    expect(await payment(p.id)).toMatchObject({ status: 'refunded', amount_refunded: '500', integrity: { status: 'ok' } });
    expect(await refundedAtProvider(p.provider_ref)).toEqual(['10000', '12000', '28000']);
  });

  it('MGA and KWD: partial refunds are sent in the provider units and complete', async () => {
    const ariary = (await pay('5000', 'MGA')).body.data;
    expect((await refund(ariary.id, '1200')).body.data).toMatchObject({ status: 'completed', amount: '1200.00' });
    const dinar = (await pay('12.340', 'KWD')).body.data;
    expect((await refund(dinar.id, '1.230')).body.data).toMatchObject({ status: 'completed', amount: '1.230' });
    expect(await refundedAtProvider(ariary.provider_ref)).toEqual(['1200']);
    expect(await refundedAtProvider(dinar.provider_ref)).toEqual(['1230']);
    expect(await payment(ariary.id)).toMatchObject({ status: 'completed', amount_refunded: '1200.00' });
    expect(await payment(dinar.id)).toMatchObject({ status: 'completed', amount_refunded: '1.230' });
  });

  it('a refund the provider cannot take (a fraction of MGA) is 422 on amount: never sent, nothing written', async () => {
    const p = (await pay('5000', 'MGA')).body.data;
    const res = await refund(p.id, '0.50');
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ field: 'amount', issue: expect.stringContaining('must be a whole number of MGA') }] });
    expect(await refundedAtProvider(p.provider_ref)).toEqual([]);
    expect(await t.sql('SELECT 1 FROM refunds WHERE payment_id = $1', [p.id])).toEqual([]);
    expect(await payment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
  });
});
