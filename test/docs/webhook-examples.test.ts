import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { OUTBOUND_WEBHOOK_EVENTS, WEBHOOK_EVENT_TYPES } from '../../contract/index.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually, type ReceivedRequest } from '../support/webhook-receiver.js';

/**
 * openapi.json's `x-webhooks` examples (contract/outbound-webhooks.ts) against real deliveries: for every
 * event type the service is made to send one (cardpay payments and a refund, mobile-money reversals, the
 * test event), and its body has exactly the keys the example shows — no field a merchant would wait for
 * in vain, none left out.
 */

let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;
const delivered: Partial<Record<(typeof WEBHOOK_EVENT_TYPES)[number], ReceivedRequest>> = {};

const pay = async (body: Record<string, unknown>) =>
  (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `examples-${++n}`).send(body).expect(201)).body.data as { id: string };
const refund = async (body: Record<string, unknown>) => (await t.http.post('/v1/refunds').set('X-API-Key', key).send(body).expect(201)).body.data as { id: string };
const eventFor = (type: string, paymentId: string) => eventually(() => receiver.events(type).find((e) => e.json.data.payment_id === paymentId), 15_000, `${type} of ${paymentId}`);
const completedMobilePayment = async (amount: string) => {
  const { id } = await pay({ provider: 'mobilemoney', amount, currency: 'KES', phone: '254708374149' });
  await eventFor('payment.completed', id);
  return id;
};

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h' });
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Examples Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_examples_0001' } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({
    provider: 'mobilemoney',
    mobilemoney: { env: 'sandbox', consumer_key: 'examples-key', consumer_secret: 'examples-secret', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' },
  }).expect(200);

  const paid = await pay({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
  delivered['payment.completed'] = await eventFor('payment.completed', paid.id);
  await refund({ payment_id: paid.id, amount: '5.00' });
  delivered['payment.refunded'] = await eventFor('payment.refunded', paid.id);
  const declined = await pay({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_chargeDeclined' });
  delivered['payment.failed'] = await eventFor('payment.failed', declined.id);

  const reversed = await completedMobilePayment('100');
  await refund({ payment_id: reversed });
  delivered['payment.reversed'] = await eventFor('payment.reversed', reversed);
  // The simulator answers a reversal of 99999 with result 1: the reversal fails.
  const notReversed = await completedMobilePayment('99999');
  await refund({ payment_id: notReversed });
  delivered['refund.failed'] = await eventFor('refund.failed', notReversed);

  await t.http.post('/v1/webhooks/test').set('X-API-Key', key).send({}).expect(200);
  delivered['webhook.test'] = await eventually(() => receiver.events('webhook.test')[0], 10_000, 'webhook.test');
}, 60_000);
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('outbound webhook examples', () => {
  it.each([...WEBHOOK_EVENT_TYPES])('%s: a real delivery has exactly the example\'s keys', (type) => {
    const example = OUTBOUND_WEBHOOK_EVENTS[type].example as { data: Record<string, unknown> };
    const real = delivered[type]!.json;
    expect(Object.keys(real).sort()).toEqual(Object.keys(example).sort());
    expect(Object.keys(real.data).sort()).toEqual(Object.keys(example.data).sort());
  });
});
