import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SEND_EVENT_JOB, signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * Two merchants of this service on ONE cardpay account (two brands of a company, one Stripe account),
 * each storing credentials without a webhook_secret, so the service registers an endpoint for each.
 * The provider sends every event of the account to every endpoint, each signed with that endpoint's
 * secret: neither registration may replace the other's endpoint, and each merchant's payments must
 * still be settled by the provider's events.
 */
const SHARED_KEY = `sk_test_shared_${randomUUID().replace(/-/g, '')}`;

let t: TestService;
beforeAll(async () => {
  // The status sync would settle the payments too: waited for only after an hour here.
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
});
afterAll(async () => {
  await t.stop();
});

async function merchantOnSharedAccount(name: string) {
  const m = await t.createMerchant(name);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: SHARED_KEY } }).expect(200);
  return m;
}

/** A 3-D Secure payment the buyer then completes: only the provider's event settles it at once. */
async function completedByTheProvider(apiKey: string): Promise<string> {
  const res = await t.http
    .post('/v1/payments')
    .set('X-API-Key', apiKey)
    .set('Idempotency-Key', randomUUID())
    .send({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' })
    .expect(201);
  const url: string = res.body.data.next_action.url;
  await fetch(`${url}${url.includes('?') ? '&' : '?'}auto=complete`, { redirect: 'manual' });
  return res.body.data.id as string;
}

const settledBy = async (paymentId: string) =>
  (await t.sql(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND accepted AND to_status = 'completed'`, [paymentId])).map((r) => r.trigger as string);

describe('merchants sharing one cardpay account', () => {
  it("each merchant's payments are settled by the provider's events; registering the second endpoint leaves the first in place", async () => {
    const first = await merchantOnSharedAccount('Brand one');
    const second = await merchantOnSharedAccount('Brand two');
    const endpoints = await t.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${SHARED_KEY}`).expect(200);
    expect(endpoints.body.data.map((e: { url: string }) => new URL(e.url).searchParams.get('merchant')).sort()).toEqual([first.merchantId, second.merchantId].sort());

    const ofFirst = await completedByTheProvider(first.apiKey);
    const ofSecond = await completedByTheProvider(second.apiKey);
    await eventually(async () => (await settledBy(ofFirst)).length > 0 && (await settledBy(ofSecond)).length > 0, 15_000, 'both payments completed');
    expect(await settledBy(ofFirst)).toEqual(['callback:payment_intent.succeeded']);
    expect(await settledBy(ofSecond)).toEqual(['callback:payment_intent.succeeded']);
    // Every endpoint acknowledged every event (an event refused with 401 is sent again by the provider for
    // days, and the provider disables an endpoint that keeps failing).
    const resent = await t.sql(`SELECT data->>'type' AS type FROM agenda_jobs WHERE name = $1 AND (data->>'attempt')::int > 1`, [SEND_EVENT_JOB]);
    expect(resent).toEqual([]);
  });

  it("an event about another merchant's payment, sent to a merchant's endpoint, is acknowledged without effect only when signed for that endpoint", async () => {
    const owner = await t.createMerchant('Owner');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', owner.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_owner_0001', webhook_secret: 'whsec_owner' } }).expect(200);
    const other = await t.createMerchant('Other');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_owner_0001', webhook_secret: 'whsec_other' } }).expect(200);
    const created = await t.http
      .post('/v1/payments')
      .set('X-API-Key', owner.apiKey)
      .set('Idempotency-Key', randomUUID())
      .send({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' })
      .expect(201);
    const p = created.body.data as { id: string; provider_ref: string };
    const body = JSON.stringify({
      id: `evt_${randomUUID().replace(/-/g, '')}`, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false,
      type: 'payment_intent.succeeded', data: { object: { object: 'payment_intent', id: p.provider_ref, amount: 1200, amount_received: 1200, currency: 'usd', status: 'succeeded', metadata: { payment_id: p.id } } },
    });
    const toOther = (signature: string) =>
      t.http.post(`/v1/webhooks/cardpay?merchant=${other.merchantId}`).set('Content-Type', 'application/json').set('Cardpay-Signature', signature).send(body);

    // Signed with the owner's secret but sent to the other merchant's endpoint: not that endpoint's event.
    expect((await toOther(signatureHeader(body, 'whsec_owner'))).status).toBe(401);
    // Signed for the other merchant's endpoint: genuine, acknowledged, and the owner's payment is untouched.
    const ack = await toOther(signatureHeader(body, 'whsec_other'));
    expect(ack.status).toBe(200);
    expect((await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', owner.apiKey)).body.data.status).toBe('pending');
    // The same event at the owner's endpoint settles it.
    const own = await t.http.post(`/v1/webhooks/cardpay?merchant=${owner.merchantId}`).set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, 'whsec_owner')).send(body);
    expect(own.status).toBe(200);
    expect((await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', owner.apiKey)).body.data.status).toBe('completed');
  });
});
