import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { startTestService, type TestService } from '../support/service.js';
import { sendSignedWalletpayEvent } from '../support/walletpay-events.js';

/**
 * A provider message is about our refund (or payment) only by the provider's own reference, never by our
 * id alone: our id travels in a field the merchant's own calls at the provider can set too (cardpay
 * metadata.refund_id, walletpay custom_id). Such a refund, signed by the provider, is not applied to ours;
 * a verified walletpay message naming no order or capture is confirmed with the provider, not applied as it says.
 */

const CARD_SECRET = 'whsec_refbind_test_secret';
const CARD_KEY = 'sk_test_refbind_01';
const WALLET_WEBHOOK_ID = 'WH-REFBIND-NONE';

let t: TestService;
let key: string;
let n = 0;

const api = (path: string) => t.http.get(path).set('X-API-Key', key);
const getPayment = async (id: string) => (await api(`/v1/payments/${id}`)).body.data;
const getRefund = async (id: string) => (await api(`/v1/refunds/${id}`)).body.data;
const refund = (body: Record<string, unknown>) => t.http.post('/v1/refunds').set('X-API-Key', key).send(body);
const misreport = (provider: string, body: Record<string, unknown>) => t.http.post(`/sandbox/${provider}/_control/misreport`).send(body).expect(200);
const merchantEvents = async (paymentId: string) => (await t.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1 ORDER BY created_at', [paymentId])).map((e) => e.type);
const refusedMoves = (refundId: string) =>
  t.sql<{ from_status: string; to_status: string; note: string }>('SELECT from_status, to_status, note FROM payment_transitions WHERE refund_id = $1 AND NOT accepted ORDER BY id', [refundId]);

beforeAll(async () => {
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', SANDBOX_CALLBACK_DELAY_MS: '300' });
  ({ apiKey: key } = await t.createMerchant('Refund Binding Shop'));
  // Our own signing secret and a webhook id the simulators do not know: every event here is the test's.
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: CARD_KEY, webhook_secret: CARD_SECRET } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'refbind-client', client_secret: 'refbind-secret', webhook_id: WALLET_WEBHOOK_ID } }).expect(200);
});
afterAll(async () => {
  await misreport('walletpay', {});
  await t.stop();
});

describe('cardpay: a provider refund carrying our refund id is ours only if it is our refund at the provider', () => {
  const atProvider = (path: string) => t.http.get(`/sandbox/cardpay${path}`).set('Authorization', `Bearer ${CARD_KEY}`).expect(200);
  /** The merchant's own API call at the provider: a refund of the payment's charge with our refund's id in its metadata. */
  const ownCallRefund = async (intentId: string, amount: number, ourRefundId: string) =>
    (await t.http.post('/sandbox/cardpay/v1/refunds').set('Authorization', `Bearer ${CARD_KEY}`).type('form')
      .send({ payment_intent: intentId, amount: String(amount), 'metadata[refund_id]': ourRefundId }).expect(200)).body as { id: string };
  const deliver = (type: string, object: unknown) => {
    const body = JSON.stringify({ id: `evt_refbind_${++n}_${Date.now()}`, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type, data: { object } });
    return t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, CARD_SECRET)).send(body);
  };
  async function refundedPayment() {
    const p = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `refbind-${randomUUID()}`)
      .send({ provider: 'cardpay', amount: '30.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201)).body.data as { id: string; provider_ref: string; status: string };
    expect(p.status).toBe('completed');
    const ours = (await refund({ payment_id: p.id, amount: '10.00' }).expect(201)).body.data as { id: string; provider_ref: string; status: string };
    expect(ours.status).toBe('completed');
    return { p, ours };
  }

  it('a failed provider refund with our refund id does not fail our completed refund: no refund.failed, amount_refunded kept, recorded', async () => {
    const { p, ours } = await refundedPayment();
    const foreign = await ownCallRefund(p.provider_ref, 1000, ours.id);
    await t.sql(`UPDATE sandbox_cardpay_refunds SET status = 'failed', failure_reason = 'expired_or_canceled_card' WHERE id = $1`, [foreign.id]);
    const failed = (await atProvider(`/v1/refunds/${foreign.id}`)).body;
    expect(failed).toMatchObject({ status: 'failed', metadata: { refund_id: ours.id } });

    expect((await deliver('refund.failed', failed)).status).toBe(200);
    expect(await getRefund(ours.id)).toMatchObject({ status: 'completed', provider_ref: ours.provider_ref, failure_reason: null });
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '10.00' });
    expect(await merchantEvents(p.id)).not.toContain('refund.failed');
    const [refused, ...more] = await refusedMoves(ours.id);
    expect(more).toEqual([]);
    expect(refused).toMatchObject({ from_status: 'completed', to_status: 'failed' });
    expect(refused!.note).toContain(foreign.id);

    // Our own refund failing at the provider still fails it (its own provider refund).
    await t.sql(`UPDATE sandbox_cardpay_refunds SET status = 'failed', failure_reason = 'expired_or_canceled_card' WHERE id = $1`, [ours.provider_ref]);
    expect((await deliver('refund.failed', (await atProvider(`/v1/refunds/${ours.provider_ref}`)).body)).status).toBe(200);
    expect(await getRefund(ours.id)).toMatchObject({ status: 'failed', failure_reason: 'expired_or_canceled_card' });
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
  });

  it('a succeeded provider refund with our refund id is not taken for ours: it is recorded as a refund made at the provider', async () => {
    const { p, ours } = await refundedPayment();
    const foreign = await ownCallRefund(p.provider_ref, 500, ours.id);
    expect((await deliver('refund.created', (await atProvider(`/v1/refunds/${foreign.id}`)).body)).status).toBe(200);
    // 15.00 went back to the customer: 10.00 by our refund, 5.00 by the merchant's own call.
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '15.00' });
    expect(await getRefund(ours.id)).toMatchObject({ status: 'completed', amount: '10.00', provider_ref: ours.provider_ref });
    const refunds = (await api(`/v1/refunds?payment_id=${p.id}`)).body.data as { id: string; amount: string; status: string; provider_ref: string }[];
    expect(refunds.map((r) => [r.amount, r.status, r.provider_ref]).sort()).toEqual([['10.00', 'completed', ours.provider_ref], ['5.00', 'completed', foreign.id]].sort());
  });
});

describe('walletpay: a verified message naming no order or capture is bound by our id alone', () => {
  async function approvedOrder(amount: string) {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `refbind-${randomUUID()}`)
      .send({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
    const approval = new URL(created.body.data.next_action.url);
    expect((await t.http.get(`${approval.pathname}${approval.search}&auto=approve`)).status).toBeLessThan(400);
    return created.body.data as { id: string; provider_ref: string };
  }
  /** Signed with the simulator's own key, as the sandbox provider signs: verified. */
  const deliver = (eventType: string, resourceType: string, resource: Record<string, unknown>) =>
    sendSignedWalletpayEvent(t, WALLET_WEBHOOK_ID, eventType, resourceType, resource);

  it('PAYMENT.CAPTURE.COMPLETED without its order (related_ids.order_id): the provider is asked about our order; an uncaptured order stays pending', async () => {
    const order = await approvedOrder('45.00');
    const res = await deliver('PAYMENT.CAPTURE.COMPLETED', 'capture', { id: `CAP-OWN-${++n}`, status: 'COMPLETED', amount: { currency_code: 'USD', value: '45.00' }, custom_id: order.id });
    expect(res.status).toBe(200);
    expect(await getPayment(order.id)).toMatchObject({ status: 'pending' });
    expect(await merchantEvents(order.id)).toEqual([]);
  });

  it('PAYMENT.CAPTURE.REFUNDED without its capture (no rel "up" link): not applied to our refund; with it, it is', async () => {
    const order = await approvedOrder('45.00');
    expect((await t.http.post(`/v1/payments/${order.id}/capture`).set('X-API-Key', key)).body.data.status).toBe('completed');
    // The refund's answer lies, so the refund stays pending for the provider's event.
    await misreport('walletpay', { amount: '0.01' });
    const pending = (await refund({ payment_id: order.id, amount: '15.00' })).body.data as { id: string; status: string };
    await misreport('walletpay', {});
    expect(pending.status).toBe('pending');
    const [{ capture_id: captureId }] = (await t.sql<{ capture_id: string }>(`SELECT provider_data->>'captureId' AS capture_id FROM payments WHERE id = $1`, [order.id])) as [{ capture_id: string }];
    const refunded = { id: `REF-OWN-${++n}`, status: 'COMPLETED', amount: { currency_code: 'USD', value: '15.00' }, custom_id: pending.id };

    expect((await deliver('PAYMENT.CAPTURE.REFUNDED', 'refund', refunded)).status).toBe(200);
    expect(await getRefund(pending.id)).toMatchObject({ status: 'pending' });
    expect(await getPayment(order.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });

    const up = [{ href: `${t.baseUrl}/sandbox/walletpay/v2/payments/captures/${captureId}`, rel: 'up', method: 'GET' }];
    expect((await deliver('PAYMENT.CAPTURE.REFUNDED', 'refund', { ...refunded, links: up })).status).toBe(200);
    expect(await getRefund(pending.id)).toMatchObject({ status: 'completed' });
    expect(await getPayment(order.id)).toMatchObject({ amount_refunded: '15.00' });
  });

  it('PAYMENT.REFUND.FAILED without its capture link, naming the provider refund our completed refund recorded: our refund fails (refund.failed) and its amount is given back', async () => {
    const order = await approvedOrder('45.00');
    expect((await t.http.post(`/v1/payments/${order.id}/capture`).set('X-API-Key', key)).body.data.status).toBe('completed');
    const done = (await refund({ payment_id: order.id, amount: '15.00' })).body.data as { id: string; status: string; provider_ref: string };
    expect(done).toMatchObject({ status: 'completed', provider_ref: expect.any(String) });
    expect(await getPayment(order.id)).toMatchObject({ amount_refunded: '15.00' });

    const failed = { id: done.provider_ref, status: 'FAILED', amount: { currency_code: 'USD', value: '15.00' }, custom_id: done.id };
    expect((await deliver('PAYMENT.REFUND.FAILED', 'refund', failed)).status).toBe(200);
    expect(await getRefund(done.id)).toMatchObject({ status: 'failed' });
    expect(await getPayment(order.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    expect(await merchantEvents(order.id)).toContain('refund.failed');
  });
});
