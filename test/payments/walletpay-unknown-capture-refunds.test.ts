import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * A walletpay (PayPal) refund or reversal event names only the capture. When the service has stored no
 * such capture, it asks PayPal whose it is (GET /v2/payments/captures/{id} with the credentials that
 * verified the event: supplementary_data.related_ids.order_id) instead of guessing from the pending
 * payments that could own it: a capture made outside the service is acknowledged at once, even at a
 * merchant with many pending payments of that amount; while PayPal cannot be asked, the event is refused
 * without being consumed, and applied when PayPal sends it again.
 */

/**
 * In front of the simulator's API (the service's WALLETPAY_BASE_URL): records capture lookups, fails them
 * while `captureLookupDown`, and answers them without the capture's order id while `withoutOrderId`.
 */
class ProviderStub extends ForwardingStub {
  captureLookupDown = false;
  withoutOrderId = false;
  readonly captureLookups: { captureId: string; status: number }[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const lookup = req.method === 'GET' ? /\/v2\/payments\/captures\/([^/?]+)$/.exec(req.url) : null;
    if (!lookup) return forward();
    if (this.captureLookupDown) {
      this.captureLookups.push({ captureId: lookup[1]!, status: 503 });
      return jsonAnswer(503, { name: 'SERVICE_UNAVAILABLE', message: 'Service Unavailable.', debug_id: 'stub0000000001' });
    }
    const answer = await forward();
    this.captureLookups.push({ captureId: lookup[1]!, status: answer.status });
    if (this.withoutOrderId && answer.status === 200) {
      const { supplementary_data: _dropped, ...capture } = JSON.parse(answer.body.toString('utf8')) as Record<string, unknown>;
      return jsonAnswer(200, capture);
    }
    return answer;
  }
}

/**
 * Between the simulator and the service's webhook: holds PAYMENT.CAPTURE.COMPLETED of `heldOrders` back
 * (503); records the service's answers. Events pass unchanged: their certificate URL names the
 * simulator's public address, not the provider stub's, so the service verifies them by the
 * verify-webhook-signature postback (through the provider stub).
 */
class EventStub extends ForwardingStub {
  readonly heldOrders = new Set<string>();
  readonly answers: { type: string; resource: string; transmissionId: string; status: number }[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const event = JSON.parse(req.body.toString('utf8')) as { event_type: string; resource: { id: string; supplementary_data?: { related_ids?: { order_id?: string } } } };
    const orderId = event.resource.supplementary_data?.related_ids?.order_id;
    if (event.event_type === 'PAYMENT.CAPTURE.COMPLETED' && orderId && this.heldOrders.has(orderId)) return { status: 503 };
    const answer = await forward(this.target);
    this.answers.push({ type: event.event_type, resource: event.resource.id, transmissionId: String(req.headers['paypal-transmission-id']), status: answer.status });
    return { status: answer.status };
  }

  of(resource: string) {
    return this.answers.filter((a) => a.resource === resource);
  }
}

const CLIENT = { id: `unknown-capture-${randomUUID()}`, secret: 'unknown-capture-secret' };
let t: TestService;
let provider: ProviderStub;
let events: EventStub;
let receiver: WebhookReceiver;
let key: string;
let merchantId: string;
let token: string;

const simulator = (method: 'get' | 'post', path: string) =>
  t.http[method](`/sandbox/walletpay${path}`).set('Authorization', `Bearer ${token}`);

beforeAll(async () => {
  provider = new ProviderStub();
  const providerUrl = await provider.start();
  events = new EventStub();
  const eventsUrl = `${await events.start()}/hooks`;
  // The service reaches PayPal through the provider stub.
  t = await startTestService({ WALLETPAY_BASE_URL: `${providerUrl}/sandbox/walletpay`, STATUS_SYNC_SCHEDULE: '1h', SANDBOX_CALLBACK_DELAY_MS: '1000' });
  provider.target = t.baseUrl;
  events.target = `${t.baseUrl}/v1/webhooks/walletpay`;
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key, merchantId } = await t.createMerchant('Busy Wallet Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(CLIENT.id, CLIENT.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token;
  const webhook = await simulator('post', '/v1/notifications/webhooks')
    .send({ url: eventsUrl, event_types: [{ name: 'PAYMENT.CAPTURE.COMPLETED' }, { name: 'PAYMENT.CAPTURE.REVERSED' }, { name: 'PAYMENT.CAPTURE.REFUNDED' }] })
    .expect(201);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: CLIENT.id, client_secret: CLIENT.secret, webhook_id: webhook.body.id } }).expect(200);
});
afterAll(async () => {
  await events.stop();
  await provider.stop();
  await t.stop();
  await receiver.stop();
});

const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const refundsOf = async (id: string) => (await t.http.get(`/v1/refunds?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as unknown[];

async function pendingPayment(amount: string): Promise<{ id: string; provider_ref: string }> {
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
    .send({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
  expect(res.status).toBe(201);
  return res.body.data;
}

/** Approves `orderId` on the simulator's page and captures it there (not through the service). */
async function approvedAndCapturedAtTheProvider(orderId: string): Promise<string> {
  await t.http.post(`/sandbox/walletpay/checkoutnow?token=${orderId}`).type('form').send(`token=${orderId}&action=approve`).expect(302);
  const captured = await simulator('post', `/v2/checkout/orders/${orderId}/capture`).set('PayPal-Request-Id', randomUUID()).set('Prefer', 'return=representation').send({}).expect(201);
  return captured.body.purchase_units[0].payments.captures[0].id as string;
}

describe('a refund event for a capture the service has not stored', () => {
  it('of a capture made outside the service, at a merchant with pending payments of that amount: acknowledged at once, nothing recorded', async () => {
    const pending = [await pendingPayment('20.00'), await pendingPayment('20.00'), await pendingPayment('20.00')];
    // Another integration on the same PayPal app: its order, captured and refunded at PayPal.
    const order = await simulator('post', '/v2/checkout/orders')
      .send({ intent: 'CAPTURE', purchase_units: [{ amount: { currency_code: 'USD', value: '20.00' } }], application_context: { return_url: 'https://elsewhere.example.com/r' } })
      .expect(201);
    const captureId = await approvedAndCapturedAtTheProvider(order.body.id);
    const refund = await simulator('post', `/v2/payments/captures/${captureId}/refund`).set('PayPal-Request-Id', randomUUID()).set('Prefer', 'return=representation')
      .send({ amount: { currency_code: 'USD', value: '20.00' } }).expect(201);

    const first = await eventually(() => events.of(refund.body.id)[0], 30_000, 'the refund event delivered');
    expect(first).toMatchObject({ type: 'PAYMENT.CAPTURE.REFUNDED', status: 200 });
    expect(provider.captureLookups).toContainEqual({ captureId, status: 200 });
    for (const p of pending) {
      expect(await getPayment(p.id)).toMatchObject({ status: 'pending', amount_refunded: '0.00' });
      expect(await refundsOf(p.id)).toEqual([]);
    }
    const [recorded] = await t.sql<{ n: string }>('SELECT count(*)::text AS n FROM refunds WHERE merchant_id = $1', [merchantId]);
    expect(recorded!.n).toBe('0');
    const [inbox] = await t.sql<{ n: string }>("SELECT count(*)::text AS n FROM provider_events WHERE provider = 'walletpay' AND event_id = $1", [first.transmissionId]);
    expect(inbox!.n).toBe('0');
    // Not sent again: the first delivery was the answer.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(events.of(refund.body.id)).toHaveLength(1);
  }, 60_000);

  it('while PayPal cannot be asked whose capture it is: refused, nothing consumed; the event sent again is applied', async () => {
    const p = await pendingPayment('40.00');
    // The capture's answer is lost (captured at PayPal, not through the service) and its event held back.
    events.heldOrders.add(p.provider_ref);
    const captureId = await approvedAndCapturedAtTheProvider(p.provider_ref);
    provider.captureLookupDown = true;
    const reversal = await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: captureId, amount: '15.00' }).expect(201);

    const refused = await eventually(() => events.of(reversal.body.id)[0], 30_000, 'the reversal delivered');
    expect(refused.status).toBeGreaterThanOrEqual(500);
    expect(provider.captureLookups).toContainEqual({ captureId, status: 503 });
    expect(await getPayment(p.id)).toMatchObject({ status: 'pending', amount_refunded: '0.00' });
    expect(await refundsOf(p.id)).toEqual([]);
    const [inbox] = await t.sql<{ n: string }>("SELECT count(*)::text AS n FROM provider_events WHERE provider = 'walletpay' AND event_id = $1", [refused.transmissionId]);
    expect(inbox!.n).toBe('0');

    // PayPal answers again: the same transmission, sent again, is applied (the payment settled from PayPal's order first).
    provider.captureLookupDown = false;
    const applied = await eventually(() => events.of(reversal.body.id).find((a) => a.status === 200), 60_000, 'the reversal applied');
    expect(applied.transmissionId).toBe(refused.transmissionId);
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount: '40.00', amount_refunded: '15.00' });
    expect(await refundsOf(p.id)).toEqual([expect.objectContaining({ amount: '15.00', status: 'completed', provider_ref: reversal.body.id })]);
    const refunded = await eventually(() => receiver.events('payment.refunded').find((e) => e.json.data.payment_id === p.id), 30_000, 'payment.refunded');
    expect(refunded.json.data).toMatchObject({ status: 'completed', amount_refunded: '15.00' });
  }, 120_000);

  it('answered without the capture\'s order id: not taken for a capture of someone else\'s (acknowledged, lost) but refused, and applied when sent again', async () => {
    const p = await pendingPayment('30.00');
    events.heldOrders.add(p.provider_ref);
    const captureId = await approvedAndCapturedAtTheProvider(p.provider_ref);
    provider.withoutOrderId = true;
    const reversal = await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: captureId, amount: '10.00' }).expect(201);

    const refused = await eventually(() => events.of(reversal.body.id)[0], 30_000, 'the reversal delivered');
    expect(refused.status).toBeGreaterThanOrEqual(500);
    expect(provider.captureLookups).toContainEqual({ captureId, status: 200 });
    expect(await refundsOf(p.id)).toEqual([]);
    const [inbox] = await t.sql<{ n: string }>("SELECT count(*)::text AS n FROM provider_events WHERE provider = 'walletpay' AND event_id = $1", [refused.transmissionId]);
    expect(inbox!.n).toBe('0');

    provider.withoutOrderId = false;
    const applied = await eventually(() => events.of(reversal.body.id).find((a) => a.status === 200), 60_000, 'the reversal applied');
    expect(applied.transmissionId).toBe(refused.transmissionId);
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount: '30.00', amount_refunded: '10.00' });
  }, 120_000);
});
