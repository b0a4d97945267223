import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';
import { sendSignedWalletpayEvent } from '../support/walletpay-events.js';

/**
 * Issue 10, point 1: every provider-reported outcome is compared with the payment (or the refund) in
 * amount AND currency. For each path: a wrong amount and a wrong currency change no status (the audit
 * holds the refused report with both amounts, the payment shows `integrity: mismatch`), the right
 * amount settles. Hostile answers come from the simulators' misreport switch; hostile callbacks are
 * signed by the test with the sandbox secrets it knows.
 */

const CARD_SIGNING_SECRET = 'whsec_integrity_test_secret';
const MM_PASSKEY = 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919';
const MM_CREDS = { env: 'sandbox', consumer_key: 'integrity-key', consumer_secret: 'integrity-secret', passkey: MM_PASSKEY, shortcode: '174379', nominated_number: '254708374149' };
const SILENT_PHONE = '254700000003';
const WALLET_WEBHOOK_ID = 'WH-INTEGRITY-NONE';

let t: TestService;
let key: string;
let n = 0;

const misreport = (provider: string, body: Record<string, unknown>) => t.http.post(`/sandbox/${provider}/_control/misreport`).send(body).expect(200);
const idem = () => `integrity-${randomUUID()}`;
const pay = (body: Record<string, unknown>) => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem()).send(body);
const get = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;
const refused = (paymentId: string) =>
  t.sql<{ subject: string; to_status: string; trigger: string; expected_amount_minor: string; expected_currency: string; reported_amount_minor: string | null; reported_currency: string | null }>(
    `SELECT subject, to_status, trigger, expected_amount_minor::text, expected_currency, reported_amount_minor::text, reported_currency
     FROM payment_transitions WHERE payment_id = $1 AND NOT accepted AND expected_amount_minor IS NOT NULL ORDER BY id`,
    [paymentId],
  );
const metric = async (provider: string, source: string) => {
  const text = (await t.http.get('/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`payments_integrity_mismatches_total{provider="${provider}",source="${source}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
};
const syncOne = (id: string) => t.inContext(() => t.service.container.services.statusSync.syncOne(id));

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h', SANDBOX_CALLBACK_DELAY_MS: '1500' });
  ({ apiKey: key } = await t.createMerchant('Integrity Shop'));
  // Our own signing secret: the card simulator sends no events here; every callback is the test's.
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_integrity_01', webhook_secret: CARD_SIGNING_SECRET } }).expect(200);
  // A webhook id the simulator does not know: it sends no capture events, so only answers are tested.
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'integrity-client', client_secret: 'integrity-secret', webhook_id: WALLET_WEBHOOK_ID } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: MM_CREDS }).expect(200);
});
afterEach(async () => {
  for (const provider of ['cardpay', 'walletpay', 'mobilemoney']) await misreport(provider, {});
});
afterAll(async () => {
  await t.stop();
});

describe('cardpay', () => {
  it('creation answers and status-sync answers: only the matching one settles', async () => {
    const before = await metric('cardpay', 'create');
    await misreport('cardpay', { amount: 1 });
    const wrongAmount = await pay({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(wrongAmount.status).toBe(201);
    expect(wrongAmount.body.data).toMatchObject({
      status: 'pending',
      integrity: { status: 'mismatch', mismatches: [{ source: 'create', expected_amount: '25.00', expected_currency: 'USD', reported_amount: '0.01', reported_currency: 'USD', at: expect.any(String) }] },
    });
    await misreport('cardpay', { currency: 'eur' });
    const wrongCurrency = await pay({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(wrongCurrency.body.data).toMatchObject({ status: 'pending', integrity: { status: 'mismatch', mismatches: [{ reported_amount: '25.00', reported_currency: 'EUR' }] } });
    await misreport('cardpay', {});
    const right = await pay({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(right.body.data).toMatchObject({ status: 'completed', integrity: { status: 'ok', mismatches: [] } });

    expect(await refused(wrongAmount.body.data.id)).toEqual([
      { subject: 'payment', to_status: 'completed', trigger: 'create', expected_amount_minor: '2500', expected_currency: 'USD', reported_amount_minor: '1', reported_currency: 'USD' },
    ]);
    expect(await refused(right.body.data.id)).toEqual([]);
    expect(await metric('cardpay', 'create')).toBe(before + 2);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = ANY($1)', [[wrongAmount.body.data.id, wrongCurrency.body.data.id]])).toEqual([]);

    // The status sync asks again: a lying answer is refused too; the truthful one settles.
    await misreport('cardpay', { amount: 2499 });
    await syncOne(wrongAmount.body.data.id);
    const stillPending = await get(wrongAmount.body.data.id);
    expect(stillPending.status).toBe('pending');
    expect(stillPending.integrity.mismatches.map((m: { source: string; reported_amount: string }) => [m.source, m.reported_amount])).toEqual([['create', '0.01'], ['status-sync', '24.99']]);
    await misreport('cardpay', {});
    await syncOne(wrongAmount.body.data.id);
    expect(await get(wrongAmount.body.data.id)).toMatchObject({ status: 'completed', integrity: { status: 'mismatch' } });
  });

  it('callbacks: a signed payment_intent.succeeded with another amount or currency changes nothing', async () => {
    const created = await pay({ provider: 'cardpay', amount: '40.00', currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' });
    const p = created.body.data as { id: string; provider_ref: string };
    expect(created.body.data.status).toBe('pending');
    const send = async (amount: number, currency: string) => {
      const body = JSON.stringify({
        id: `evt_integrity_${++n}`, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type: 'payment_intent.succeeded',
        data: { object: { object: 'payment_intent', id: p.provider_ref, status: 'succeeded', amount, amount_received: amount, currency, metadata: { payment_id: p.id } } },
      });
      return t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, CARD_SIGNING_SECRET)).send(body);
    };
    expect((await send(1, 'eur')).status).toBe(200);
    expect((await get(p.id)).status).toBe('pending');
    expect((await send(4000, 'usd')).status).toBe(200);
    expect((await get(p.id)).status).toBe('pending');
    expect((await send(4000, 'eur')).status).toBe(200);
    const done = await get(p.id);
    expect(done.status).toBe('completed');
    expect(done.integrity.mismatches.map((m: Record<string, string>) => [m.source, m.expected_amount, m.expected_currency, m.reported_amount, m.reported_currency])).toEqual([
      ['callback:payment_intent.succeeded', '40.00', 'EUR', '0.01', 'EUR'],
      ['callback:payment_intent.succeeded', '40.00', 'EUR', '40.00', 'USD'],
    ]);
    expect((await refused(p.id)).map((r) => [r.reported_amount_minor, r.reported_currency])).toEqual([['1', 'EUR'], ['4000', 'USD']]);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.completed' }]);
  });

  it('a partial capture: a succeeded intent that collected less than it asked for (amount_received) does not complete the payment', async () => {
    const created = await pay({ provider: 'cardpay', amount: '40.00', currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' });
    const p = created.body.data as { id: string; provider_ref: string };
    const body = JSON.stringify({
      id: `evt_integrity_${++n}`, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type: 'payment_intent.succeeded',
      data: { object: { object: 'payment_intent', id: p.provider_ref, status: 'succeeded', amount: 4000, amount_received: 100, currency: 'eur', metadata: { payment_id: p.id } } },
    });
    const res = await t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, CARD_SIGNING_SECRET)).send(body);
    expect(res.status).toBe(200);
    expect(await get(p.id)).toMatchObject({
      status: 'pending',
      integrity: { status: 'mismatch', mismatches: [{ source: 'callback:payment_intent.succeeded', expected_amount: '40.00', expected_currency: 'EUR', reported_amount: '1.00', reported_currency: 'EUR' }] },
    });
    // Nothing to refund: the payment is not completed.
    expect((await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id, amount: '40.00' })).status).not.toBe(201);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);
  });

  it('a partial capture seen by the status sync: the intent succeeded with amount_received below its amount, the payment stays pending', async () => {
    const created = await pay({ provider: 'cardpay', amount: '40.00', currency: 'EUR', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' });
    const p = created.body.data as { id: string; provider_ref: string };
    await t.sql(`UPDATE sandbox_cardpay_intents SET status = 'succeeded', amount_received = 100, next_action = NULL WHERE id = $1`, [p.provider_ref]);
    await syncOne(p.id);
    expect(await get(p.id)).toMatchObject({
      status: 'pending',
      integrity: { status: 'mismatch', mismatches: [{ source: 'status-sync', expected_amount: '40.00', reported_amount: '1.00', reported_currency: 'EUR' }] },
    });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);
    // Collected in full: it completes.
    await t.sql(`UPDATE sandbox_cardpay_intents SET amount_received = amount WHERE id = $1`, [p.provider_ref]);
    await syncOne(p.id);
    expect((await get(p.id)).status).toBe('completed');
  });

  it('a report that would complete a payment without naming an amount is refused too (no path can skip the check)', async () => {
    const created = await pay({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r' });
    const id = created.body.data.id as string;
    const applied = await t.inContext(() => t.service.container.services.payments.applyUpdate(id, { status: 'completed' }, 'test'));
    expect(applied.transitioned).toBe(false);
    expect(await get(id)).toMatchObject({
      status: 'pending',
      integrity: { status: 'mismatch', mismatches: [{ source: 'test', expected_amount: '12.00', expected_currency: 'USD', reported_amount: null, reported_currency: null }] },
    });
    expect(await refused(id)).toEqual([
      { subject: 'payment', to_status: 'completed', trigger: 'test', expected_amount_minor: '1200', expected_currency: 'USD', reported_amount_minor: null, reported_currency: null },
    ]);
  });

  it('refund answers: a refund the provider reports with another amount or currency stays pending', async () => {
    const paid = await pay({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
    const id = paid.body.data.id as string;
    await misreport('cardpay', { amount: 1 });
    const wrongAmount = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id, amount: '5.00' });
    expect(wrongAmount.status).toBe(201);
    expect(wrongAmount.body.data.status).toBe('pending');
    await misreport('cardpay', { currency: 'gbp' });
    const wrongCurrency = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id, amount: '5.00' });
    expect(wrongCurrency.body.data.status).toBe('pending');
    await misreport('cardpay', {});
    const right = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id, amount: '5.00' });
    expect(right.body.data.status).toBe('completed');

    const payment = await get(id);
    expect(payment).toMatchObject({ status: 'completed', amount_refunded: '5.00' });
    expect(payment.integrity.mismatches.map((m: Record<string, string>) => [m.source, m.refund_id, m.expected_amount, m.reported_amount, m.reported_currency])).toEqual([
      ['refund', wrongAmount.body.data.id, '5.00', '0.01', 'USD'],
      ['refund', wrongCurrency.body.data.id, '5.00', '5.00', 'GBP'],
    ]);
    expect((await refused(id)).map((r) => [r.subject, r.to_status, r.reported_amount_minor])).toEqual([['refund', 'completed', '1'], ['refund', 'completed', '500']]);
    expect(await t.sql(`SELECT type FROM events WHERE payment_id = $1 AND type = 'payment.refunded'`, [id])).toHaveLength(1);
  });

  it('charge.refunded: our refund completes only when the provider lists it with its amount and currency', async () => {
    const paid = await pay({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' });
    const id = paid.body.data.id as string;
    const full = await get(id);
    const chargeId = (full.provider_response as { latest_charge: string }).latest_charge;
    await misreport('cardpay', { amount: 1 });
    const refund = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id, amount: '10.00' });
    expect(refund.body.data.status).toBe('pending');
    const chargeRefunded = async () => {
      const body = JSON.stringify({
        id: `evt_integrity_${++n}`, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type: 'charge.refunded',
        data: { object: { object: 'charge', id: chargeId, payment_intent: full.provider_ref, amount: 2500, amount_refunded: 1000, currency: 'usd' } },
      });
      return t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, CARD_SIGNING_SECRET)).send(body);
    };
    // The provider's refund list (read when charge.refunded arrives) lies too: still pending.
    expect((await chargeRefunded()).status).toBe(200);
    expect((await t.http.get(`/v1/refunds/${refund.body.data.id}`).set('X-API-Key', key)).body.data.status).toBe('pending');
    await misreport('cardpay', { currency: 'eur' });
    expect((await chargeRefunded()).status).toBe(200);
    expect((await t.http.get(`/v1/refunds/${refund.body.data.id}`).set('X-API-Key', key)).body.data.status).toBe('pending');
    await misreport('cardpay', {});
    expect((await chargeRefunded()).status).toBe(200);
    expect((await t.http.get(`/v1/refunds/${refund.body.data.id}`).set('X-API-Key', key)).body.data.status).toBe('completed');
    const payment = await get(id);
    expect(payment.amount_refunded).toBe('10.00');
    expect(payment.integrity.mismatches.map((m: Record<string, string>) => [m.source, m.reported_amount, m.reported_currency])).toEqual([
      ['refund', '0.01', 'USD'],
      ['callback:charge.refunded', '0.01', 'USD'],
      ['callback:charge.refunded', '10.00', 'EUR'],
    ]);
  });

  it('a refund made at the provider that does not fit the payment is a mismatch: logged, counted and shown, nothing applied; one already applied, listed again, stays quiet', async () => {
    // This merchant's endpoint is registered by the service (no webhook_secret): the simulator sends the events.
    const secretKey = 'sk_test_integrity_dashboard';
    const { apiKey } = await t.createMerchant('Integrity Dashboard Shop');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
    const paid = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', idem()).send({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(paid.body.data.status).toBe('completed');
    const p = paid.body.data as { id: string; provider_ref: string };
    const payment = async () => (await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', apiKey).expect(200)).body.data;
    const dashboardRefund = (amount: number) =>
      t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${secretKey}`).type('form').send({ payment_intent: p.provider_ref, amount: String(amount) }).expect(200);
    const handled = (type: string, count: number) =>
      eventually(async () => (await t.sql('SELECT 1 FROM provider_events WHERE payment_id = $1 AND outcome = $2', [p.id, type])).length === count, 10_000, `${count} ${type}`);
    // One dashboard refund is told by two events (charge.refunded, refund.created), in either order.
    const counted = async () => (await metric('cardpay', 'callback:charge.refunded')) + (await metric('cardpay', 'callback:refund.created'));
    const before = await counted();

    // The refund list the pipeline reads for the events says 50.00 were refunded of this 12.00 payment.
    await misreport('cardpay', { amount: 5000 });
    await dashboardRefund(200);
    await handled('charge.refunded', 1);
    await handled('refund.created', 1);
    await misreport('cardpay', {});
    const refused = await payment();
    expect(refused).toMatchObject({ status: 'completed', amount_refunded: '0.00', integrity: { status: 'mismatch' } });
    // Listed and counted once, whichever event told first (each event type used to add its own).
    expect(refused.integrity.mismatches).toEqual([
      expect.objectContaining({ source: expect.stringMatching(/^callback:(charge\.refunded|refund\.created)$/), expected_amount: '12.00', expected_currency: 'USD', reported_amount: '50.00', reported_currency: 'USD' }),
    ]);
    expect(await counted()).toBe(before + 1);
    expect((await t.http.get(`/v1/refunds?payment_id=${p.id}`).set('X-API-Key', apiKey).expect(200)).body.data).toEqual([]);

    // Truthful again: the next refund's events list both, which fit and are applied; their repeats add nothing.
    await dashboardRefund(100);
    await handled('charge.refunded', 2);
    await handled('refund.created', 2);
    const settled = await payment();
    expect(settled).toMatchObject({ status: 'completed', amount_refunded: '3.00' });
    expect(settled.integrity.mismatches).toEqual(refused.integrity.mismatches);
    expect(await counted()).toBe(before + 1);
  });
});

/**
 * In front of the card simulator: a refund of the intent `swap.intent` is made, but answered with the
 * refund `swap.answerWith` — another payment's (a cache or proxy mixing answers up).
 */
class RefundAnsweredWithAnother extends ForwardingStub {
  swap: { intent: string; answerWith: string } | null = null;

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const made = await forward();
    const swap = this.swap;
    if (!swap || req.method !== 'POST' || !req.url.endsWith('/v1/refunds') || new URLSearchParams(req.body.toString()).get('payment_intent') !== swap.intent) return made;
    const other = await fetch(`${this.target}${req.url}/${swap.answerWith}`, { headers: { authorization: String(req.headers.authorization) } });
    return { status: other.status, headers: { 'Content-Type': 'application/json' }, body: await other.text() };
  }
}

describe('cardpay refund answered with another refund', () => {
  it("another payment's succeeded refund of the same amount is no answer about ours: pending, nothing refunded, no payment.refunded; the refund sync settles it by our own refund", async () => {
    const stub = new RefundAnsweredWithAnother();
    const stubUrl = await stub.start();
    // An hour between the refund sync's runs: the sync below is the one the test asks for.
    const s = await startTestService({ CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay`, STATUS_SYNC_POLL_INTERVAL: '1h' });
    stub.target = s.baseUrl;
    try {
      const secretKey = 'sk_test_refund_answer_0001';
      // Its own webhook secret and no endpoint: no provider event reaches the service, only answers count.
      const { apiKey } = await s.createMerchant('Refund Answer Shop');
      await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
        .send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: 'whsec_refund_answer' } }).expect(200);
      const pay = async () => (await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', idem())
        .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' })).body.data as { id: string; status: string; provider_ref: string };
      const refund = (paymentId: string) => s.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: paymentId, amount: '3.00' });
      const payment = async (id: string) => (await s.http.get(`/v1/payments/${id}`).set('X-API-Key', apiKey).expect(200)).body.data;
      const eventsOf = async (id: string) => (await s.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1 ORDER BY created_at', [id])).map((e) => e.type);
      const a = await pay();
      const b = await pay();
      expect([a.status, b.status]).toEqual(['completed', 'completed']);
      const ofB = (await refund(b.id)).body.data as { status: string; provider_ref: string };
      expect(ofB).toMatchObject({ status: 'completed', provider_ref: expect.stringMatching(/^re_/) });

      stub.swap = { intent: a.provider_ref, answerWith: ofB.provider_ref };
      const asked = await refund(a.id);
      stub.swap = null;
      // Was: completed with B's re_…, A's amount_refunded 3.00 and payment.refunded for A, on B's refund.
      expect(asked.status).toBe(201);
      expect(asked.body.data).toMatchObject({ status: 'pending', provider_ref: null });
      expect(await payment(a.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
      expect(await eventsOf(a.id)).toEqual(['payment.completed']);

      // The refund sync finds our refund at the provider by its metadata (the request was made): it settles it.
      await s.inContext(() => s.service.container.services.refundSync.syncOne(asked.body.data.id));
      const atProvider = (await s.http.get(`/sandbox/cardpay/v1/refunds?payment_intent=${a.provider_ref}`).set('Authorization', `Bearer ${secretKey}`).expect(200)).body.data as { id: string }[];
      expect(atProvider).toHaveLength(1);
      expect((await s.http.get(`/v1/refunds/${asked.body.data.id}`).set('X-API-Key', apiKey).expect(200)).body.data).toMatchObject({ status: 'completed', provider_ref: atProvider[0]!.id });
      expect(await payment(a.id)).toMatchObject({ amount_refunded: '3.00' });
      expect(await eventsOf(a.id)).toEqual(['payment.completed', 'payment.refunded']);
      expect(await payment(b.id)).toMatchObject({ amount_refunded: '3.00' });
      expect(await eventsOf(b.id)).toEqual(['payment.completed', 'payment.refunded']);
    } finally {
      await stub.stop();
      await s.stop();
    }
  });
});

describe('walletpay', () => {
  const approve = async (nextActionUrl: string) => {
    const approval = new URL(nextActionUrl);
    expect((await t.http.get(`${approval.pathname}${approval.search}&auto=approve`)).status).toBeLessThan(400);
  };
  const capturesOf = async (orderId: string) => (await t.sql<{ n: string }>('SELECT count(*)::text AS n FROM sandbox_walletpay_captures WHERE order_id = $1', [orderId]))[0]!.n;

  it('an order changed at the provider after approval (PATCH of its amount) is not captured: 409, nothing captured, the mismatch recorded', async () => {
    const created = await pay({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
    const p = created.body.data as { id: string; provider_ref: string; reference: string; next_action: { url: string } };
    await approve(p.next_action.url);

    // Anyone holding the merchant's PayPal credentials may change the order while it awaits capture, as PayPal allows.
    const token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth('integrity-client', 'integrity-secret').type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token as string;
    await t.http.patch(`/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}`).set('Authorization', `Bearer ${token}`)
      .send([{ op: 'replace', path: `/purchase_units/@reference_id=='${p.reference}'/amount`, value: { currency_code: 'USD', value: '0.01' } }]).expect(204);
    const order = (await t.http.get(`/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}`).set('Authorization', `Bearer ${token}`).expect(200)).body;
    expect(order).toMatchObject({ status: 'APPROVED', purchase_units: [{ amount: { currency_code: 'USD', value: '0.01' } }] });

    const refusedCapture = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key);
    expect(refusedCapture.status).toBe(409);
    expect(refusedCapture.body.error).toMatchObject({ code: 'CONFLICT', message: expect.stringMatching(/nothing was captured: walletpay holds this payment for 0\.01 USD, not its 45\.00 USD/) });
    expect(await capturesOf(p.provider_ref)).toBe('0');
    const payment = await get(p.id);
    expect(payment).toMatchObject({
      status: 'pending',
      integrity: { status: 'mismatch', mismatches: [{ source: 'capture', expected_amount: '45.00', expected_currency: 'USD', reported_amount: '0.01', reported_currency: 'USD' }] },
    });
    expect((await refused(p.id)).map((r) => [r.trigger, r.to_status, r.reported_amount_minor, r.reported_currency])).toEqual([['capture', 'pending', '1', 'USD']]);
  });

  it('the simulator refuses patches PayPal refuses', async () => {
    const created = await pay({ provider: 'walletpay', amount: '12.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
    const p = created.body.data as { id: string; provider_ref: string; reference: string; next_action: { url: string } };
    const token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth('integrity-client', 'integrity-secret').type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token as string;
    const patch = (ops: unknown) => t.http.patch(`/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}`).set('Authorization', `Bearer ${token}`).send(ops as object);
    const amountPath = `/purchase_units/@reference_id=='${p.reference}'/amount`;
    const issue = (r: { status: number; body: { details?: { issue: string }[] } }) => [r.status, r.body.details?.[0]?.issue];
    expect(issue(await patch({ op: 'replace' }))).toEqual([400, 'MALFORMED_REQUEST_JSON']);
    expect(issue(await patch([{ op: 'replace', value: { currency_code: 'USD', value: '1.00' } }]))).toEqual([400, 'PATCH_PATH_REQUIRED']);
    expect(issue(await patch([{ op: 'replace', path: amountPath }]))).toEqual([400, 'PATCH_VALUE_REQUIRED']);
    expect(issue(await patch([{ op: 'add', path: amountPath, value: { currency_code: 'USD', value: '1.00' } }]))).toEqual([422, 'INVALID_PATCH_OPERATION']);
    expect(issue(await patch([{ op: 'replace', path: "/purchase_units/@reference_id=='other'/amount", value: { currency_code: 'USD', value: '1.00' } }]))).toEqual([422, 'REFERENCE_ID_NOT_FOUND']);
    expect(issue(await patch([{ op: 'replace', path: amountPath, value: { currency_code: 'USD', value: '1.001' } }]))).toEqual([422, 'DECIMAL_PRECISION']);
    expect(issue(await patch([{ op: 'replace', path: amountPath, value: { currency_code: 'USD', value: '0.00' } }]))).toEqual([422, 'CANNOT_BE_ZERO_OR_NEGATIVE']);
    // Unchanged by the refusals: the payment captures its own amount.
    await approve(p.next_action.url);
    expect((await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).expect(200)).body.data.status).toBe('completed');
    expect(issue(await patch([{ op: 'replace', path: amountPath, value: { currency_code: 'USD', value: '1.00' } }]))).toEqual([422, 'ORDER_ALREADY_COMPLETED']);
  });

  it('a provider reporting another amount or currency: nothing is captured, the payment stays pending; the right amount captures', async () => {
    const created = await pay({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
    const id = created.body.data.id as string;
    const orderId = created.body.data.provider_ref as string;
    await approve(created.body.data.next_action.url);

    // The order is read before the capture: a report of another amount or currency stops it there.
    await misreport('walletpay', { amount: '0.01' });
    const wrongAmount = await t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', key);
    expect(wrongAmount.status).toBe(409);
    await misreport('walletpay', { currency: 'EUR' });
    const wrongCurrency = await t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', key);
    expect(wrongCurrency.status).toBe(409);
    expect(await capturesOf(orderId)).toBe('0');
    expect((await get(id)).status).toBe('pending');
    await misreport('walletpay', {});
    const right = await t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', key);
    expect(right.body.data.status).toBe('completed');

    const payment = await get(id);
    expect(payment.integrity.mismatches.map((m: Record<string, string>) => [m.source, m.expected_amount, m.expected_currency, m.reported_amount, m.reported_currency])).toEqual([
      ['capture', '45.00', 'USD', '0.01', 'USD'],
      ['capture', '45.00', 'USD', '45.00', 'EUR'],
    ]);
    expect((await refused(id)).map((r) => [r.to_status, r.reported_amount_minor, r.reported_currency])).toEqual([['pending', '1', 'USD'], ['pending', '4500', 'EUR']]);

    // Refund answers: the same for a refund of the captured payment.
    await misreport('walletpay', { amount: '0.01' });
    const wrongRefund = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id, amount: '15.00' });
    expect(wrongRefund.body.data.status).toBe('pending');
    await misreport('walletpay', {});
    const rightRefund = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id, amount: '15.00' });
    expect(rightRefund.body.data.status).toBe('completed');
    const refunded = await get(id);
    expect(refunded.amount_refunded).toBe('15.00');
    expect(refunded.integrity.mismatches.at(-1)).toMatchObject({ source: 'refund', refund_id: wrongRefund.body.data.id, expected_amount: '15.00', reported_amount: '0.01' });
  });
});

describe('walletpay callbacks', () => {
  /** A walletpay event signed with the simulator's signing key (made at boot), as the sandbox operator's own signature. */
  const sendSigned = (eventType: string, resourceType: string, resource: Record<string, unknown>) =>
    sendSignedWalletpayEvent(t, WALLET_WEBHOOK_ID, eventType, resourceType, resource);

  it('a provider-signed PAYMENT.CAPTURE.COMPLETED of another amount or currency does not complete the payment', async () => {
    const created = await pay({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
    const p = created.body.data as { id: string; provider_ref: string };
    const send = (value: string, currency: string) =>
      sendSigned('PAYMENT.CAPTURE.COMPLETED', 'capture', {
        id: `CAP${++n}INTEGRITY`, status: 'COMPLETED', amount: { currency_code: currency, value }, final_capture: true, custom_id: p.id,
        supplementary_data: { related_ids: { order_id: p.provider_ref } },
      });
    expect((await send('0.01', 'USD')).status).toBe(200);
    expect((await get(p.id)).status).toBe('pending');
    expect((await send('45.00', 'EUR')).status).toBe(200);
    expect((await get(p.id)).status).toBe('pending');
    expect((await send('45.00', 'USD')).status).toBe(200);
    const done = await get(p.id);
    expect(done.status).toBe('completed');
    expect(done.integrity.mismatches.map((m: Record<string, string>) => [m.source, m.reported_amount, m.reported_currency])).toEqual([
      ['callback:PAYMENT.CAPTURE.COMPLETED', '0.01', 'USD'],
      ['callback:PAYMENT.CAPTURE.COMPLETED', '45.00', 'EUR'],
    ]);
    expect((await refused(p.id)).map((r) => [r.expected_amount_minor, r.reported_amount_minor, r.reported_currency])).toEqual([['4500', '1', 'USD'], ['4500', '4500', 'EUR']]);
  });

  it('a PAYMENT.CAPTURE.REVERSED of more than is left to refund is a mismatch: nothing applied, counted and shown', async () => {
    const created = await pay({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
    const id = created.body.data.id as string;
    const approval = new URL(created.body.data.next_action.url);
    expect((await t.http.get(`${approval.pathname}${approval.search}&auto=approve`)).status).toBeLessThan(400);
    expect((await t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', key)).body.data.status).toBe('completed');
    expect((await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id, amount: '40.00' })).body.data.status).toBe('completed');
    const [capture] = await t.sql<{ id: string }>('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [created.body.data.provider_ref]);
    const before = await metric('walletpay', 'callback:PAYMENT.CAPTURE.REVERSED');

    // PayPal reports taking back 10.00 of a capture with 5.00 left here.
    const reversed = await sendSigned('PAYMENT.CAPTURE.REVERSED', 'refund', {
      id: `REV${++n}INTEGRITY`, status: 'COMPLETED', amount: { currency_code: 'USD', value: '10.00' },
      links: [{ rel: 'up', method: 'GET', href: `${t.baseUrl}/sandbox/walletpay/v2/payments/captures/${capture!.id}` }],
    });
    expect(reversed.status).toBe(200);
    const payment = await get(id);
    expect(payment).toMatchObject({ status: 'completed', amount_refunded: '40.00', integrity: { status: 'mismatch' } });
    expect(payment.integrity.mismatches).toEqual([
      expect.objectContaining({ source: 'callback:PAYMENT.CAPTURE.REVERSED', expected_amount: '5.00', reported_amount: '10.00', reported_currency: 'USD' }),
    ]);
    expect(await metric('walletpay', 'callback:PAYMENT.CAPTURE.REVERSED')).toBe(before + 1);
  });
});

describe('mobilemoney', () => {
  const pending = async () => {
    // The customer has answered the previous test's prompt: the operator locks a phone while its prompt is open.
    await t.sql('UPDATE sandbox_mobilemoney_stk_requests SET completes_at = now() WHERE phone = $1 AND completes_at > now()', [SILENT_PHONE]);
    const res = await pay({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: SILENT_PHONE });
    expect(res.body.data.status).toBe('pending');
    return res.body.data as { id: string; provider_ref: string; reference: string };
  };

  it('STK callbacks: a callback with another Amount changes nothing; the operator\'s true callback still settles', async () => {
    const p = await pending();
    const [stk] = await t.sql<{ callback_url: string }>('SELECT callback_url FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1', [p.provider_ref]);
    const url = new URL(stk!.callback_url);
    const callback = (amount: number) => t.http.post(`${url.pathname}${url.search}`).send({
      Body: { stkCallback: {
        MerchantRequestID: 'm-integrity', CheckoutRequestID: p.provider_ref, ResultCode: 0, ResultDesc: 'ok',
        CallbackMetadata: { Item: [{ Name: 'Amount', Value: amount }, { Name: 'MpesaReceiptNumber', Value: 'INTEG12345' }, { Name: 'PhoneNumber', Value: 254700000003 }] },
      } },
    });
    expect((await callback(1)).status).toBe(200);
    expect(await get(p.id)).toMatchObject({ status: 'pending', integrity: { status: 'mismatch', mismatches: [{ source: 'callback:stk', expected_amount: '100.00', expected_currency: 'KES', reported_amount: '1.00', reported_currency: 'KES' }] } });
    expect((await callback(100)).status).toBe(200);
    expect(await get(p.id)).toMatchObject({ status: 'completed', provider_ref: 'INTEG12345' });
    expect((await refused(p.id)).map((r) => [r.trigger, r.expected_amount_minor, r.reported_amount_minor])).toEqual([['callback:stk', '10000', '100']]);
  });

  it('reconciliation: a pulled transaction quoting the payment\'s reference with another amount is skipped, with the reason and both amounts', async () => {
    const p = await pending();
    await misreport('mobilemoney', { amount: 1 });
    // The customer's transaction shows in the pull once the operator completed it (after the callback delay).
    const refusedRun = await eventually(async () => {
      const res = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send({});
      return res.body.data?.results.some((r: { payment_id?: string }) => r.payment_id === p.id) ? res : null;
    }, 10_000, 'the pulled transaction');
    expect(refusedRun.status).toBe(200);
    const report = refusedRun.body.data;
    // decisions.md's shape: exactly these counts, and only the three outcomes a merchant's client knows.
    expect(Object.keys(report).sort()).toEqual(['not_found', 'pulled', 'results', 'skipped', 'updated']);
    for (const r of report.results) expect(['updated', 'skipped', 'not_found']).toContain(r.outcome);
    expect(report.updated + report.skipped + report.not_found).toBe(report.pulled);
    const row = report.results.find((r: { payment_id?: string }) => r.payment_id === p.id);
    expect(row).toEqual({
      receipt: expect.any(String), outcome: 'skipped', payment_id: p.id,
      reason: 'amount_mismatch', expected_amount: '100.00', expected_currency: 'KES', reported_amount: '1.00', reported_currency: 'KES',
    });
    // Nothing moved: still pending, no event for the merchant, the refused report on the payment.
    expect(await get(p.id)).toMatchObject({ status: 'pending', integrity: { status: 'mismatch', mismatches: [{ source: 'reconciliation', reported_amount: '1.00' }] } });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);

    // Run again with the same lie: reported again, recorded once.
    const again = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send({});
    expect(again.body.data.results.find((r: { payment_id?: string }) => r.payment_id === p.id)).toMatchObject({ outcome: 'skipped', reason: 'amount_mismatch' });
    expect((await get(p.id)).integrity.mismatches).toHaveLength(1);
    expect((await get(p.id)).status).toBe('pending');

    await misreport('mobilemoney', {});
    const updated = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send({});
    expect(updated.body.data.results.find((r: { payment_id?: string }) => r.payment_id === p.id).outcome).toBe('updated');
    expect((await get(p.id)).status).toBe('completed');
    expect((await refused(p.id)).map((r) => [r.trigger, r.expected_amount_minor, r.reported_amount_minor, r.reported_currency])).toEqual([['reconciliation', '10000', '100', 'KES']]);
  });

  it('reversal results: a result reporting another Amount does not reverse the payment; the operator\'s true result does', async () => {
    const res = await pay({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
    const id = res.body.data.id as string;
    await eventually(async () => ((await get(id)).status === 'completed' ? true : null), 15_000, 'completed payment');
    const refund = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id });
    expect(refund.body.data.status).toBe('pending');
    const refundId = refund.body.data.id as string;
    // The result URL we gave the operator: ref = the refund id, token = HMAC of it keyed by the passkey;
    // the result names this reversal request (its OriginatorConversationID), with another amount.
    const token = createHmac('sha256', MM_PASSKEY).update(refundId).digest('hex');
    expect(refund.body.data.provider_ref).toEqual(expect.any(String));
    const hostile = await t.http.post(`/v1/webhooks/mobilemoney/reversal/result?ref=${refundId}&token=${token}`).send({
      Result: {
        ResultType: 0, ResultCode: 0, ResultDesc: 'The service request is processed successfully.', OriginatorConversationID: refund.body.data.provider_ref,
        ConversationID: 'AG_integrity', TransactionID: 'INTEGREV01',
        ResultParameters: { ResultParameter: [{ Key: 'Amount', Value: 1 }, { Key: 'OriginalTransactionID', Value: res.body.data.provider_ref }] },
      },
    });
    expect(hostile.status).toBe(200);
    const afterHostile = await get(id);
    expect(afterHostile).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    expect(afterHostile.integrity.mismatches).toEqual([expect.objectContaining({ source: 'callback:reversal', refund_id: refundId, expected_amount: '100.00', reported_amount: '1.00' })]);
    // The simulator's own result (the whole 100 KES) arrives after SANDBOX_CALLBACK_DELAY_MS.
    await eventually(async () => ((await get(id)).status === 'reversed' ? true : null), 15_000, 'reversed payment');
    expect((await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', key)).body.data.status).toBe('completed');
    expect((await refused(id)).map((r) => [r.subject, r.reported_amount_minor])).toEqual([['refund', '100']]);
  });
});
