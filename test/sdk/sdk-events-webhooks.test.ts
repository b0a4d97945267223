import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPaymentsClient, PaymentsApiError, verifyWebhook, type PaymentsClient, type WebhookEvent } from '../../client/index.js';
import { WebhookReceiver, waitFor } from '../delivery/receiver.js';
import { startTestService, type TestService } from '../support/service.js';

/** The SDK's events, webhooks (recover, sendTest) and payments.transitions against the real service. */

let t: TestService;
let receiver: WebhookReceiver;
let client: PaymentsClient;
let secret: string;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService();
  const { apiKey } = await t.createMerchant('SDK Events Shop');
  client = createPaymentsClient({ baseUrl: t.baseUrl, apiKey });
  await client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_sdkevents_0001' } });
  ({ webhook_secret: secret } = await client.merchant.setWebhook(receiver.url('/sdk')));
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('SDK: events, webhooks and transitions', () => {
  it('reads a payment’s events exactly as delivered, its transitions, and pages through every event', async () => {
    const payment = await client.payments.create({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
    await client.refunds.create({ payment_id: payment.id, amount: '5.00' });
    await waitFor(async () => receiver.on('/sdk').length === 2, 'both deliveries');

    const page = await client.events.list({ payment_id: payment.id, since: new Date(Date.now() - 60_000) });
    expect(page.meta).toEqual({ page: 1, page_size: 50, total: 2 });
    expect(page.data.map((e) => e.type)).toEqual(['payment.refunded', 'payment.completed']);
    const delivered = receiver.on('/sdk').map((r) => verifyWebhook(r.body, r.headers, secret));
    expect(await client.events.get(delivered[0]!.id)).toEqual(delivered[0]);
    // One handler serves webhooks and the events API: an event is a WebhookEvent, narrowed on `type`
    // (this line only compiles under `npm run typecheck` because it is).
    const handle = (e: WebhookEvent) => (e.type === 'webhook.test' ? e.data.merchant_id : e.data.payment_id);
    expect(page.data.map(handle)).toEqual([payment.id, payment.id]);

    const all: string[] = [];
    for await (const e of client.events.listAll({ page_size: 1 })) all.push(e.id);
    expect(all.sort()).toEqual(delivered.map((e) => e.id).sort());

    const transitions = await client.payments.transitions(payment.id);
    expect(transitions.filter((x) => x.subject === 'payment').map((x) => x.to_status)).toEqual(['pending', 'completed']);
  });

  it('sends a test event and recovers a window, with typed errors for bad input', async () => {
    const test = await client.webhooks.sendTest();
    expect(test).toMatchObject({ delivered: true, response_status: 200, error: null, url: receiver.url('/sdk') });
    const event = verifyWebhook(receiver.on('/sdk').at(-1)!.body, receiver.on('/sdk').at(-1)!.headers, secret);
    expect(event.type).toBe('webhook.test');
    if (event.type === 'webhook.test') expect(event.data.message).toContain('test');

    expect(await client.webhooks.recover({ since: new Date(Date.now() - 3_600_000) })).toMatchObject({ queued: 0 });
    const tooOld = await client.webhooks.recover({ since: new Date(Date.now() - 8 * 86_400_000) }).catch((e: unknown) => e);
    expect(tooOld).toBeInstanceOf(PaymentsApiError);
    expect(tooOld).toMatchObject({ status: 422, code: 'VALIDATION_ERROR', details: [{ field: 'since', issue: 'must be at most 7 days ago' }] });
  });
});
