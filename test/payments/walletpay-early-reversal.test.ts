import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * A walletpay (PayPal) refund or reversal event names only the capture; the service finds the payment by
 * the capture id it stored when the capture was applied. When the capture's answer was lost and its
 * PAYMENT.CAPTURE.COMPLETED is not yet applied, a reversal arrives for a capture the service does not
 * know: the service asks PayPal whose capture it is (GET /v2/payments/captures/{id}: its order id), and,
 * the order being one of its payments, settles the payment from PayPal's order, then records the
 * reversal, once. A reversal of a capture that is not ours is acknowledged.
 */

/** Between the simulator and the service's webhook: holds PAYMENT.CAPTURE.COMPLETED back (503) while `holdCaptures`; records the service's answers. */
class EventStub extends ForwardingStub {
  holdCaptures = true;
  readonly answers: { type: string; resource: string; status: number }[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const event = JSON.parse(req.body.toString('utf8')) as { event_type: string; resource: { id: string } };
    if (this.holdCaptures && event.event_type === 'PAYMENT.CAPTURE.COMPLETED') return { status: 503 };
    // `target` is the webhook's whole URL: the simulator posts to the stub's own path.
    const answer = await forward(this.target);
    this.answers.push({ type: event.event_type, resource: event.resource.id, status: answer.status });
    return { status: answer.status };
  }
}

const CLIENT = { id: `early-reversal-${randomUUID()}`, secret: 'early-reversal-secret' };
let t: TestService;
let stub: EventStub;
let receiver: WebhookReceiver;
let key: string;
let token: string;

const simulator = (method: 'get' | 'post', path: string) =>
  t.http[method](`/sandbox/walletpay${path}`).set('Authorization', `Bearer ${token}`);

beforeAll(async () => {
  stub = new EventStub();
  const stubUrl = `${await stub.start()}/hooks`;
  // No status sync within the test: only the capture's event makes the capture known. Transmissions are
  // sent again after 1, 2, 4, 8 and 16 s: on a loaded host (0.3 s apart) the held capture's resends could
  // run out before the test let them through, and the reversal's with them.
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', SANDBOX_CALLBACK_DELAY_MS: '1000' });
  stub.target = `${t.baseUrl}/v1/webhooks/walletpay`;
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Early Reversal Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(CLIENT.id, CLIENT.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token;
  // The app's webhook points at the stub, which forwards to the service.
  const webhook = await simulator('post', '/v1/notifications/webhooks')
    .send({ url: stubUrl, event_types: [{ name: 'PAYMENT.CAPTURE.COMPLETED' }, { name: 'PAYMENT.CAPTURE.REVERSED' }, { name: 'PAYMENT.CAPTURE.REFUNDED' }] })
    .expect(201);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: CLIENT.id, client_secret: CLIENT.secret, webhook_id: webhook.body.id } }).expect(200);
});
afterAll(async () => {
  await stub.stop();
  await t.stop();
  await receiver.stop();
});

const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;

/** Approves `orderId` on the simulator's page and captures it there, as the service's lost capture would have. */
async function approvedAndCapturedAtTheProvider(orderId: string): Promise<string> {
  await t.http.post(`/sandbox/walletpay/checkoutnow?token=${orderId}`).type('form').send(`token=${orderId}&action=approve`).expect(302);
  const captured = await simulator('post', `/v2/checkout/orders/${orderId}/capture`).set('PayPal-Request-Id', randomUUID()).set('Prefer', 'return=representation').send({}).expect(201);
  return captured.body.purchase_units[0].payments.captures[0].id as string;
}

describe('a reversal of a capture the service does not know yet', () => {
  it('is recorded at once (PayPal says the capture is of our order: the payment completes first), and once', async () => {
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
      .send({ provider: 'walletpay', amount: '30.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    expect(res.status).toBe(201);
    const p = res.body.data as { id: string; provider_ref: string };
    const captureId = await approvedAndCapturedAtTheProvider(p.provider_ref);
    const reversal = await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: captureId, amount: '10.00' }).expect(201);

    // The capture's event is held: the reversal comes first, and is applied at its first delivery.
    const answered = await eventually(() => stub.answers.find((a) => a.type === 'PAYMENT.CAPTURE.REVERSED' && a.resource === reversal.body.id), 30_000, 'the reversal sent');
    expect(answered.status).toBe(200);
    const refunded = await eventually(() => receiver.events('payment.refunded').find((e) => e.json.data.payment_id === p.id), 30_000, 'payment.refunded');
    expect(refunded.json.data).toMatchObject({ payment_id: p.id, status: 'completed', amount_refunded: '10.00' });
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount: '30.00', amount_refunded: '10.00' });
    const [stored] = await t.sql<{ capture_id: string }>(`SELECT provider_data->>'captureId' AS capture_id FROM payments WHERE id = $1`, [p.id]);
    expect(stored!.capture_id).toBe(captureId);

    // PayPal sends the capture's event again: it changes nothing; the reversal stays recorded once.
    stub.holdCaptures = false;
    const capture = await eventually(() => stub.answers.find((a) => a.type === 'PAYMENT.CAPTURE.COMPLETED' && a.resource === captureId), 60_000, 'the capture event delivered');
    expect(capture.status).toBe(200);
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount: '30.00', amount_refunded: '10.00' });
    const refunds = (await t.http.get(`/v1/refunds?payment_id=${p.id}`).set('X-API-Key', key).expect(200)).body.data;
    expect(refunds).toEqual([expect.objectContaining({ amount: '10.00', status: 'completed', provider_ref: reversal.body.id })]);
    expect(receiver.events('payment.refunded').filter((e) => e.json.data.payment_id === p.id)).toHaveLength(1);
    expect(receiver.events('payment.completed').filter((e) => e.json.data.payment_id === p.id)).toHaveLength(1);
  }, 120_000);

  it('a reversal of a capture of no payment of ours is acknowledged', async () => {
    const order = await simulator('post', '/v2/checkout/orders')
      .send({ intent: 'CAPTURE', purchase_units: [{ amount: { currency_code: 'USD', value: '12.00' } }], application_context: { return_url: 'https://elsewhere.example.com/r' } })
      .expect(201);
    stub.holdCaptures = false;
    const captureId = await approvedAndCapturedAtTheProvider(order.body.id);
    const reversal = await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: captureId }).expect(201);
    const answer = await eventually(() => stub.answers.find((a) => a.type === 'PAYMENT.CAPTURE.REVERSED' && a.resource === reversal.body.id), 30_000, 'the reversal sent');
    expect(answer.status).toBe(200);
  }, 60_000);

  it('is refused while more pending payments could own it than are checked (the owner may be among the rest)', async () => {
    // 20 other merchants, each with a pending walletpay payment that could own any refund of 1.00 USD.
    for (let i = 0; i < 20; i += 1) {
      const other = await t.createMerchant(`Crowded Shop ${i}`);
      await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey)
        .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: `crowded-${i}-${randomUUID()}`, client_secret: 'crowded-secret' } }).expect(200);
      await t.http.post('/v1/payments').set('X-API-Key', other.apiKey).set('Idempotency-Key', randomUUID())
        .send({ provider: 'walletpay', amount: '50.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' }).expect(201);
    }
    // A capture made outside the service on this merchant's app: its reversal verifies with none of the 20 checked.
    const order = await simulator('post', '/v2/checkout/orders')
      .send({ intent: 'CAPTURE', purchase_units: [{ amount: { currency_code: 'USD', value: '5.00' } }], application_context: { return_url: 'https://elsewhere.example.com/r' } })
      .expect(201);
    stub.holdCaptures = false;
    const captureId = await approvedAndCapturedAtTheProvider(order.body.id);
    const reversal = await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: captureId, amount: '1.00' }).expect(201);
    const answer = await eventually(() => stub.answers.find((a) => a.type === 'PAYMENT.CAPTURE.REVERSED' && a.resource === reversal.body.id), 30_000, 'the reversal sent');
    expect(answer.status).toBe(409);
  }, 60_000);
});
