import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * PayPal's sandbox negative testing through the service: a proxy in front of the simulator (the
 * service's WALLETPAY_BASE_URL) adds `PayPal-Mock-Response` to capture calls, and the simulator refuses
 * them as PayPal documents. The adapter maps each refusal as it would PayPal's own: a refusal about the
 * buyer or the transaction fails the payment; one that sends the buyer back to approve keeps it pending.
 */
class MockingProxy extends ForwardingStub {
  /** The issue the next capture calls are mocked with, or null. */
  captureIssue: string | null = null;

  protected override intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (this.captureIssue && req.method === 'POST' && /\/v2\/checkout\/orders\/[^/]+\/capture$/.test(req.url)) {
      req.headers['paypal-mock-response'] = JSON.stringify({ mock_application_codes: this.captureIssue });
    }
    return forward();
  }
}

let t: TestService;
let proxy: MockingProxy;
let receiver: WebhookReceiver;
let key: string;

beforeAll(async () => {
  proxy = new MockingProxy();
  const proxyUrl = await proxy.start();
  t = await startTestService({ WALLETPAY_BASE_URL: `${proxyUrl}/sandbox/walletpay`, STATUS_SYNC_SCHEDULE: '1h' });
  proxy.target = t.baseUrl;
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Negative Testing Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: `mocked-${randomUUID()}`, client_secret: 'mocked-secret' } }).expect(200);
});
afterAll(async () => {
  await proxy.stop();
  await t.stop();
  await receiver.stop();
});

async function approvedPayment(): Promise<{ id: string; provider_ref: string }> {
  const p = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
    .send({ provider: 'walletpay', amount: '12.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
    .expect(201)).body.data;
  await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });
  return p;
}
const captureOf = (id: string) => t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', key).send({});
const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;

describe('walletpay capture refused by PayPal-Mock-Response', () => {
  it('MAX_NUMBER_OF_PAYMENT_ATTEMPTS_EXCEEDED (about the transaction) fails the payment, naming the code; payment.failed', async () => {
    const p = await approvedPayment();
    proxy.captureIssue = 'MAX_NUMBER_OF_PAYMENT_ATTEMPTS_EXCEEDED';
    const res = await captureOf(p.id);
    proxy.captureIssue = null;
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('failed');
    expect(await getPayment(p.id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('MAX_NUMBER_OF_PAYMENT_ATTEMPTS_EXCEEDED') });
    await eventually(() => receiver.events('payment.failed').find((e) => e.json.data.payment_id === p.id), 10_000, 'payment.failed');
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref])).toEqual([]);
  });

  it('INSTRUMENT_DECLINED (the buyer must choose another funding source) keeps the payment pending: 409, next_action', async () => {
    const p = await approvedPayment();
    proxy.captureIssue = 'INSTRUMENT_DECLINED';
    const res = await captureOf(p.id);
    proxy.captureIssue = null;
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('INSTRUMENT_DECLINED') });
    expect(await getPayment(p.id)).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: expect.stringContaining(p.provider_ref) } });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);
    // Nothing was captured: the next capture, unmocked, completes the payment.
    const retried = await captureOf(p.id);
    expect(retried.status).toBe(200);
    expect(retried.body.data.status).toBe('completed');
  });
});
