import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * PayPal captures whatever the order holds when the capture arrives: every purchase unit, each paid to its
 * unit's payee. Anyone holding the merchant's PayPal credentials can change an order awaiting capture
 * (PATCH: purchase units added or replaced, a payee's email replaced), so the service reads the order
 * before it captures and captures only the order it created: one purchase unit of the payment's amount,
 * paid to the payee the create answer named, intent CAPTURE. The simulator's PATCH changes amounts only;
 * this stub in front of it (the service's WALLETPAY_BASE_URL) answers the read of an order as PayPal would
 * after such a PATCH, and records every request, so a test sees that no capture was sent.
 */
type Change = 'second-unit' | 'other-payee' | 'authorize' | 'second-capture';

class ChangedOrders extends ForwardingStub {
  readonly changes = new Map<string, Change>();
  readonly requests: { method: string; url: string }[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer | 'cut'> {
    this.requests.push({ method: req.method, url: req.url });
    // The merchant's walletpay event subscription points here: its events are held back (the capture's
    // answer is what is judged, not a later event of the one real capture).
    if (req.url.startsWith('/held-events')) return { status: 503 };
    const answer = await forward();
    const order = /\/v2\/checkout\/orders\/([^/?]+)(\/capture)?$/.exec(req.url);
    const change = order ? this.changes.get(order[1]!) : undefined;
    if (!change || answer.status < 200 || answer.status > 299) return answer;
    const body = JSON.parse(answer.body.toString('utf8')) as WireOrder;
    const unit = body.purchase_units![0]!;
    if (req.method === 'GET' && change === 'second-unit') {
      body.purchase_units!.push({ reference_id: 'extra', amount: { currency_code: 'USD', value: '45.00' }, payee: unit.payee });
    } else if (req.method === 'GET' && change === 'other-payee') {
      unit.payee = { merchant_id: 'OTHERMERCHANT1', email_address: 'someone-else@example.com' };
    } else if (req.method === 'GET' && change === 'authorize') {
      body.intent = 'AUTHORIZE';
    } else if (req.method === 'POST' && change === 'second-capture') {
      const [first] = unit.payments!.captures!;
      unit.payments!.captures!.push({ ...first!, id: `${first!.id}X` });
    } else {
      return answer;
    }
    return { ...answer, body: JSON.stringify(body) };
  }

  capturesSent(orderId: string): number {
    return this.requests.filter((r) => r.method === 'POST' && r.url.endsWith(`/v2/checkout/orders/${orderId}/capture`)).length;
  }
}

interface WireOrder {
  intent?: string;
  purchase_units?: {
    reference_id?: string;
    amount?: { currency_code: string; value: string };
    payee?: { merchant_id?: string; email_address?: string };
    payments?: { captures?: { id: string }[] };
  }[];
}

let t: TestService;
let stub: ChangedOrders;
let receiver: WebhookReceiver;
let key: string;

beforeAll(async () => {
  stub = new ChangedOrders();
  const stubUrl = await stub.start();
  t = await startTestService({ WALLETPAY_BASE_URL: `${stubUrl}/sandbox/walletpay`, STATUS_SYNC_SCHEDULE: '1h' });
  stub.target = t.baseUrl;
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Changed Orders Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  const client = { id: `changed-orders-${randomUUID()}`, secret: 'changed-orders-secret' };
  const token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(client.id, client.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token as string;
  const webhook = await t.http.post('/sandbox/walletpay/v1/notifications/webhooks').set('Authorization', `Bearer ${token}`)
    .send({ url: `${stubUrl}/held-events`, event_types: [{ name: 'PAYMENT.CAPTURE.COMPLETED' }] }).expect(201);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: client.id, client_secret: client.secret, webhook_id: webhook.body.id } }).expect(200);
});
afterAll(async () => {
  await stub.stop();
  await t.stop();
  await receiver.stop();
});

const get = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const capturesAtTheProvider = (orderId: string) => t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [orderId]);

/** A 45.00 USD walletpay payment the buyer approved. */
async function approvedPayment(): Promise<{ id: string; provider_ref: string }> {
  const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
    .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
  expect(created.status).toBe(201);
  const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
  await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });
  return p;
}

describe('a walletpay order changed at PayPal after the payment created it', () => {
  it('with a second purchase unit: 409, no capture sent, the payment pending with the mismatch (90.00 in all) in integrity', async () => {
    const p = await approvedPayment();
    stub.changes.set(p.provider_ref, 'second-unit');
    const res = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(res.status).toBe(409);
    expect(res.body.error.message).toMatch(/nothing was captured/);
    expect(res.body.error.message).toContain('2 purchase units');
    expect(stub.capturesSent(p.provider_ref)).toBe(0);
    expect(await capturesAtTheProvider(p.provider_ref)).toHaveLength(0);
    const payment = await get(p.id);
    expect(payment).toMatchObject({ status: 'pending', integrity: { status: 'mismatch' } });
    expect(payment.integrity.mismatches).toEqual([
      expect.objectContaining({ source: 'capture', expected_amount: '45.00', reported_amount: '90.00', reported_currency: 'USD', issue: expect.stringContaining('2 purchase units') }),
    ]);
    // The status sync reads the same order: still refused, nothing completes.
    await t.inContext(() => t.service.container.services.statusSync.syncOne(p.id));
    expect(await get(p.id)).toMatchObject({ status: 'pending' });
    expect(receiver.events().filter((e) => e.json.data?.payment_id === p.id)).toEqual([]);
  });

  it('paying another payee than the create answer named: 409, no capture sent, the mismatch names the payee', async () => {
    const p = await approvedPayment();
    stub.changes.set(p.provider_ref, 'other-payee');
    const res = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(res.status).toBe(409);
    expect(res.body.error.message).toContain('OTHERMERCHANT1');
    expect(stub.capturesSent(p.provider_ref)).toBe(0);
    expect(await capturesAtTheProvider(p.provider_ref)).toHaveLength(0);
    const payment = await get(p.id);
    expect(payment).toMatchObject({ status: 'pending', integrity: { status: 'mismatch' } });
    expect(payment.integrity.mismatches).toEqual([
      expect.objectContaining({ source: 'capture', expected_amount: '45.00', reported_amount: '45.00', issue: expect.stringContaining('OTHERMERCHANT1') }),
    ]);
  });

  it('with intent AUTHORIZE: 409, no capture sent', async () => {
    const p = await approvedPayment();
    stub.changes.set(p.provider_ref, 'authorize');
    const res = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(res.status).toBe(409);
    expect(stub.capturesSent(p.provider_ref)).toBe(0);
    expect((await get(p.id)).integrity.mismatches).toEqual([expect.objectContaining({ issue: expect.stringContaining('AUTHORIZE') })]);
  });

  it('a capture answered with two captures is not completed for our amount: pending, the mismatch (90.00 captured) recorded, no payment.completed', async () => {
    const p = await approvedPayment();
    stub.changes.set(p.provider_ref, 'second-capture');
    const res = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('pending');
    expect(stub.capturesSent(p.provider_ref)).toBe(1);
    const payment = await get(p.id);
    expect(payment).toMatchObject({ status: 'pending', integrity: { status: 'mismatch' } });
    expect(payment.integrity.mismatches).toEqual([
      expect.objectContaining({ source: 'capture', expected_amount: '45.00', reported_amount: '90.00', issue: expect.stringContaining('2 captures') }),
    ]);
    expect(receiver.events('payment.completed').filter((e) => e.json.data.payment_id === p.id)).toEqual([]);
  });

  it('the order as created is captured as before', async () => {
    const p = await approvedPayment();
    const res = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('completed');
    expect((await get(p.id)).integrity).toEqual({ status: 'ok', mismatches: [] });
  });
});
