import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/** Which of an account's webhook endpoints the cardpay simulator sends each event to. */
let t: TestService;
let all: WebhookReceiver;
let refundsOnly: WebhookReceiver;
beforeAll(async () => {
  t = await startTestService();
  all = await new WebhookReceiver().start();
  refundsOnly = await new WebhookReceiver().start();
});
afterAll(async () => {
  await all.stop();
  await refundsOnly.stop();
  await t.stop();
});

const base = '/sandbox/cardpay';
const post = (key: string, path: string, form: Record<string, string>) =>
  t.http.post(`${base}${path}`).set('Authorization', `Bearer ${key}`).set('Idempotency-Key', randomUUID()).type('form').send(form);
const typesOf = (receiver: WebhookReceiver, objectId: string) =>
  receiver.received.filter((r) => r.json.data?.object?.id === objectId || r.json.data?.object?.payment_intent === objectId).map((r) => r.json.type as string);

const newKey = () => `sk_test_${randomUUID().replace(/-/g, '')}`;

/** A confirmed payment of 7.00 (visa unless given), then its refund: payment_intent.*, charge.* and refund.* events. */
async function payAndRefund(key: string, paymentMethod = 'pm_card_visa'): Promise<string> {
  const intent = await post(key, '/v1/payment_intents', {
    amount: '700',
    currency: 'usd',
    payment_method: paymentMethod,
    confirm: 'true',
    'automatic_payment_methods[enabled]': 'true',
    'automatic_payment_methods[allow_redirects]': 'never',
  }).expect(200);
  await post(key, '/v1/refunds', { payment_intent: intent.body.id }).expect(200);
  return intent.body.id as string;
}

describe('cardpay simulator event subscriptions', () => {
  it("an endpoint listening to '*' receives every event; one listening to other types only those", async () => {
    const key = newKey();
    await post(key, '/v1/webhook_endpoints', { url: all.url, 'enabled_events[0]': '*' }).expect(200);
    await post(key, '/v1/webhook_endpoints', { url: refundsOnly.url, 'enabled_events[0]': 'refund.created' }).expect(200);
    const intent = await payAndRefund(key);

    const everything = ['payment_intent.created', 'charge.succeeded', 'payment_intent.succeeded', 'charge.refunded', 'refund.created'];
    await eventually(() => everything.every((type) => typesOf(all, intent).includes(type)), 10_000, "every event at the '*' endpoint");
    await eventually(() => typesOf(refundsOnly, intent).length > 0, 10_000, 'refund.created at the refunds endpoint');
    expect(typesOf(refundsOnly, intent)).toEqual(['refund.created']);
  });

  it('without a catch-all endpoint, each endpoint receives the types it listens to and no other', async () => {
    const key = newKey();
    await post(key, '/v1/webhook_endpoints', { url: all.url, 'enabled_events[0]': 'payment_intent.succeeded', 'enabled_events[1]': 'charge.refunded' }).expect(200);
    await post(key, '/v1/webhook_endpoints', { url: refundsOnly.url, 'enabled_events[0]': 'refund.created' }).expect(200);
    const intent = await payAndRefund(key);

    await eventually(() => typesOf(all, intent).length >= 2 && typesOf(refundsOnly, intent).length >= 1, 10_000, 'the listened events');
    expect(typesOf(all, intent).sort()).toEqual(['charge.refunded', 'payment_intent.succeeded']);
    expect(typesOf(refundsOnly, intent)).toEqual(['refund.created']);
  });

  it("an endpoint rendering an API version before 2024-10-28 gets no refund.* event of a card refund, only charge.refunded and charge.refund.updated, each saying its version", async () => {
    // Stripe sends refund.created/updated/failed for card refunds from 2024-10-28.acacia on; a dashboard-made
    // endpoint renders the account's default version, which may be older (pm_card_refundFail: succeeded, then failed).
    const key = newKey();
    await post(key, '/v1/webhook_endpoints', { url: all.url, 'enabled_events[0]': '*' }).expect(200);
    await post(key, '/v1/webhook_endpoints', { url: refundsOnly.url, 'enabled_events[0]': '*', api_version: '2024-06-20' }).expect(200);
    const intent = await payAndRefund(key, 'pm_card_refundFail');

    const current = ['charge.refunded', 'refund.created', 'refund.updated', 'charge.refund.updated', 'refund.failed'];
    await eventually(() => current.every((type) => typesOf(all, intent).includes(type)), 10_000, 'the refund events at the current-version endpoint');
    await eventually(() => typesOf(refundsOnly, intent).includes('charge.refund.updated'), 10_000, 'charge.refund.updated at the old-version endpoint');
    expect(typesOf(refundsOnly, intent).filter((type) => type.includes('refund'))).toEqual(['charge.refunded', 'charge.refund.updated']);
    const mine = (receiver: WebhookReceiver) => receiver.received.filter((r) => r.json.data?.object?.id === intent || r.json.data?.object?.payment_intent === intent);
    expect(new Set(mine(refundsOnly).map((r) => r.json.api_version))).toEqual(new Set(['2024-06-20']));
    expect(new Set(mine(all).map((r) => r.json.api_version))).toEqual(new Set(['2026-07-29.dahlia']));
    const failed = mine(refundsOnly).find((r) => r.json.type === 'charge.refund.updated')!;
    expect(failed.json.data.object).toMatchObject({ object: 'refund', status: 'failed', failure_reason: 'expired_or_canceled_card', payment_intent: intent });
  });
});
