import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { statusQueriesSentDuring } from '../support/operator-watch.js';
import { findSecretsInFiles, inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// Merchant B holds every scope and its own credentials for every provider, and tries every route that
// takes an id with merchant A's ids: each answer must be exactly what an unknown id gets (404), and
// A's data must not move. Then the service's log is searched for every secret this file used.

let t: TestService;
let failing: WebhookReceiver;
let healthy: WebhookReceiver;
const secrets: string[] = [];
let n = 0;

interface Tenant {
  merchantId: string;
  apiKey: string;
}
let A: Tenant;
let B: Tenant;
/** Merchant A's resources. */
const a = {
  cardPayment: '', walletPayment: '', mobilePayment: '', receipt: '', pendingPush: '', checkoutId: '',
  refund: '', card: '', delivery: '', idempotencyKey: '',
};
/** Merchant B's own payment. */
let bPayment = '';

const as = (tenant: Tenant) => ({
  get: (path: string) => t.http.get(path).set('X-API-Key', tenant.apiKey),
  post: (path: string, body?: object, headers: Record<string, string> = {}) => t.http.post(path).set('X-API-Key', tenant.apiKey).set(headers).send(body),
  put: (path: string, body: object) => t.http.put(path).set('X-API-Key', tenant.apiKey).send(body),
  delete: (path: string) => t.http.delete(path).set('X-API-Key', tenant.apiKey),
});

async function configure(tenant: Tenant, name: string, receiver: WebhookReceiver) {
  const api = as(tenant);
  const hook = await api.put('/v1/merchant/webhook', { webhook_url: receiver.url }).expect(200);
  const slug = name.toLowerCase();
  const creds = {
    cardpay: { secret_key: `sk_test_isolation_${slug}_0001` },
    walletpay: { env: 'sandbox', client_id: `wallet-client-${slug}`, client_secret: `wallet-secret-isolation-${slug}` },
    mobilemoney: { env: 'sandbox', consumer_key: `ck-isolation-${slug}`, consumer_secret: `cs-isolation-secret-${slug}`, passkey: `passkey-isolation-${slug}-0001`, shortcode: slug === 'a' ? '600101' : '600202' },
  };
  for (const [provider, values] of Object.entries(creds)) await api.put('/v1/merchant/credentials', { provider, [provider]: values }).expect(200);
  secrets.push(
    tenant.apiKey, hook.body.data.webhook_secret, creds.cardpay.secret_key, creds.walletpay.client_secret, creds.mobilemoney.consumer_secret, creds.mobilemoney.passkey,
  );
}

async function pay(tenant: Tenant, body: object, key = `iso-${Date.now()}-${++n}`) {
  const res = await as(tenant).post('/v1/payments', body, { 'Idempotency-Key': key });
  // Every key here is new: a 200 (a replay) would be someone else's payment answered to this tenant. And the
  // new payment is the paying tenant's (B pays too, with the same body as A: one recorded under A is caught here).
  expect(res.status).toBe(201);
  const [row] = await t.sql<{ merchant_id: string }>('SELECT merchant_id FROM payments WHERE id = $1', [res.body.data.id]);
  expect(row?.merchant_id).toBe(tenant.merchantId);
  return res.body.data as { id: string; status: string; provider_ref: string };
}

const paymentStatus = async (id: string) => (await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [id]))[0]!.status;

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h' });
  failing = await new WebhookReceiver().start();
  failing.failNext(1_000_000);
  healthy = await new WebhookReceiver().start();
  A = await t.createMerchant('Tenant A');
  B = await t.createMerchant('Tenant B');
  await configure(A, 'A', failing);
  await configure(B, 'B', healthy);

  a.idempotencyKey = `tenant-a-order-${Date.now()}`;
  a.cardPayment = (await pay(A, { provider: 'cardpay', amount: '50.00', currency: 'USD', payment_method: 'pm_card_visa' }, a.idempotencyKey)).id;
  bPayment = (await pay(B, { provider: 'cardpay', amount: '50.00', currency: 'USD', payment_method: 'pm_card_visa' })).id;
  a.refund = (await as(A).post('/v1/refunds', { payment_id: a.cardPayment, amount: '5.00' }).expect(201)).body.data.id;
  a.card = (await as(A).post('/v1/payments/cards', { payment_method_id: 'pm_card_visa', customer_email: 'a@example.com' }).expect(201)).body.data.id;
  a.walletPayment = (await pay(A, { provider: 'walletpay', amount: '20.00', currency: 'USD', return_url: 'https://a.example/r', cancel_url: 'https://a.example/c' })).id;
  const mobile = await pay(A, { provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
  a.mobilePayment = mobile.id;
  a.receipt = await eventually(async () => {
    const rows = await t.sql<{ status: string; provider_ref: string }>('SELECT status, provider_ref FROM payments WHERE id = $1', [mobile.id]);
    return rows[0]!.status === 'completed' ? rows[0]!.provider_ref : null;
  }, 15_000, 'the mobile-money payment to complete');
  const silent = await pay(A, { provider: 'mobilemoney', amount: '150', currency: 'KES', phone: '254700000003' });
  a.pendingPush = silent.id;
  a.checkoutId = silent.provider_ref;
  // A's endpoint always fails, so its deliveries end up retrying, then dead: retryable by A.
  a.delivery = await eventually(async () => {
    const rows = await t.sql<{ id: string }>(`SELECT id FROM webhook_deliveries WHERE merchant_id = $1 AND status IN ('retrying', 'dead') LIMIT 1`, [A.merchantId]);
    return rows[0]?.id ?? null;
  }, 15_000, 'a failed delivery of merchant A');

  // Client secrets and signing secrets the providers issued (the simulators keep them).
  for (const row of await t.sql<{ client_secret: string }>('SELECT client_secret FROM sandbox_cardpay_intents')) secrets.push(row.client_secret);
  for (const row of await t.sql<{ secret: string }>('SELECT secret FROM sandbox_cardpay_webhook_endpoints')) secrets.push(row.secret);
}, 90_000);

afterAll(async () => {
  await t?.stop();
  await failing?.stop();
  await healthy?.stop();
});

/** What A's data looks like; compared before and after B's attempts. */
async function stateOfA() {
  return {
    payments: await t.sql('SELECT id, status, amount_refunded_minor::text FROM payments WHERE merchant_id = $1 ORDER BY id', [A.merchantId]),
    refunds: await t.sql('SELECT r.id, r.status FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.merchant_id = $1 ORDER BY r.id', [A.merchantId]),
    cards: await t.sql('SELECT id, active FROM saved_cards WHERE merchant_id = $1 ORDER BY id', [A.merchantId]),
    events: await t.sql('SELECT count(*)::int AS n FROM events WHERE merchant_id = $1', [A.merchantId]),
    manualAttempts: await t.sql(`SELECT count(*)::int AS n FROM delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.merchant_id = $1 AND a.trigger = 'manual'`, [A.merchantId]),
  };
}

describe("merchant B with merchant A's ids", () => {
  const UNKNOWN = '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21';
  const routes: [string, (id: (k: keyof typeof a) => string) => ReturnType<ReturnType<typeof as>['get']>][] = [
    ['GET /v1/payments/:id', (id) => as(B).get(`/v1/payments/${id('cardPayment')}`)],
    ['GET /v1/payments/:id (mobile money)', (id) => as(B).get(`/v1/payments/${id('mobilePayment')}`)],
    ['POST /v1/payments/:id/capture (walletpay)', (id) => as(B).post(`/v1/payments/${id('walletPayment')}/capture`)],
    ['POST /v1/payments/:id/capture (cardpay)', (id) => as(B).post(`/v1/payments/${id('cardPayment')}/capture`)],
    ['GET /v1/refunds/:id', (id) => as(B).get(`/v1/refunds/${id('refund')}`)],
    ['GET /v1/refunds?payment_id=', (id) => as(B).get(`/v1/refunds?payment_id=${id('cardPayment')}`)],
    ['POST /v1/refunds', (id) => as(B).post('/v1/refunds', { payment_id: id('cardPayment'), amount: '1.00' })],
    ['DELETE /v1/payments/cards/:id', (id) => as(B).delete(`/v1/payments/cards/${id('card')}`)],
    ['GET /v1/webhooks/logs/:id', (id) => as(B).get(`/v1/webhooks/logs/${id('delivery')}`)],
    ['POST /v1/webhooks/logs/:id/retry', (id) => as(B).post(`/v1/webhooks/logs/${id('delivery')}/retry`)],
  ];

  it.each(routes)('%s is 404, exactly as for an id that does not exist, and A is untouched', async (_name, send) => {
    const before = await stateOfA();
    const theirs = await send((k) => a[k]);
    const unknown = await send(() => UNKNOWN);
    expect(theirs.status).toBe(404);
    expect(theirs.body).toEqual({ success: false, error: { code: 'NOT_FOUND', message: expect.any(String), request_id: expect.any(String) } });
    // No oracle: the same words whether the id is someone else's or nobody's.
    expect(theirs.body.error.message).toBe(unknown.body.error.message);
    expect(await stateOfA()).toEqual(before);
  });

  it("cannot see A's data through lists and filters", async () => {
    const payments = await as(B).get(`/v1/payments?search=${encodeURIComponent(a.idempotencyKey)}`).expect(200);
    expect(payments.body.meta.total).toBe(0);
    const byReceipt = await as(B).get(`/v1/payments?search=${a.receipt}`).expect(200);
    expect(byReceipt.body.meta.total).toBe(0);
    // B's list is B's payment, and only it (empty would prove nothing: B has one).
    const all = await as(B).get('/v1/payments?page_size=100').expect(200);
    expect(all.body.data.filter((p: { merchant_id: string }) => p.merchant_id !== B.merchantId)).toEqual([]);
    expect(all.body.data.map((p: { id: string }) => p.id)).toEqual([bPayment]);
    expect((await as(B).get(`/v1/webhooks/logs?payment_id=${a.cardPayment}`).expect(200)).body.meta.total).toBe(0);
    expect((await as(B).get('/v1/payments/cards').expect(200)).body.data.map((c: { id: string }) => c.id)).not.toContain(a.card);
  });

  it("cannot replay A's payment with A's Idempotency-Key (409, nothing of A's in the answer)", async () => {
    const res = await as(B).post('/v1/payments', { provider: 'cardpay', amount: '50.00', currency: 'USD', payment_method: 'pm_card_visa' }, { 'Idempotency-Key': a.idempotencyKey });
    expect(res.status).toBe(409);
    expect(JSON.stringify(res.body)).not.toContain(a.cardPayment);
  });

  it("asks the operator about A's receipt only under B's own shortcode, and answers A's CheckoutRequestID as nobody's: nothing of A's is read or changed", async () => {
    // check-status forwards a receipt-like code that is none of the merchant's payments to the operator as
    // it is (it also serves receipts paid outside the API), so the answer is whatever the operator says for
    // an unknown code. Isolation: exactly the answer a made-up code of the same shape gets, and B's query is
    // B's alone (under B's shortcode, linked to no payment).
    const before = await stateOfA();
    const ack = await as(B).post(`/v1/payments/mobilemoney/check-status/${a.receipt}`);
    const unknown = await as(B).post('/v1/payments/mobilemoney/check-status/QWE1RT2YUI');
    expect([ack.status, unknown.status]).toEqual([200, 200]);
    const query = await eventually(async () => {
      const rows = await t.sql<{ merchant_id: string; payment_id: string | null; result_code: string | null }>(
        'SELECT merchant_id, payment_id, result_code FROM provider_status_queries WHERE provider_query_ref = $1 AND completed_at IS NOT NULL',
        [ack.body.data.OriginatorConversationID],
      );
      return rows[0] ?? null;
    }, 15_000, 'the operator result');
    // The operator knows no such receipt under B's shortcode.
    expect(query).toEqual({ merchant_id: B.merchantId, payment_id: null, result_code: 'R000002' });
    // A CheckoutRequestID names a push of ours, never a transaction the status query takes: one that is none
    // of B's is 404, in the same words as a made-up one, and nothing is sent.
    const { result: [theirs, nobodys], sent } = await statusQueriesSentDuring(t, async () => {
      const answers = [
        await as(B).post(`/v1/payments/mobilemoney/check-status/${a.checkoutId}`),
        await as(B).post('/v1/payments/mobilemoney/check-status/ws_CO_22112026000000000000'),
      ] as const;
      // A receipt-like code is sent: the operator's side is watched.
      expect((await as(B).post('/v1/payments/mobilemoney/check-status/QWE1RT2YUI')).status).toBe(200);
      return answers;
    });
    expect(sent).toContain('QWE1RT2YUI');
    expect(sent).not.toContain(a.checkoutId);
    expect(sent).not.toContain('ws_CO_22112026000000000000');
    expect([theirs.status, nobodys.status]).toEqual([404, 404]);
    expect(theirs.body).toEqual({ success: false, error: { code: 'NOT_FOUND', message: nobodys.body.error.message, request_id: expect.any(String) } });
    expect(await t.sql('SELECT 1 FROM provider_status_queries WHERE code = $1', [a.checkoutId])).toEqual([]);
    expect(await paymentStatus(a.pendingPush)).toBe('pending');
    expect(await stateOfA()).toEqual(before);
  }, 40_000);
});

describe('the service log', () => {
  it('holds none of the API keys, provider secrets, client secrets, passkeys or whsec_ secrets used here', () => {
    expect(secrets.length).toBeGreaterThanOrEqual(14);
    expect(findSecretsInFiles([inProcessLogFile(t.databaseUrl)], secrets)).toEqual([]);
  });
});
