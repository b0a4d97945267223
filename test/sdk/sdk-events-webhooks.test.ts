import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPaymentsClient, PaymentsApiError, PaymentsConnectionError, verifyWebhook, type PaymentsClient, type WebhookEvent } from '../../client/index.js';
import { WebhookReceiver, waitFor } from '../delivery/receiver.js';
import { startTestService, type TestService } from '../support/service.js';

/** The SDK's events, webhooks (recover, sendTest) and payments.transitions against the real service. */

let t: TestService;
let receiver: WebhookReceiver;
let client: PaymentsClient;
let secret: string;
let apiKey: string;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  // Room for an endpoint that answers after 1.5 s (the test of the delivery calls' timeout).
  t = await startTestService({ WEBHOOK_TIMEOUT_MS: '5000' });
  ({ apiKey } = await t.createMerchant('SDK Events Shop'));
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

  it('sendTest and webhookLogs.retry wait past the client timeoutMs for the endpoint the service is waiting on, and return its answer', async () => {
    // The service answers these two only once the endpoint did (or WEBHOOK_TIMEOUT_MS passed): with the
    // client's own 1 s per attempt, an endpoint taking 1.5 s was a PaymentsConnectionError, never the outcome.
    const impatient = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, timeoutMs: 1_000 });
    await client.merchant.setWebhook(receiver.url('/slow'));
    receiver.slowNext('/slow', 1, 1_500);
    let started = Date.now();
    const test = await impatient.webhooks.sendTest();
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    expect(test).toMatchObject({ delivered: true, response_status: 200, error: null, url: receiver.url('/slow') });

    receiver.alwaysFail('/slow', 503);
    const payment = await client.payments.create({ provider: 'cardpay', amount: '7.00', currency: 'USD', payment_method: 'pm_card_visa' });
    const dead = await waitFor(async () => (await client.webhookLogs.list({ payment_id: payment.id, status: 'dead' })).data[0], 'a dead delivery');
    receiver.slowNext('/slow', 1, 1_500);
    started = Date.now();
    const resent = await impatient.webhookLogs.retry(dead.id);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    expect(resent).toMatchObject({ id: dead.id, status: 'delivered' });
    // A call's own timeoutMs still wins.
    receiver.slowNext('/slow', 1, 1_500);
    await expect(impatient.webhooks.sendTest({ timeoutMs: 500 })).rejects.toThrow(PaymentsConnectionError);
  });

  it('merchant.deleteWebhook turns delivery off: { webhook_url: null, deleted: true }, again when none is left; sendTest is then a conflict', async () => {
    const shop = await t.createMerchant('SDK Removal Shop');
    const own = createPaymentsClient({ baseUrl: t.baseUrl, apiKey: shop.apiKey });
    await own.merchant.setWebhook(receiver.url('/sdk-removed'));
    for (let i = 0; i < 2; i += 1) {
      const removed = await own.merchant.deleteWebhook();
      expect({ ...removed }).toEqual({ webhook_url: null, deleted: true });
    }
    expect((await own.merchant.get()).webhook_url).toBeNull();
    await expect(own.webhooks.sendTest()).rejects.toMatchObject({ status: 409, code: 'CONFLICT' });
    expect(receiver.on('/sdk-removed')).toHaveLength(0);
  });
});
