import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * A walletpay payment whose capture's answer was lost stays pending until the status sync reads the order.
 * If the capture was refunded at PayPal meanwhile (the merchant's dashboard, or its own API call) and its
 * refund event never comes (a subscription without PAYMENT.CAPTURE.REFUNDED, which README allows), the
 * order read is the only report of that refund: the capture is REFUNDED or PARTIALLY_REFUNDED and the
 * order lists the refund. The payment must end as the money stands — refunded (or completed with
 * amount_refunded), the refund recorded, payment.completed then payment.refunded — not completed for
 * the full amount with nothing refunded.
 */
class LostCaptureAnswers extends ForwardingStub {
  /** Orders whose capture's answer is lost: the capture reaches the simulator, the connection is cut on the way back. */
  readonly losing = new Set<string>();

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer | 'cut'> {
    // The merchant's walletpay event subscription points here: nothing reaches the service.
    if (req.url.startsWith('/held-events')) return { status: 503 };
    const capture = req.method === 'POST' ? /\/v2\/checkout\/orders\/([^/?]+)\/capture$/.exec(req.url) : null;
    const answer = await forward();
    return capture && this.losing.has(capture[1]!) ? 'cut' : answer;
  }
}

let t: TestService;
let stub: LostCaptureAnswers;
let receiver: WebhookReceiver;
let key: string;
let token: string;

beforeAll(async () => {
  stub = new LostCaptureAnswers();
  const stubUrl = await stub.start();
  t = await startTestService({ WALLETPAY_BASE_URL: `${stubUrl}/sandbox/walletpay`, STATUS_SYNC_SCHEDULE: '1h' });
  stub.target = t.baseUrl;
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Refunded At PayPal Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  const client = { id: `refunded-before-sync-${randomUUID()}`, secret: 'refunded-before-sync-secret' };
  token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(client.id, client.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token as string;
  // The merchant's own subscription, without PAYMENT.CAPTURE.REFUNDED (and its deliveries held back).
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
const refundsOf = async (id: string) => (await t.http.get(`/v1/refunds?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as Record<string, unknown>[];
const eventsOf = (id: string) => receiver.events().filter((e) => e.json.data?.payment_id === id);

/** A 45.00 USD payment, approved and captured at PayPal, the capture's answer lost; its capture refunded at PayPal by `amount` (all of it when absent). */
async function capturedAnswerLostThenRefunded(amount?: string): Promise<{ id: string; providerRefundId: string }> {
  const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
    .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
  expect(created.status).toBe(201);
  const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
  await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });
  stub.losing.add(p.provider_ref);
  const lost = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
  expect(lost.status).toBe(502);
  expect(lost.headers['payments-outcome']).toBe('unknown');
  expect(await get(p.id)).toMatchObject({ status: 'pending' });
  const [capture] = await t.sql<{ id: string }>('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref]);
  // Refunded at PayPal with the merchant's own token, not through the service.
  const refund = await t.http.post(`/sandbox/walletpay/v2/payments/captures/${capture!.id}/refund`).set('Authorization', `Bearer ${token}`)
    .set('PayPal-Request-Id', randomUUID()).set('Prefer', 'return=representation')
    .send(amount ? { amount: { currency_code: 'USD', value: amount } } : {}).expect(201);
  return { id: p.id, providerRefundId: refund.body.id as string };
}

describe('a pending walletpay payment whose capture PayPal reports refunded, read by the status sync', () => {
  it('refunded in full: refunded, amount_refunded 45.00, the refund recorded; payment.completed then payment.refunded', async () => {
    const { id, providerRefundId } = await capturedAnswerLostThenRefunded();
    await t.inContext(() => t.service.container.services.statusSync.syncOne(id));

    expect(await get(id)).toMatchObject({ status: 'refunded', amount_refunded: '45.00', integrity: { status: 'ok' } });
    expect(await refundsOf(id)).toEqual([expect.objectContaining({ payment_id: id, status: 'completed', amount: '45.00', provider_ref: providerRefundId })]);
    await eventually(() => eventsOf(id).length >= 2, 10_000, 'two events');
    expect(eventsOf(id).map((e) => e.json.type)).toEqual(['payment.completed', 'payment.refunded']);
    expect(eventsOf(id)[1]!.json.data).toMatchObject({ status: 'refunded', previous_status: 'completed', amount_refunded: '45.00' });

    // Read again (a later sync), nothing more is recorded.
    await t.inContext(() => t.service.container.services.statusSync.syncOne(id));
    expect(await refundsOf(id)).toHaveLength(1);
  });

  it('refunded in part: completed, amount_refunded 15.00, the refund recorded', async () => {
    const { id, providerRefundId } = await capturedAnswerLostThenRefunded('15.00');
    await t.inContext(() => t.service.container.services.statusSync.syncOne(id));

    expect(await get(id)).toMatchObject({ status: 'completed', amount_refunded: '15.00', integrity: { status: 'ok' } });
    expect(await refundsOf(id)).toEqual([expect.objectContaining({ status: 'completed', amount: '15.00', provider_ref: providerRefundId })]);
    await eventually(() => eventsOf(id).length >= 2, 10_000, 'two events');
    expect(eventsOf(id)[0]!.json.type).toBe('payment.completed');
    expect(eventsOf(id)[1]!.json.data).toMatchObject({ amount_refunded: '15.00' });
  });
});
