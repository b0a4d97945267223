import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Stripe from 'stripe';
import { CardpayClients } from '../../server/providers/cardpay/client.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The cardpay simulator driven by the official `stripe` SDK (the one a merchant would point at the
 * real provider) through the calls a real integration makes, and the refusals the real API answers
 * with: what passes here must pass against api.stripe.com.
 */
let t: TestService;
const clients = new CardpayClients();
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t.stop());

const newKey = () => `sk_test_${randomUUID().replace(/-/g, '')}`;
const sdk = (key = newKey()) => clients.for(`${t.baseUrl}/sandbox/cardpay`, key, 5000);

async function stripeError(promise: Promise<unknown>): Promise<Stripe.errors.StripeError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(Stripe.errors.StripeError);
    return err as Stripe.errors.StripeError;
  }
  throw new Error('expected a StripeError');
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const visaParams = (extra: Partial<Stripe.PaymentIntentCreateParams> = {}): Stripe.PaymentIntentCreateParams => ({
  amount: 2000,
  currency: 'usd',
  payment_method: 'pm_card_visa',
  confirm: true,
  return_url: 'https://shop.example.com/return',
  ...extra,
});

describe('refusals the real API answers with', () => {
  // The account settles in USD: a charge in another currency must convert to at least $0.50 (Stripe's
  // minimum for the settlement currency), not meet that currency's own minimum (£0.30, ¥50).
  it.each([
    [49, 'usd', 'Amount must be at least $0.50 usd'],
    [30, 'gbp', 'Amount must convert to at least 50 cents. GBP 0.30 converts to approximately $0.41 USD.'],
    [50, 'jpy', 'Amount must convert to at least 50 cents. JPY 50 converts to approximately $0.35 USD.'],
    [100, 'kes', 'Amount must convert to at least 50 cents. KES 1.00 converts to approximately $0.01 USD.'],
    [43, 'eur', 'Amount must convert to at least 50 cents. EUR 0.43 converts to approximately $0.49 USD.'],
    [6000, 'isk', 'Amount must convert to at least 50 cents. ISK 60 converts to approximately $0.49 USD.'],
  ])('%i %s is under the settlement minimum: 400 amount_too_small, nothing created', async (amount, currency, message) => {
    const stripe = sdk();
    const err = await stripeError(stripe.paymentIntents.create(visaParams({ amount, currency })));
    expect(err).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(err).toMatchObject({ statusCode: 400, type: 'StripeInvalidRequestError', code: 'amount_too_small', param: 'amount', message });
    expect(err.raw).toMatchObject({ type: 'invalid_request_error', doc_url: expect.stringContaining('amount-too-small') });
    expect((await stripe.paymentIntents.list()).data).toHaveLength(0);
  });

  it('the minimum itself is accepted', async () => {
    expect(await sdk().paymentIntents.create(visaParams({ amount: 50 }))).toMatchObject({ status: 'succeeded', amount: 50 });
  });

  it('another currency is charged once it converts to at least $0.50 (the simulator\'s fixed rates), on create and update', async () => {
    const stripe = sdk();
    // KES 100.00 ≈ $0.77; EUR 0.44 ≈ $0.50 and GBP 0.38 ≈ $0.51 (just over), against EUR 0.43 and GBP 0.30 above.
    for (const [amount, currency] of [[10000, 'kes'], [44, 'eur'], [38, 'gbp'], [75, 'jpy'], [2500, 'mga']] as const) {
      expect(await stripe.paymentIntents.create(visaParams({ amount, currency }))).toMatchObject({ status: 'succeeded', amount, currency });
    }
    const open = await stripe.paymentIntents.create({ amount: 10000, currency: 'kes' });
    const update = await stripeError(stripe.paymentIntents.update(open.id, { amount: 100 }));
    expect(update).toMatchObject({ statusCode: 400, code: 'amount_too_small', param: 'amount', message: expect.stringContaining('KES 1.00 converts to approximately $0.01 USD.') });
    expect(await stripe.paymentIntents.retrieve(open.id)).toMatchObject({ amount: 10000, currency: 'kes' });
  });

  it('an amount of more than eight digits (twelve for IDR) is 400 amount_too_large, nothing created; the largest is charged', async () => {
    const stripe = sdk();
    const usd = await stripeError(stripe.paymentIntents.create(visaParams({ amount: 100_000_000 })));
    expect(usd).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(usd).toMatchObject({ statusCode: 400, code: 'amount_too_large', param: 'amount', message: 'Amount must be no more than $999,999.99' });
    expect(usd.raw).toMatchObject({ type: 'invalid_request_error', doc_url: expect.stringContaining('amount-too-large') });
    const jpy = await stripeError(stripe.paymentIntents.create(visaParams({ amount: 100_000_000, currency: 'jpy' })));
    expect(jpy).toMatchObject({ statusCode: 400, code: 'amount_too_large', param: 'amount' });
    const intent = await stripe.paymentIntents.create(visaParams({ amount: 1000 }));
    const update = await stripeError(stripe.paymentIntents.update(intent.id, { amount: 100_000_000 }));
    expect(update).toMatchObject({ statusCode: 400, code: 'payment_intent_unexpected_state' }); // succeeded: amount no longer changes
    expect((await stripe.paymentIntents.list()).data).toHaveLength(1);
    const open = await stripe.paymentIntents.create({ amount: 1000, currency: 'usd' });
    expect(await stripeError(stripe.paymentIntents.update(open.id, { amount: 100_000_000 }))).toMatchObject({ statusCode: 400, code: 'amount_too_large' });
    expect(await stripe.paymentIntents.create(visaParams({ amount: 99_999_999 }))).toMatchObject({ status: 'succeeded', amount: 99_999_999 });
    expect(await stripe.paymentIntents.create(visaParams({ amount: 999_999_999_999, currency: 'idr' }))).toMatchObject({ status: 'succeeded' });
    expect(await stripeError(stripe.paymentIntents.create(visaParams({ amount: 1_000_000_000_000, currency: 'idr' })))).toMatchObject({ code: 'amount_too_large' });
  });

  it('amounts are in the API units: ISK (two-decimal, whole krónur only) not divisible by 100 and a three-decimal amount not ending in 0 are refused, on intents and refunds', async () => {
    const stripe = sdk();
    const isk = await stripeError(stripe.paymentIntents.create(visaParams({ amount: 12345, currency: 'isk' })));
    expect(isk).toMatchObject({
      statusCode: 400, type: 'StripeInvalidRequestError', code: 'invalid_charge_amount_no_decimal_compatible', param: 'amount',
      message: expect.stringContaining('Currency ISK has become effectively zero-decimal and charged amounts must be evenly divisible by 100'),
    });
    const ugx = await stripeError(stripe.paymentIntents.create(visaParams({ amount: 150050, currency: 'ugx' })));
    expect(ugx).toMatchObject({ statusCode: 400, code: 'invalid_charge_amount_no_decimal_compatible', param: 'amount' });
    const kwd = await stripeError(stripe.paymentIntents.create(visaParams({ amount: 1234, currency: 'kwd' })));
    expect(kwd).toMatchObject({ statusCode: 400, type: 'StripeInvalidRequestError', param: 'amount' });
    expect((await stripe.paymentIntents.list()).data).toHaveLength(0);

    // 500 ISK, 1.230 KWD and 5000 MGA (zero-decimal in the API) are charged as written.
    const kronur = await stripe.paymentIntents.create(visaParams({ amount: 50000, currency: 'isk' }));
    expect(kronur).toMatchObject({ status: 'succeeded', amount: 50000, currency: 'isk' });
    expect(await stripe.paymentIntents.create(visaParams({ amount: 1230, currency: 'kwd' }))).toMatchObject({ status: 'succeeded', amount: 1230 });
    expect(await stripe.paymentIntents.create(visaParams({ amount: 5000, currency: 'mga' }))).toMatchObject({ status: 'succeeded', amount: 5000 });
    const partial = await stripeError(stripe.refunds.create({ payment_intent: kronur.id, amount: 150 }));
    expect(partial).toMatchObject({ statusCode: 400, code: 'invalid_charge_amount_no_decimal_compatible', param: 'amount' });
    expect(await stripe.refunds.create({ payment_intent: kronur.id, amount: 10000 })).toMatchObject({ status: 'succeeded', amount: 10000, currency: 'isk' });
  });

  it('confirming without a return_url while automatic payment methods may redirect (the default since 2023-08-16) is refused', async () => {
    const stripe = sdk();
    const err = await stripeError(stripe.paymentIntents.create({ amount: 2000, currency: 'usd', payment_method: 'pm_card_visa', confirm: true }));
    expect(err).toMatchObject({ statusCode: 400, param: 'return_url', message: expect.stringContaining('you must provide a `return_url`') });
    // The same through the confirm endpoint; allow_redirects=never needs none.
    const intent = await stripe.paymentIntents.create({ amount: 2000, currency: 'usd', payment_method: 'pm_card_visa' });
    expect(intent.automatic_payment_methods).toEqual({ enabled: true, allow_redirects: 'always' });
    const confirmErr = await stripeError(stripe.paymentIntents.confirm(intent.id));
    expect(confirmErr).toMatchObject({ statusCode: 400, param: 'return_url' });
    const noRedirects = await stripe.paymentIntents.create({
      amount: 2000, currency: 'usd', payment_method: 'pm_card_visa', confirm: true, automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
    });
    expect(noRedirects.status).toBe('succeeded');
  });

  it('payment_method_types together with automatic_payment_methods is 400 (only one of them may be given), nothing created', async () => {
    const stripe = sdk();
    const params = visaParams({ payment_method_types: ['card'] });
    for (const automatic of [{ enabled: true }, { enabled: true, allow_redirects: 'never' as const }, { enabled: false }]) {
      const err = await stripeError(stripe.paymentIntents.create({ ...params, automatic_payment_methods: automatic }));
      expect(err).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
      expect(err).toMatchObject({
        statusCode: 400,
        param: 'automatic_payment_methods',
        message: 'You may only specify one of these parameters: ["automatic_payment_methods", "payment_method_types"].',
      });
    }
    expect((await stripe.paymentIntents.list()).data).toHaveLength(0);
    // Either one alone is accepted.
    expect(await stripe.paymentIntents.create(params)).toMatchObject({ status: 'succeeded', automatic_payment_methods: null });
    expect(await stripe.paymentIntents.create(visaParams({ automatic_payment_methods: { enabled: true } }))).toMatchObject({ status: 'succeeded' });
  });

  it('off_session with setup_future_usage is 400 (a card cannot be set up without the cardholder), on create and on confirm; nothing charged or set up', async () => {
    const key = newKey();
    const stripe = sdk(key);
    const account = createHash('sha256').update(key).digest('hex');
    const message =
      'You cannot confirm with the `off_session` parameter when `setup_future_usage` is also set on the PaymentIntent because you cannot set up future usages when processing payments off-session.';
    const created = await stripeError(
      stripe.paymentIntents.create({
        amount: 1000, currency: 'usd', payment_method: 'pm_card_visa', confirm: true, off_session: true, setup_future_usage: 'off_session', return_url: 'https://shop.example.com/r',
      }),
    );
    expect(created).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(created).toMatchObject({ statusCode: 400, type: 'StripeInvalidRequestError', message });
    expect(created.raw).toMatchObject({ type: 'invalid_request_error' });
    expect((await stripe.paymentIntents.list()).data).toHaveLength(0);

    // The intent's setup_future_usage, or the confirm's own: either is refused with off_session, the intent left as it was.
    const withUsage = await stripe.paymentIntents.create({ amount: 1000, currency: 'usd', payment_method: 'pm_card_visa', setup_future_usage: 'off_session' });
    const plain = await stripe.paymentIntents.create({ amount: 1000, currency: 'usd', payment_method: 'pm_card_visa' });
    for (const [intent, extra] of [[withUsage, {}], [plain, { setup_future_usage: 'on_session' as const }]] as const) {
      const confirmed = await stripeError(stripe.paymentIntents.confirm(intent.id, { off_session: true, return_url: 'https://shop.example.com/r', ...extra }));
      expect(confirmed).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
      expect(confirmed).toMatchObject({ statusCode: 400, message });
      expect(await stripe.paymentIntents.retrieve(intent.id)).toMatchObject({
        status: 'requires_confirmation', setup_future_usage: intent.setup_future_usage, latest_charge: null, amount_received: 0,
      });
    }
    expect(await t.sql('SELECT id FROM sandbox_cardpay_payment_methods WHERE account = $1 AND (set_up OR used_with_intent IS NOT NULL)', [account])).toEqual([]);
    // On-session, the same intent is charged and its card set up.
    expect(await stripe.paymentIntents.confirm(withUsage.id, { return_url: 'https://shop.example.com/r' })).toMatchObject({ status: 'succeeded', setup_future_usage: 'off_session' });
  });

  it('off_session counts for the request that gives it only: after an off-session decline, a /confirm with setup_future_usage and no off_session is an on-session confirmation (requires_action), not refused', async () => {
    const stripe = sdk();
    const declined = await stripeError(stripe.paymentIntents.create({
      amount: 2500, currency: 'eur', payment_method: 'pm_card_authenticationRequiredOnSetup', confirm: true, off_session: true, payment_method_types: ['card'],
    }));
    expect(declined).toMatchObject({ statusCode: 402, code: 'authentication_required' });
    const intentId = (declined.raw as { payment_intent: { id: string } }).payment_intent.id;
    // The cardholder is back: the merchant confirms on-session, setting the card up for later.
    const confirmed = await stripe.paymentIntents.confirm(intentId, {
      payment_method: 'pm_card_authenticationRequiredOnSetup', setup_future_usage: 'off_session', return_url: 'https://shop.example.com/r',
    });
    expect(confirmed).toMatchObject({ status: 'requires_action', setup_future_usage: 'off_session', next_action: { type: 'redirect_to_url' } });
  });

  it('a bad secret key is 401 on lists and on unknown paths too, as a StripeAuthenticationError', async () => {
    const bad = sdk('sk_test_invalid_key_0000');
    for (const call of [() => bad.paymentIntents.list(), () => bad.refunds.list(), () => bad.paymentMethods.list({ customer: 'cus_x' })]) {
      const err = await stripeError(call());
      expect(err).toBeInstanceOf(Stripe.errors.StripeAuthenticationError);
      expect(err.statusCode).toBe(401);
    }
    const unknown = await t.http.get('/sandbox/cardpay/v1/not_a_resource').set('Authorization', 'Bearer sk_test_invalid_key_0000');
    expect(unknown.status).toBe(401);
    const known = await t.http.get('/sandbox/cardpay/v1/not_a_resource').set('Authorization', `Bearer ${newKey()}`);
    expect(known.status).toBe(404);
    expect(known.body.error).toMatchObject({ type: 'invalid_request_error', message: expect.stringContaining('Unrecognized request URL') });
  });
});

describe('payment intents: confirm, update, list, expand', () => {
  it('create → update → confirm (3-D Secure answers redirect_to_url because a return_url was given)', async () => {
    const stripe = sdk();
    const created = await stripe.paymentIntents.create({ amount: 1500, currency: 'eur', metadata: { order: '1', drop: 'x' } });
    expect(created.status).toBe('requires_payment_method');
    const updated = await stripe.paymentIntents.update(created.id, {
      amount: 1800,
      payment_method: 'pm_card_threeDSecureRequired',
      metadata: { order: '2', drop: '' },
      description: 'two items',
    });
    expect(updated).toMatchObject({ amount: 1800, status: 'requires_confirmation', metadata: { order: '2' }, description: 'two items' });
    expect(updated.metadata).not.toHaveProperty('drop');
    const tooSmall = await stripeError(stripe.paymentIntents.update(created.id, { amount: 10 }));
    expect(tooSmall).toMatchObject({ code: 'amount_too_small', statusCode: 400 });

    const confirmed = await stripe.paymentIntents.confirm(created.id, { return_url: 'https://shop.example.com/back' });
    expect(confirmed.status).toBe('requires_action');
    expect(confirmed.next_action).toEqual({
      type: 'redirect_to_url',
      // Stripe's capability URL: the id and the page's secret.
      redirect_to_url: { url: expect.stringMatching(new RegExp(`^${t.baseUrl}/sandbox/cardpay/3ds/${created.id}\\?client_secret=src_client_secret_[A-Za-z0-9]{24}$`)), return_url: 'https://shop.example.com/back' },
    });
    await fetch(`${confirmed.next_action!.redirect_to_url!.url}&auto=complete`, { redirect: 'manual' });
    const done = await stripe.paymentIntents.retrieve(created.id);
    expect(done.status).toBe('succeeded');

    const again = await stripeError(stripe.paymentIntents.confirm(created.id, { return_url: 'https://shop.example.com/back' }));
    expect(again).toMatchObject({ statusCode: 400, code: 'payment_intent_unexpected_state' });
    const late = await stripeError(stripe.paymentIntents.update(created.id, { amount: 900 }));
    expect(late).toMatchObject({ statusCode: 400, code: 'payment_intent_unexpected_state' });
    // Metadata may still change after success.
    expect((await stripe.paymentIntents.update(created.id, { metadata: { shipped: 'yes' } })).metadata).toEqual({ order: '2', shipped: 'yes' });
  });

  it('a decline on confirm is a 402 StripeCardError carrying the intent', async () => {
    const stripe = sdk();
    const intent = await stripe.paymentIntents.create({ amount: 1200, currency: 'usd', payment_method: 'pm_card_visa_chargeDeclinedInsufficientFunds' });
    const err = await stripeError(stripe.paymentIntents.confirm(intent.id, { return_url: 'https://shop.example.com/r' }));
    expect(err).toBeInstanceOf(Stripe.errors.StripeCardError);
    expect(err).toMatchObject({ statusCode: 402, code: 'card_declined', decline_code: 'insufficient_funds' });
    expect(err.payment_intent).toMatchObject({ id: intent.id, status: 'requires_payment_method', last_payment_error: { decline_code: 'insufficient_funds' } });
  });

  it('expand[] turns latest_charge (and deeper paths) into objects on create, retrieve and list', async () => {
    const stripe = sdk();
    const created = await stripe.paymentIntents.create({ ...visaParams(), expand: ['latest_charge'] });
    const charge = created.latest_charge as Stripe.Charge;
    expect(charge).toMatchObject({ object: 'charge', status: 'succeeded', amount: 2000, payment_intent: created.id });
    expect(charge).not.toHaveProperty('refunds');

    const plain = await stripe.paymentIntents.retrieve(created.id);
    expect(plain.latest_charge).toBe(charge.id);
    const deep = await stripe.paymentIntents.retrieve(created.id, { expand: ['latest_charge.payment_intent', 'payment_method'] });
    expect(((deep.latest_charge as Stripe.Charge).payment_intent as Stripe.PaymentIntent).id).toBe(created.id);
    expect(deep.payment_method).toMatchObject({ object: 'payment_method', card: { last4: '4242' } });

    const listed = await stripe.paymentIntents.list({ expand: ['data.latest_charge'] });
    expect((listed.data[0]!.latest_charge as Stripe.Charge).id).toBe(charge.id);

    const bad = await stripeError(stripe.paymentIntents.retrieve(created.id, { expand: ['amount'] }));
    expect(bad).toMatchObject({ statusCode: 400, message: 'This property cannot be expanded (amount).' });
  });

  it('lists newest first with limit, has_more and cursors; auto-pagination reads them all', async () => {
    const stripe = sdk();
    const customer = await stripe.customers.create({ email: 'list@example.com' });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await stripe.paymentIntents.create({ amount: 1000 + i, currency: 'usd', customer: i < 3 ? customer.id : undefined })).id);
    const first = await stripe.paymentIntents.list({ limit: 2 });
    expect(first).toMatchObject({ object: 'list', has_more: true, url: '/v1/payment_intents' });
    expect(first.data.map((p) => p.id)).toEqual([ids[4], ids[3]]);
    const next = await stripe.paymentIntents.list({ limit: 2, starting_after: first.data[1]!.id });
    expect(next.data.map((p) => p.id)).toEqual([ids[2], ids[1]]);
    const back = await stripe.paymentIntents.list({ limit: 2, ending_before: next.data[0]!.id });
    expect(back.data.map((p) => p.id)).toEqual([ids[4], ids[3]]);
    expect((await stripe.paymentIntents.list({ limit: 2 }).autoPagingToArray({ limit: 100 })).map((p) => p.id)).toEqual([...ids].reverse());
    expect((await stripe.paymentIntents.list({ customer: customer.id })).data.map((p) => p.id)).toEqual([ids[2], ids[1], ids[0]]);
    // Another key sees none of them.
    expect((await sdk().paymentIntents.list()).data).toEqual([]);
  });
});

describe('refunds and saved payment methods', () => {
  it('GET /v1/refunds by charge and by payment intent; the charge itself has no refunds list', async () => {
    const stripe = sdk();
    const intent = await stripe.paymentIntents.create(visaParams({ amount: 3000 }));
    const r1 = await stripe.refunds.create({ payment_intent: intent.id, amount: 1000 });
    const r2 = await stripe.refunds.create({ payment_intent: intent.id, amount: 500 });
    const byCharge = await stripe.refunds.list({ charge: intent.latest_charge as string });
    expect(byCharge.data.map((r) => r.id)).toEqual([r2.id, r1.id]);
    expect(byCharge.data[0]).toMatchObject({ object: 'refund', amount: 500, status: 'succeeded', charge: intent.latest_charge, payment_intent: intent.id });
    expect((await stripe.refunds.list({ payment_intent: intent.id, limit: 1 })).has_more).toBe(true);
    const charge = await stripe.charges.retrieve(intent.latest_charge as string);
    expect(charge).toMatchObject({ amount_refunded: 1500, refunded: false });
    expect(charge).not.toHaveProperty('refunds');
    const expanded = await stripe.refunds.retrieve(r1.id, { expand: ['charge'] });
    expect((expanded.charge as Stripe.Charge).amount_refunded).toBe(1500);
    const missing = await stripeError(stripe.refunds.list({ charge: 'ch_doesnotexist' }));
    expect(missing).toMatchObject({ statusCode: 400, code: 'resource_missing', param: 'charge' });
  });

  it('test cards whose refunds change later: pm_card_pendingRefund (pending → succeeded), pm_card_refundFail (succeeded → failed)', async () => {
    const stripe = sdk();
    const pending = await stripe.paymentIntents.create(visaParams({ payment_method: 'pm_card_pendingRefund' }));
    const failing = await stripe.paymentIntents.create(visaParams({ payment_method: 'pm_card_refundFail' }));
    const r1 = await stripe.refunds.create({ payment_intent: pending.id });
    const r2 = await stripe.refunds.create({ payment_intent: failing.id, amount: 700 });
    expect(r1.status).toBe('pending');
    expect(r2.status).toBe('succeeded');
    await waitFor(async () => (await stripe.refunds.retrieve(r1.id)).status === 'succeeded', 'the pending refund to succeed');
    await waitFor(async () => (await stripe.refunds.retrieve(r2.id)).status === 'failed', 'the refund to fail');
    expect(await stripe.refunds.retrieve(r2.id)).toMatchObject({ status: 'failed', failure_reason: 'expired_or_canceled_card' });
    expect((await stripe.charges.retrieve(failing.latest_charge as string)).amount_refunded).toBe(0);
  });

  it('a refund made in the dashboard (simulator control) is a refund like any other, without the service\'s metadata', async () => {
    const key = newKey();
    const stripe = sdk(key);
    const intent = await stripe.paymentIntents.create(visaParams({ amount: 5000 }));
    const res = await t.http
      .post('/sandbox/cardpay/dashboard/refunds')
      .set('Authorization', `Bearer ${key}`)
      .type('form')
      .send({ payment_intent: intent.id, amount: '1200' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ object: 'refund', amount: 1200, status: 'succeeded', metadata: {}, payment_intent: intent.id });
    expect((await stripe.refunds.list({ charge: intent.latest_charge as string })).data.map((r) => r.id)).toEqual([res.body.id]);
    const refused = await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', 'Bearer sk_test_invalid_x000').type('form').send({ payment_intent: intent.id });
    expect(refused.status).toBe(401);
  });

  it("a customer's payment methods: GET /v1/payment_methods?customer= and /v1/customers/{id}/payment_methods", async () => {
    const stripe = sdk();
    const customer = await stripe.customers.create({ email: 'cards@example.com' });
    const visa = await stripe.paymentMethods.attach('pm_card_visa', { customer: customer.id });
    const mastercard = await stripe.paymentMethods.attach('pm_card_mastercard', { customer: customer.id });
    const detached = await stripe.paymentMethods.attach('pm_card_amex', { customer: customer.id });
    await stripe.paymentMethods.detach(detached.id);

    const listed = await stripe.paymentMethods.list({ customer: customer.id, type: 'card' });
    expect(listed.data.map((pm) => pm.id).sort()).toEqual([visa.id, mastercard.id].sort());
    const ofCustomer = await stripe.customers.listPaymentMethods(customer.id, { limit: 1 });
    expect(ofCustomer).toMatchObject({ has_more: true, url: `/v1/customers/${customer.id}/payment_methods` });
    expect(ofCustomer.data[0]).toMatchObject({ object: 'payment_method', type: 'card', customer: customer.id });

    const unknown = await stripeError(stripe.customers.listPaymentMethods('cus_doesnotexist'));
    expect(unknown).toMatchObject({ statusCode: 404, code: 'resource_missing' });
  });

  it('pm_card_authenticationRequiredOnSetup: off-session is declined until a payment with setup_future_usage (authenticated) sets it up, then succeeds; on-session always authenticates', async () => {
    const stripe = sdk();
    const customer = await stripe.customers.create({ email: 'setup@example.com' });
    const card = await stripe.paymentMethods.attach('pm_card_authenticationRequiredOnSetup', { customer: customer.id });
    expect(card).toMatchObject({ customer: customer.id, card: { brand: 'visa', last4: '3155' } });
    const charge = (extra: Partial<Stripe.PaymentIntentCreateParams>) =>
      stripe.paymentIntents.create({ amount: 2500, currency: 'eur', customer: customer.id, payment_method: card.id, confirm: true, payment_method_types: ['card'], ...extra });
    const authenticate = async (intent: Stripe.PaymentIntent) => {
      expect(intent).toMatchObject({ status: 'requires_action', next_action: { type: 'redirect_to_url' } });
      await fetch(`${intent.next_action!.redirect_to_url!.url}&auto=complete`, { redirect: 'manual' });
      return stripe.paymentIntents.retrieve(intent.id);
    };

    // Attached only, not set up: an off-session charge needs the cardholder.
    const notSetUp = await stripeError(charge({ off_session: true }));
    expect(notSetUp).toBeInstanceOf(Stripe.errors.StripeCardError);
    expect(notSetUp).toMatchObject({ statusCode: 402, code: 'authentication_required', decline_code: 'authentication_required' });

    // The cardholder authenticates a payment that sets the card up for off-session use.
    const setUp = await authenticate(await charge({ setup_future_usage: 'off_session', return_url: 'https://shop.example.com/r' }));
    expect(setUp).toMatchObject({ status: 'succeeded', setup_future_usage: 'off_session' });

    // From then on, off-session payments go through without authentication…
    for (let i = 0; i < 2; i++) expect(await charge({ off_session: true })).toMatchObject({ status: 'succeeded', next_action: null });
    // …while an on-session one still asks for it.
    const onSession = await charge({ return_url: 'https://shop.example.com/r' });
    expect((await authenticate(onSession)).status).toBe('succeeded');

    // The token itself with setup_future_usage and a customer: attached to that customer once authenticated, and set up.
    const other = await stripe.customers.create({ email: 'setup2@example.com' });
    const first = await authenticate(
      await stripe.paymentIntents.create({
        amount: 2500, currency: 'eur', customer: other.id, payment_method: 'pm_card_authenticationRequiredOnSetup', confirm: true,
        payment_method_types: ['card'], setup_future_usage: 'off_session', return_url: 'https://shop.example.com/r',
      }),
    );
    const saved = (await stripe.paymentMethods.list({ customer: other.id })).data;
    expect(saved.map((pm) => pm.id)).toEqual([first.payment_method]);
    expect(
      await stripe.paymentIntents.create({ amount: 900, currency: 'eur', customer: other.id, payment_method: saved[0]!.id, off_session: true, confirm: true, payment_method_types: ['card'] }),
    ).toMatchObject({ status: 'succeeded' });
  });

  it('customers.create with payment_method attaches it to the new customer, which can then be charged off-session', async () => {
    const stripe = sdk();
    const email = `pm-${randomUUID()}@example.com`;
    const customer = await stripe.customers.create({ email, payment_method: 'pm_card_visa' });
    expect(customer).toMatchObject({ object: 'customer', email });
    const [card, ...others] = (await stripe.paymentMethods.list({ customer: customer.id })).data;
    expect(others).toHaveLength(0);
    expect(card).toMatchObject({ object: 'payment_method', type: 'card', customer: customer.id, card: { brand: 'visa', last4: '4242' } });
    for (let i = 0; i < 2; i++) {
      const charge = await stripe.paymentIntents.create({ amount: 1500, currency: 'usd', customer: customer.id, payment_method: card!.id, off_session: true, confirm: true, payment_method_types: ['card'] });
      expect(charge).toMatchObject({ status: 'succeeded', customer: customer.id, payment_method: card!.id });
    }

    // Refused as an attach would be, and then no customer is made: an unknown id (400, naming the parameter), a declining card (402).
    const unknown = await stripeError(stripe.customers.create({ email, payment_method: 'pm_doesnotexist' }));
    expect(unknown).toMatchObject({ statusCode: 400, code: 'resource_missing', param: 'payment_method', message: "No such PaymentMethod: 'pm_doesnotexist'" });
    const declined = await stripeError(stripe.customers.create({ email, payment_method: 'pm_card_chargeDeclined' }));
    expect(declined).toBeInstanceOf(Stripe.errors.StripeCardError);
    expect(declined).toMatchObject({ statusCode: 402, code: 'card_declined', decline_code: 'generic_decline' });
    expect(await t.sql('SELECT id FROM sandbox_cardpay_customers WHERE email = $1', [email])).toEqual([{ id: customer.id }]);
  });
});
