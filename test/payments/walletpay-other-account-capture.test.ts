import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A walletpay reversal (or refund) event names only the capture. When the service has not stored it, it
 * asks PayPal whose it is with the credentials of each merchant that could own it and verifies the event
 * (inbound-pipeline ownerByAsking). PayPal answers a capture of another account 403 PERMISSION_DENIED (the
 * 403 documented for GET /v2/payments/captures/{id}): that merchant is not the owner, and the next
 * candidate is asked — it was taken for PayPal being unreachable, and the event refused (5xx) for as long
 * as PayPal sends it.
 *
 * Two merchants: the owner (PayPal app X, its webhook W) and one whose credentials are of another PayPal
 * account (app Y) but name the same webhook W (an app switched without the webhook id being changed), so
 * W's events verify for both (offline, by W's signature), and PayPal shows app Y no capture of app X.
 */
class EventStub extends ForwardingStub {
  readonly heldOrders = new Set<string>();
  readonly answers: { type: string; resource: string; status: number }[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const event = JSON.parse(req.body.toString('utf8')) as { event_type: string; resource: { id: string; supplementary_data?: { related_ids?: { order_id?: string } } } };
    const orderId = event.resource.supplementary_data?.related_ids?.order_id;
    if (event.event_type === 'PAYMENT.CAPTURE.COMPLETED' && orderId && this.heldOrders.has(orderId)) return { status: 503 };
    const answer = await forward(this.target);
    this.answers.push({ type: event.event_type, resource: event.resource.id, status: answer.status });
    return { status: answer.status };
  }

  of(resource: string) {
    return this.answers.filter((a) => a.resource === resource);
  }
}

const X = { id: `owner-app-${randomUUID()}`, secret: 'owner-app-secret' };
const Y = { id: `other-app-${randomUUID()}`, secret: 'other-app-secret' };
let t: TestService;
let events: EventStub;
let xToken: string;
/** The owner (app X) and the merchant of the other account (app Y), both with webhook W. */
let owner: { key: string; id: string };
let other: { key: string; id: string };

beforeAll(async () => {
  events = new EventStub();
  const eventsUrl = `${await events.start()}/hooks`;
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', SANDBOX_CALLBACK_DELAY_MS: '300' });
  events.target = `${t.baseUrl}/v1/webhooks/walletpay`;
  xToken = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(X.id, X.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token;
  const webhook = await t.http.post('/sandbox/walletpay/v1/notifications/webhooks').set('Authorization', `Bearer ${xToken}`)
    .send({ url: eventsUrl, event_types: [{ name: 'PAYMENT.CAPTURE.COMPLETED' }, { name: 'PAYMENT.CAPTURE.REVERSED' }, { name: 'PAYMENT.CAPTURE.REFUNDED' }] })
    .expect(201);
  const created = [];
  for (const name of ['Wallet Shop One', 'Wallet Shop Two']) {
    const { apiKey, merchantId } = await t.createMerchant(name);
    created.push({ key: apiKey, id: merchantId });
  }
  // The candidates are asked in merchant id order (the candidate query's plan on so few rows sorts them;
  // checked in the test): the other account's merchant is the first, so it is asked before the owner.
  created.sort((a, b) => (a.id < b.id ? -1 : 1));
  [other, owner] = created as [typeof other, typeof owner];
  for (const [m, app] of [[owner, X], [other, Y]] as const) {
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.key)
      .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: app.id, client_secret: app.secret, webhook_id: webhook.body.id } }).expect(200);
  }
});
afterAll(async () => {
  await events.stop();
  await t.stop();
});

const getPayment = async (key: string, id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const refundsOf = async (key: string, id: string) => (await t.http.get(`/v1/refunds?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as unknown[];

async function pendingPayment(key: string, amount: string): Promise<{ id: string; provider_ref: string }> {
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
    .send({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
  expect(res.status).toBe(201);
  return res.body.data;
}

describe('a walletpay reversal of a capture not stored yet, with a candidate merchant of another PayPal account', () => {
  it("asks the next candidate when PayPal answers the other account 403 PERMISSION_DENIED: the owner's payment is settled and the reversal recorded, at the first delivery", async () => {
    const mine = await pendingPayment(owner.key, '40.00');
    const theirs = await pendingPayment(other.key, '40.00');
    const candidates = await t.sql<{ merchant_id: string }>(`SELECT DISTINCT merchant_id FROM payments
        WHERE provider = 'walletpay' AND status = 'pending' AND provider_ref IS NOT NULL AND provider_data->>'captureId' IS NULL
          AND currency = 'USD' AND amount_minor >= 1500 LIMIT 20`);
    expect(candidates.map((c) => c.merchant_id)).toEqual([other.id, owner.id]);

    // Captured at PayPal, its answer lost and its event held back: the service has no capture id for it.
    events.heldOrders.add(mine.provider_ref);
    await t.http.post(`/sandbox/walletpay/checkoutnow?token=${mine.provider_ref}`).type('form').send(`token=${mine.provider_ref}&action=approve`).expect(302);
    const captured = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${mine.provider_ref}/capture`).set('Authorization', `Bearer ${xToken}`)
      .set('PayPal-Request-Id', randomUUID()).set('Prefer', 'return=representation').send({}).expect(201);
    const captureId = captured.body.purchase_units[0].payments.captures[0].id as string;
    // PayPal shows app Y no capture of app X's.
    const yToken = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(Y.id, Y.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token;
    const denied = await t.http.get(`/sandbox/walletpay/v2/payments/captures/${captureId}`).set('Authorization', `Bearer ${yToken}`);
    expect(denied.status).toBe(403);

    const reversal = await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: captureId, amount: '15.00' }).expect(201);
    const first = await eventually(() => events.of(reversal.body.id)[0], 30_000, 'the reversal delivered');
    expect(first).toMatchObject({ type: 'PAYMENT.CAPTURE.REVERSED', status: 200 });
    expect(await getPayment(owner.key, mine.id)).toMatchObject({ status: 'completed', amount_refunded: '15.00' });
    expect(await refundsOf(owner.key, mine.id)).toEqual([expect.objectContaining({ amount: '15.00', status: 'completed', provider_ref: reversal.body.id })]);
    expect(await getPayment(other.key, theirs.id)).toMatchObject({ status: 'pending', amount_refunded: '0.00' });
    expect(await refundsOf(other.key, theirs.id)).toEqual([]);
  }, 60_000);

  it('refuses (5xx, nothing stored) a reversal that every candidate may not read: 403 PERMISSION_DENIED does not say whose it is', async () => {
    // A capture of app X that no payment here records (made at PayPal directly); the only candidate left is
    // the other account's merchant (its pending payment of the test above), whose credentials PayPal answers 403.
    const order = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${xToken}`).set('PayPal-Request-Id', randomUUID())
      .send({ intent: 'CAPTURE', purchase_units: [{ amount: { currency_code: 'USD', value: '30.00' } }] }).expect(201);
    // Approved (no return_url: the page says so itself rather than redirecting); the capture below proves it.
    await t.http.post(`/sandbox/walletpay/checkoutnow?token=${order.body.id}`).type('form').send(`token=${order.body.id}&action=approve`).expect(200);
    const captured = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${order.body.id}/capture`).set('Authorization', `Bearer ${xToken}`)
      .set('PayPal-Request-Id', randomUUID()).set('Prefer', 'return=representation').send({}).expect(201);
    const captureId = captured.body.purchase_units[0].payments.captures[0].id as string;
    const candidates = await t.sql<{ merchant_id: string }>(`SELECT DISTINCT merchant_id FROM payments
        WHERE provider = 'walletpay' AND status = 'pending' AND provider_ref IS NOT NULL AND provider_data->>'captureId' IS NULL`);
    expect(candidates.map((c) => c.merchant_id)).toEqual([other.id]);
    const inboxBefore = await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM provider_events');

    const reversal = await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: captureId, amount: '10.00' }).expect(201);
    const first = await eventually(() => events.of(reversal.body.id)[0], 30_000, 'the reversal delivered');
    // Refused, so PayPal sends it again; acknowledged, a reversal of a capture of ours not yet recorded would be lost for good.
    expect(first).toMatchObject({ type: 'PAYMENT.CAPTURE.REVERSED', status: 502 });
    expect(await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM provider_events')).toEqual(inboxBefore);
    expect((await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM refunds'))[0]!.n).toBe(1);
  }, 60_000);
});
