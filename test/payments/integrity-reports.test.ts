import { randomUUID, sign } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { signedMessage as walletpaySignedMessage } from '../../server/sandbox/walletpay/signing.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * Issue 10, point 1, the remaining paths: a walletpay refund callback, a walletpay status-sync answer
 * and a mobilemoney transaction-status result. For each: a wrong amount and (where the provider's
 * amounts carry one) a wrong currency change nothing and are kept in the audit; the right one settles.
 * Hostile answers come from the simulators' misreport switch; hostile callbacks are signed by the test
 * with the simulator's own key. (A mobilemoney status-sync answer is the STK query, whose answer names
 * no amount on the wire: the push's own amount is the only one it can confirm, so nothing there can lie.)
 */

const MM_CREDS = { env: 'sandbox', consumer_key: 'reports-key', consumer_secret: 'reports-secret', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' };
const SILENT_PHONE = '254700000003';
const WALLET_WEBHOOK_ID = 'WH-REPORTS-NONE';

let t: TestService;
let key: string;
let n = 0;

const misreport = (provider: string, body: Record<string, unknown>) => t.http.post(`/sandbox/${provider}/_control/misreport`).send(body).expect(200);
const pay = (body: Record<string, unknown>) => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `reports-${randomUUID()}`).send(body);
const get = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;
const refused = (paymentId: string) =>
  t.sql<{ subject: string; trigger: string; expected_amount_minor: string; expected_currency: string; reported_amount_minor: string | null; reported_currency: string | null }>(
    `SELECT subject, trigger, expected_amount_minor::text, expected_currency, reported_amount_minor::text, reported_currency
     FROM payment_transitions WHERE payment_id = $1 AND NOT accepted AND expected_amount_minor IS NOT NULL ORDER BY id`,
    [paymentId],
  );
const mismatches = (payment: { integrity: { mismatches: Record<string, string>[] } }) =>
  payment.integrity.mismatches.map((m) => [m.source, m.expected_amount, m.expected_currency, m.reported_amount, m.reported_currency]);
const syncOne = (id: string) => t.inContext(() => t.service.container.services.statusSync.syncOne(id));

/** A walletpay order the buyer approved. */
async function approvedOrder(amount: string) {
  const created = await pay({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
  const approval = new URL(created.body.data.next_action.url);
  expect((await t.http.get(`${approval.pathname}${approval.search}&auto=approve`)).status).toBeLessThan(400);
  return created.body.data as { id: string; provider_ref: string };
}

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h', SANDBOX_CALLBACK_DELAY_MS: '300', STATUS_SYNC_SCHEDULE: '1h' });
  ({ apiKey: key } = await t.createMerchant('Reports Shop'));
  // A webhook id the simulator does not know: it sends no events, so every callback is the test's.
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'reports-client', client_secret: 'reports-secret', webhook_id: WALLET_WEBHOOK_ID } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: MM_CREDS }).expect(200);
});
afterEach(async () => {
  for (const provider of ['walletpay', 'mobilemoney']) await misreport(provider, {});
});
afterAll(async () => {
  await t.stop();
});

describe('walletpay', () => {
  it('PAYMENT.CAPTURE.REFUNDED: our pending refund completes only at its own amount and currency', async () => {
    const order = await approvedOrder('45.00');
    expect((await t.http.post(`/v1/payments/${order.id}/capture`).set('X-API-Key', key)).body.data.status).toBe('completed');
    // The refund answer lies, so the refund stays pending until the provider's event says how it ended.
    await misreport('walletpay', { amount: '0.01' });
    const refund = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: order.id, amount: '15.00' });
    expect(refund.body.data.status).toBe('pending');
    await misreport('walletpay', {});
    const refundId = refund.body.data.id as string;
    const [{ capture_id: captureId }] = await t.sql<{ capture_id: string }>(`SELECT provider_data->>'captureId' AS capture_id FROM payments WHERE id = $1`, [order.id]) as [{ capture_id: string }];

    // The simulator's signing key (made at boot), as the sandbox operator's own signature.
    const [keys] = await t.sql<{ cert_id: string; private_key_pem: string }>('SELECT cert_id, private_key_pem FROM sandbox_walletpay_keys WHERE id = 1');
    const refunded = async (value: string, currency: string) => {
      const transmissionId = randomUUID();
      const time = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      const body = JSON.stringify({
        id: `WH-${randomUUID()}`, event_version: '1.0', create_time: time, resource_type: 'refund', event_type: 'PAYMENT.CAPTURE.REFUNDED',
        resource: {
          id: `REF${++n}REPORTS`, status: 'COMPLETED', amount: { currency_code: currency, value }, custom_id: refundId,
          links: [{ href: `${t.baseUrl}/sandbox/walletpay/v2/payments/captures/${captureId}`, rel: 'up', method: 'GET' }],
        },
      });
      const signature = sign('sha256', Buffer.from(walletpaySignedMessage(transmissionId, time, WALLET_WEBHOOK_ID, body)), keys!.private_key_pem).toString('base64');
      return t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json')
        .set('Walletpay-Transmission-Id', transmissionId).set('Walletpay-Transmission-Time', time).set('Walletpay-Transmission-Sig', signature)
        .set('Walletpay-Cert-Url', `${t.baseUrl}/sandbox/walletpay/v1/notifications/certs/${keys!.cert_id}`).set('Walletpay-Auth-Algo', 'SHA256withRSA')
        .send(body);
    };
    const refundStatus = async () => (await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', key)).body.data.status;
    expect((await refunded('0.01', 'USD')).status).toBe(200);
    expect(await refundStatus()).toBe('pending');
    expect((await refunded('15.00', 'EUR')).status).toBe(200);
    expect(await refundStatus()).toBe('pending');
    expect((await get(order.id)).amount_refunded).toBe('0.00');
    expect((await refunded('15.00', 'USD')).status).toBe(200);
    expect(await refundStatus()).toBe('completed');

    const payment = await get(order.id);
    expect(payment).toMatchObject({ status: 'completed', amount_refunded: '15.00' });
    expect(mismatches(payment)).toEqual([
      ['refund', '15.00', 'USD', '0.01', 'USD'],
      ['callback:PAYMENT.CAPTURE.REFUNDED', '15.00', 'USD', '0.01', 'USD'],
      ['callback:PAYMENT.CAPTURE.REFUNDED', '15.00', 'USD', '15.00', 'EUR'],
    ]);
    expect((await refused(order.id)).map((r) => [r.subject, r.trigger, r.reported_amount_minor, r.reported_currency])).toEqual([
      ['refund', 'refund', '1', 'USD'],
      ['refund', 'callback:PAYMENT.CAPTURE.REFUNDED', '1', 'USD'],
      ['refund', 'callback:PAYMENT.CAPTURE.REFUNDED', '1500', 'EUR'],
    ]);
    expect(await t.sql(`SELECT type FROM events WHERE payment_id = $1 AND type = 'payment.refunded'`, [order.id])).toHaveLength(1);
  });

  it('status-sync answers: an order the provider reports captured at another amount or currency stays pending', async () => {
    const order = await approvedOrder('30.00');
    // Captured at the provider outside the service (the merchant's own PayPal API call): the payment is still
    // pending here. (A capture through the service reads the order first and sends nothing when the
    // provider reports another amount: integrity.test.ts.)
    const token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth('reports-client', 'reports-secret').type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token as string;
    await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${order.provider_ref}/capture`).set('Authorization', `Bearer ${token}`).send({}).expect(201);
    await misreport('walletpay', { amount: '0.01' });
    // The merchant then captures through the service: PayPal holds a capture already, so the answer is not
    // "nothing was captured" (a 409 would tell the merchant the buyer paid nothing) but the payment as the
    // provider reports it: pending, the mismatch recorded.
    const capture = await t.http.post(`/v1/payments/${order.id}/capture`).set('X-API-Key', key).send({});
    expect({ status: capture.status, payment: capture.body.data?.status }).toEqual({ status: 200, payment: 'pending' });

    await syncOne(order.id);
    expect((await get(order.id)).status).toBe('pending');
    await misreport('walletpay', { currency: 'EUR' });
    await syncOne(order.id);
    expect((await get(order.id)).status).toBe('pending');
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [order.id])).toEqual([]);
    await misreport('walletpay', {});
    await syncOne(order.id);

    const payment = await get(order.id);
    expect(payment.status).toBe('completed');
    expect(mismatches(payment)).toEqual([
      ['capture', '30.00', 'USD', '0.01', 'USD'],
      ['status-sync', '30.00', 'USD', '0.01', 'USD'],
      ['status-sync', '30.00', 'USD', '30.00', 'EUR'],
    ]);
    expect((await refused(order.id)).map((r) => [r.trigger, r.reported_amount_minor, r.reported_currency])).toEqual([
      ['capture', '1', 'USD'], ['status-sync', '1', 'USD'], ['status-sync', '3000', 'EUR'],
    ]);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [order.id])).toEqual([{ type: 'payment.completed' }]);
  });
});

describe('mobilemoney', () => {
  it('transaction-status results: a result reporting another Amount does not complete the payment; the true one does', async () => {
    const created = await pay({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: SILENT_PHONE });
    const p = created.body.data as { id: string; provider_ref: string };
    const [stk] = await eventually(() => t.sql<{ receipt_number: string }>(
      `SELECT receipt_number FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()`, [p.provider_ref]).then((r) => (r.length ? r : null)), 10_000, 'push completed');
    // The receipt the customer quotes, known on the still-pending payment. No API path records a receipt
    // on a pending payment today (a push without one is answered by the STK query), so it is set directly;
    // check-status then asks the operator's transaction-status API about it, as it does for any receipt.
    await t.sql('UPDATE payments SET receipt_number = $2 WHERE id = $1', [p.id, stk!.receipt_number]);
    const checkStatus = async () => {
      const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${stk!.receipt_number}`).set('X-API-Key', key);
      expect({ status: ack.status, error: ack.body.error }).toEqual({ status: 200, error: undefined });
      await eventually(() => t.sql(`SELECT 1 FROM provider_status_queries WHERE provider_query_ref = $1 AND completed_at IS NOT NULL`, [ack.body.data.OriginatorConversationID])
        .then((r) => (r.length ? r : null)), 10_000, 'status result');
    };
    await misreport('mobilemoney', { amount: 1 });
    await checkStatus();
    expect(await get(p.id)).toMatchObject({
      status: 'pending',
      integrity: { status: 'mismatch', mismatches: [{ source: 'callback:transaction-status', expected_amount: '100.00', expected_currency: 'KES', reported_amount: '1.00', reported_currency: 'KES' }] },
    });
    await misreport('mobilemoney', { amount: '100.01' });
    await checkStatus();
    expect((await get(p.id)).status).toBe('pending');
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);
    await misreport('mobilemoney', {});
    await checkStatus();
    expect(await get(p.id)).toMatchObject({ status: 'completed', provider_ref: stk!.receipt_number });
    expect((await refused(p.id)).map((r) => [r.trigger, r.expected_amount_minor, r.reported_amount_minor, r.reported_currency])).toEqual([
      ['callback:transaction-status', '10000', '100', 'KES'],
      ['callback:transaction-status', '10000', '10001', 'KES'],
    ]);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.completed' }]);
  });
});
