import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * A walletpay payment whose creation answer was lost: PayPal made the order, the service never learnt its
 * id. The status sync sends the create again with the same PayPal-Request-Id. PayPal keeps that key 6 h
 * (Orders v2: "The server stores keys for 6 hours"): within them it answers the first order; after them
 * the repeat is a new request and PayPal makes a second order. That moves no money: an order is paid only
 * once the buyer approves it at its link (the lost answer showed the first one's to nobody) and the
 * merchant captures it. So the payment takes the new order, the buyer approves it, it is captured once.
 *
 * The create is lost by hand: the simulator's outage answers the service's create 500 (the payment stays
 * pending without a reference), and the order "PayPal made" is created on the wire with the request id the
 * service sends (payment-<id>), as the lost request did.
 */
let t: TestService;
let key: string;
let n = 0;
const CLIENT = { id: 'wallet-lost-creation-client', secret: 'wallet-lost-creation-secret' };

beforeAll(async () => {
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
  ({ apiKey: key } = await t.createMerchant('Wallet Lost Creation Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: CLIENT.id, client_secret: CLIENT.secret } }).expect(200);
});
afterAll(async () => {
  await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'ok' });
  await t.stop();
});

const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const events = async (id: string) => ((await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as { type: string }[]).map((e) => e.type);
const sync = (id: string) => t.inContext(() => t.service.container.services.statusSync.syncOne(id));
const orders = (paymentId: string) =>
  t.sql<{ id: string }>(`SELECT id FROM sandbox_walletpay_orders WHERE client_id = $1 AND purchase_unit->>'custom_id' = $2 ORDER BY created_at`, [CLIENT.id, paymentId]);

/** A payment whose create reached PayPal (the order made with its request id) but whose answer never came back. */
async function createWithLostAnswer(): Promise<{ id: string; lostOrder: string }> {
  await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'error' }).expect(200);
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `wallet-lost-${++n}`)
    .send({ provider: 'walletpay', amount: '21.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
  await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'ok' }).expect(200);
  const id = res.body.data.id as string;
  expect(await getPayment(id)).toMatchObject({ status: 'pending', provider_ref: null });
  const token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(CLIENT.id, CLIENT.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token as string;
  const order = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${token}`).set('PayPal-Request-Id', `payment-${id}`)
    .send({
      intent: 'CAPTURE',
      purchase_units: [{ custom_id: id, amount: { currency_code: 'USD', value: '21.00' } }],
      application_context: { return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' },
    }).expect(201);
  return { id, lostOrder: order.body.id as string };
}

/** The buyer approves the payment's order at its link; the merchant captures. */
async function approveAndCapture(id: string) {
  const approval = (await getPayment(id)).next_action.url as string;
  expect((await fetch(`${approval}&auto=approve`, { redirect: 'manual' })).status).toBe(302);
  return (await t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', key).send({}).expect(200)).body.data;
}

describe('walletpay: the status sync sends a lost create again', () => {
  it('within the 6 h PayPal keeps the request id: PayPal answers the first order, which the payment takes and captures', async () => {
    const { id, lostOrder } = await createWithLostAnswer();
    await t.sql(`UPDATE sandbox_walletpay_orders SET created_at = created_at - interval '2 hours' WHERE id = $1`, [lostOrder]);
    await sync(id);
    expect(await getPayment(id)).toMatchObject({ status: 'pending', provider_ref: lostOrder });
    expect(await approveAndCapture(id)).toMatchObject({ status: 'completed', provider_ref: lostOrder });
    expect(await orders(id)).toEqual([{ id: lostOrder }]);
  });

  it('after them the repeat is a new order at PayPal: the payment takes it (not failed), the buyer approves it and it is captured once', async () => {
    const { id, lostOrder } = await createWithLostAnswer();
    // 7 h later at PayPal: the key is forgotten (and the order, never shown to the buyer, has expired).
    await t.sql(`UPDATE sandbox_walletpay_orders SET created_at = created_at - interval '7 hours' WHERE id = $1`, [lostOrder]);
    await sync(id);
    const [first, second, ...more] = await orders(id);
    expect(more).toEqual([]);
    expect(first!.id).toBe(lostOrder);
    const renewed = await getPayment(id);
    expect(renewed).toMatchObject({ status: 'pending', provider_ref: second!.id, next_action: { url: expect.stringContaining(second!.id) } });

    const done = await approveAndCapture(id);
    expect(done).toMatchObject({ status: 'completed', provider_ref: second!.id });
    expect(await t.sql('SELECT order_id FROM sandbox_walletpay_captures WHERE order_id = ANY($1)', [[lostOrder, second!.id]])).toEqual([{ order_id: second!.id }]);
    expect(await events(id)).toEqual(['payment.completed']);
  });
});
