import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { cardpayDrained } from '../support/cardpay-drained.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * Refunds the service learns from the provider rather than makes itself: one made in the provider's
 * dashboard (here the simulator's dashboard control), and one of ours that the provider settles later.
 * The charge events carry no refunds (API ≥ 2022-11-15): the service reads them from the provider.
 */
let t: TestService;
let receiver: WebhookReceiver;
let key: string;
const SECRET_KEY = 'sk_test_provider_refunds_0001';
let counter = 0;

beforeAll(async () => {
  t = await startTestService();
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Refund Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: SECRET_KEY } }).expect(200);
});
afterAll(async () => {
  await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' });
  await t.stop();
  await receiver.stop();
});

async function paid(paymentMethod = 'pm_card_visa', amount = '25.00') {
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `refunds-${Date.now()}-${++counter}`)
    .send({ provider: 'cardpay', amount, currency: 'USD', payment_method: paymentMethod });
  expect(res.status).toBe(201);
  expect(res.body.data.status).toBe('completed');
  return res.body.data as { id: string; provider_ref: string };
}

const dashboardRefund = (intentId: string, amount?: number) =>
  t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${SECRET_KEY}`).type('form')
    .send({ payment_intent: intentId, ...(amount ? { amount: String(amount) } : {}) });

const payment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const refundsOf = async (id: string) => (await t.http.get(`/v1/refunds?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as Record<string, unknown>[];

describe('a refund made in the provider dashboard', () => {
  it('is recorded on the payment and sent to the merchant as payment.refunded; the rest in full makes the payment refunded', async () => {
    const p = await paid();
    const partial = await dashboardRefund(p.provider_ref, 500);
    expect(partial.status).toBe(200);

    const event = await eventually(() => receiver.events('payment.refunded').find((e) => e.json.data.payment_id === p.id), 10_000, 'payment.refunded');
    expect(event.json.data).toMatchObject({ payment_id: p.id, amount: '25.00', currency: 'USD', amount_refunded: '5.00' });
    expect(await payment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '5.00' });
    expect(await refundsOf(p.id)).toEqual([expect.objectContaining({ amount: '5.00', currency: 'USD', status: 'completed' })]);

    // The rest, also in the dashboard: the payment is now refunded.
    expect((await dashboardRefund(p.provider_ref)).status).toBe(200);
    await eventually(async () => (await payment(p.id)).status === 'refunded', 10_000, 'the payment to be refunded');
    expect(await payment(p.id)).toMatchObject({ amount_refunded: '25.00' });
    expect((await refundsOf(p.id)).map((r) => r.amount)).toEqual(['5.00', '20.00']);
  });

  it("a refund the service made itself is not counted twice when the provider's event lists it", async () => {
    const p = await paid();
    const ours = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id, amount: '3.00' });
    expect(ours.status).toBe(201);
    const theirs = await dashboardRefund(p.provider_ref, 200);
    expect(theirs.status).toBe(200);
    await eventually(async () => (await payment(p.id)).amount_refunded === '5.00', 10_000, 'both refunds');
    // Counted once every event the provider had for the payment arrived and every webhook of ours went out.
    await cardpayDrained(t, p.id, [p.provider_ref, ours.body.data.provider_ref, theirs.body.id]);
    expect(await payment(p.id)).toMatchObject({ amount_refunded: '5.00' });
    expect((await refundsOf(p.id)).map((r) => r.amount).sort()).toEqual(['2.00', '3.00']);
    // The merchant is told of each refund once; each provider event (its outcome: its type) is handled once.
    expect(receiver.received.filter((e) => e.json.data?.payment_id === p.id).map((e) => e.json.type).sort())
      .toEqual(['payment.completed', 'payment.refunded', 'payment.refunded']);
    expect((await t.sql<{ outcome: string }>('SELECT outcome FROM provider_events WHERE payment_id = $1', [p.id])).map((e) => e.outcome).sort())
      .toEqual(['charge.refunded', 'charge.refunded', 'payment_intent.succeeded', 'refund.created', 'refund.created']);
  });

  it('arriving while a refund of ours of the same amount is still unanswered, it is its own refund: both are recorded and the payment ends refunded', async () => {
    const p = await paid('pm_card_visa', '100.00');
    // Our refund of 50.00 gets no answer (the provider is down): it stays pending, not yet at the provider.
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    const ours = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id, amount: '50.00' });
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    expect(ours.status).toBe(201);
    const [r1] = await refundsOf(p.id);
    expect(r1).toMatchObject({ id: ours.body.data.id, status: 'pending', amount: '50.00', provider_ref: null });

    // Someone refunds 50.00 in the provider dashboard first: the provider reports it without our refund id.
    const dashboard = await dashboardRefund(p.provider_ref, 5000);
    expect(dashboard.status).toBe(200);
    await eventually(async () => (await payment(p.id)).amount_refunded === '50.00', 10_000, 'the dashboard refund');
    const afterDashboard = await refundsOf(p.id);
    expect(afterDashboard).toEqual([
      expect.objectContaining({ id: r1!.id, status: 'pending', provider_ref: null }),
      expect.objectContaining({ status: 'completed', amount: '50.00', provider_ref: dashboard.body.id }),
    ]);

    // Our refund is still ours: the refund sync finds no trace of it at the provider and sends it; it completes.
    await t.inContext(() => t.service.container.services.refundSync.syncOne(r1!.id as string));
    await eventually(async () => (await payment(p.id)).status === 'refunded', 10_000, 'the payment to be refunded');
    expect(await payment(p.id)).toMatchObject({ amount_refunded: '100.00', integrity: { status: 'ok' } });
    const refunds = await refundsOf(p.id);
    expect(refunds).toEqual([
      expect.objectContaining({ id: r1!.id, status: 'completed', amount: '50.00', provider_ref: expect.stringMatching(/^re_/) }),
      expect.objectContaining({ status: 'completed', amount: '50.00', provider_ref: dashboard.body.id }),
    ]);
    expect(refunds[0]!.provider_ref).not.toBe(dashboard.body.id);
  });
});

describe('refund events (refund.created, refund.updated, refund.failed)', () => {
  it('the endpoint the service registers subscribes to them', async () => {
    const [endpoint] = await t.sql<{ enabled_events: string[] }>('SELECT enabled_events FROM sandbox_cardpay_webhook_endpoints');
    expect(endpoint!.enabled_events).toEqual(expect.arrayContaining(['charge.refunded', 'refund.created', 'refund.updated', 'refund.failed']));
  });

  it('a refund of ours the provider answers pending completes when refund.updated says it succeeded', async () => {
    const p = await paid('pm_card_pendingRefund');
    const res = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id, amount: '4.00' });
    expect(res.status).toBe(201);
    expect(res.body.data.status).toBe('pending');
    const event = await eventually(() => receiver.events('payment.refunded').find((e) => e.json.data.payment_id === p.id), 10_000, 'payment.refunded');
    expect(event.json.data).toMatchObject({ refund_id: res.body.data.id, amount_refunded: '4.00' });
    expect((await t.http.get(`/v1/refunds/${res.body.data.id}`).set('X-API-Key', key).expect(200)).body.data.status).toBe('completed');
    // The events for this charge were all handled: refund.created, charge.refunded, refund.updated — one refund, once.
    expect(await refundsOf(p.id)).toHaveLength(1);
    expect((await payment(p.id)).amount_refunded).toBe('4.00');
  });
});

describe('a full refund while a dashboard refund has not reached the service yet', () => {
  it('asks the provider for exactly the amount reserved: the provider refuses the excess and the refund fails, instead of refunding what remains', async () => {
    // This merchant's credentials carry their own webhook secret: no endpoint is registered, so the
    // dashboard refund below never reaches the service on its own.
    const { apiKey } = await t.createMerchant('Quiet Refund Shop');
    const quietSecretKey = 'sk_test_provider_refunds_quiet';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: quietSecretKey, webhook_secret: 'whsec_provider_refunds_quiet' } }).expect(200);
    const created = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `quiet-${Date.now()}`)
      .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(created.body.data.status).toBe('completed');
    const p = created.body.data as { id: string; provider_ref: string };
    const dashboard = await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${quietSecretKey}`).type('form')
      .send({ payment_intent: p.provider_ref, amount: '500' });
    expect(dashboard.status).toBe(200);

    // The merchant refunds "the rest", which to the service is all 25.00.
    const res = await t.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: p.id });
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringContaining('cardpay refused the refund') });
    const refunds = (await t.http.get(`/v1/refunds?payment_id=${p.id}`).set('X-API-Key', apiKey).expect(200)).body.data;
    expect(refunds).toEqual([expect.objectContaining({ amount: '25.00', status: 'failed' })]);
    // At the provider: the dashboard's 5.00 and nothing else (before, the provider refunded the 20.00 left
    // and our 25.00 refund stayed pending for ever on an amount mismatch).
    const atProvider = await t.sql<{ amount: string }>('SELECT amount::text FROM sandbox_cardpay_refunds WHERE payment_intent = $1', [p.provider_ref]);
    expect(atProvider).toEqual([{ amount: '500' }]);
  });
});

describe('a refund event that arrives before the payment is completed here (the provider sends events in no guaranteed order)', () => {
  const QUIET_KEY = 'sk_test_provider_refunds_early';
  const QUIET_SECRET = 'whsec_provider_refunds_early';
  let quietKey: string;
  let quietReceiver: WebhookReceiver;
  beforeAll(async () => {
    // Its own webhook secret: no endpoint is registered, so only the events posted below reach the service.
    ({ apiKey: quietKey } = await t.createMerchant('Early Refund Shop'));
    quietReceiver = await new WebhookReceiver().start();
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', quietKey).send({ webhook_url: quietReceiver.url }).expect(200);
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', quietKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: QUIET_KEY, webhook_secret: QUIET_SECRET } }).expect(200);
  });
  afterAll(async () => quietReceiver.stop());

  const atProvider = (path: string) => t.http.get(`/sandbox/cardpay${path}`).set('Authorization', `Bearer ${QUIET_KEY}`).expect(200);
  const deliver = (type: string, object: unknown) => {
    const body = JSON.stringify({ id: `evt_early_${++counter}_${Date.now()}`, object: 'event', type, created: Math.floor(Date.now() / 1000), data: { object } });
    return t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, QUIET_SECRET)).send(body);
  };

  /** A 3-D Secure payment the cardholder completed at the provider; refunded 5.00 in the dashboard before any event reached us. */
  async function paidAndRefundedUnseen() {
    const created = await t.http.post('/v1/payments').set('X-API-Key', quietKey).set('Idempotency-Key', `early-${Date.now()}-${++counter}`)
      .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/return' });
    expect(created.body.data).toMatchObject({ status: 'pending', next_action: { type: 'redirect' } });
    const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
    await fetch(`${p.next_action.url}${p.next_action.url.includes('?') ? '&' : '?'}auto=complete`, { redirect: 'manual' });
    await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${QUIET_KEY}`).type('form')
      .send({ payment_intent: p.provider_ref, amount: '500' }).expect(200);
    const intent = (await atProvider(`/v1/payment_intents/${p.provider_ref}`)).body;
    const charge = (await atProvider(`/v1/charges/${intent.latest_charge}`)).body;
    expect(charge).toMatchObject({ amount_refunded: 500 });
    return { p, intent, charge };
  }

  it('charge.refunded first, payment_intent.succeeded second: the refund is recorded and the merchant hears payment.refunded', async () => {
    const { p, intent, charge } = await paidAndRefundedUnseen();
    expect((await deliver('charge.refunded', charge)).status).toBe(200);
    expect((await deliver('payment_intent.succeeded', intent)).status).toBe(200);

    const refunded = await eventually(() => quietReceiver.events('payment.refunded').find((e) => e.json.data.payment_id === p.id), 10_000, 'payment.refunded');
    expect(refunded.json.data).toMatchObject({ status: 'completed', amount: '25.00', amount_refunded: '5.00' });
    const after = (await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', quietKey).expect(200)).body.data;
    expect(after).toMatchObject({ status: 'completed', amount_refunded: '5.00', integrity: { status: 'ok' } });
    const refunds = (await t.http.get(`/v1/refunds?payment_id=${p.id}`).set('X-API-Key', quietKey).expect(200)).body.data;
    expect(refunds).toEqual([expect.objectContaining({ amount: '5.00', status: 'completed' })]);
    await eventually(() => quietReceiver.events('payment.completed').some((e) => e.json.data.payment_id === p.id), 10_000, 'payment.completed');
  });

  it("a payment whose create answer was lost (no intent id recorded): charge.refunded names it by the charge's metadata; the payment is completed and the refund recorded", async () => {
    await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 2 }).expect(200);
    const created = await t.http.post('/v1/payments').set('X-API-Key', quietKey).set('Idempotency-Key', `early-lost-${Date.now()}-${++counter}`)
      .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
    await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 0 }).expect(200);
    expect(created.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = created.body.data.id as string;
    const [row] = await t.sql<{ id: string; latest_charge: string }>(`SELECT id, latest_charge FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [id]);
    await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${QUIET_KEY}`).type('form')
      .send({ payment_intent: row!.id, amount: '500' }).expect(200);
    const charge = (await atProvider(`/v1/charges/${row!.latest_charge}`)).body;

    // The refund's event comes before the intent's (or the intent's was refused while we were down).
    expect((await deliver('charge.refunded', charge)).status).toBe(200);
    const after = (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', quietKey).expect(200)).body.data;
    expect(after).toMatchObject({ status: 'completed', provider_ref: row!.id, amount_refunded: '5.00', integrity: { status: 'ok' } });
    const refunds = (await t.http.get(`/v1/refunds?payment_id=${id}`).set('X-API-Key', quietKey).expect(200)).body.data;
    expect(refunds).toEqual([expect.objectContaining({ amount: '5.00', status: 'completed' })]);
    await eventually(() => quietReceiver.events('payment.refunded').find((e) => e.json.data.payment_id === id), 10_000, 'payment.refunded');
  });

  it.each([
    ['the provider is down', 'outage', 502],
    ["the provider's answer about the payment is refused (another amount): the payment stays pending", 'misreport', 409],
  ])('when %s, the refund event is answered non-2xx and not consumed: the same event sent again is applied', async (_case, trouble, status) => {
    const { p, charge } = await paidAndRefundedUnseen();
    const body = JSON.stringify({ id: `evt_early_retry_${++counter}_${Date.now()}`, object: 'event', type: 'charge.refunded', created: Math.floor(Date.now() / 1000), data: { object: charge } });
    const send = () => t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, QUIET_SECRET)).send(body);
    const payment = async () => (await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', quietKey).expect(200)).body.data;
    if (trouble === 'outage') await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    else await t.http.post('/sandbox/cardpay/_control/misreport').send({ amount: 1 }).expect(200);
    const refused = await send();
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    await t.http.post('/sandbox/cardpay/_control/misreport').send({}).expect(200);
    expect(refused.status).toBe(status);
    expect(await payment()).toMatchObject({ status: 'pending', amount_refunded: '0.00' });
    expect(await t.sql('SELECT 1 FROM refunds WHERE payment_id = $1', [p.id])).toEqual([]);

    // The provider's retry of the same event: now the payment is asked about, completed, and refunded.
    expect((await send()).status).toBe(200);
    expect(await payment()).toMatchObject({ status: 'completed', amount_refunded: '5.00' });
  });
});
