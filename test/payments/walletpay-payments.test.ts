import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;

const create = (extra: Record<string, unknown> = {}, idem = `wallet-${Date.now()}-${++n}`) =>
  t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem)
    .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel', ...extra });
const capture = (id: string, apiKey = key) => t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', apiKey).send({});
const get = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;

/** The buyer's visit to the approval page, without a browser. */
async function buyer(approvalUrl: string, choice: 'approve' | 'cancel' | 'approve-decline' | 'approve-instrument-declined' | 'approve-refused') {
  const res = await fetch(`${approvalUrl}${approvalUrl.includes('?') ? '&' : '?'}auto=${choice}`, { redirect: 'manual' });
  return res.headers.get('location');
}

/** Re-sends, byte for byte, a transmission the simulator delivered to the service. */
async function replayTransmission(orderId: string) {
  const [row] = await eventually(() =>
    t.sql<{ id: string; raw_body: string; transmission_time: string; signature: string; webhook_id: string }>(
      `SELECT tr.* FROM sandbox_walletpay_transmissions tr JOIN sandbox_walletpay_events ev ON ev.id = tr.event_id
       WHERE tr.status = 'delivered' AND tr.raw_body LIKE $1`, [`%${orderId}%`]).then((rows) => (rows.length ? rows : null)), 10_000, 'delivered transmission');
  const [keys] = await t.sql<{ cert_id: string }>('SELECT cert_id FROM sandbox_walletpay_keys');
  return t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json')
    .set('Walletpay-Transmission-Id', row!.id).set('Walletpay-Transmission-Time', row!.transmission_time)
    .set('Walletpay-Transmission-Sig', row!.signature).set('Walletpay-Webhook-Id', row!.webhook_id).set('Walletpay-Auth-Algo', 'SHA256withRSA')
    .set('Walletpay-Cert-Url', `${t.baseUrl}/sandbox/walletpay/v1/notifications/certs/${keys!.cert_id}`)
    .send(row!.raw_body);
}

/**
 * The service's settings for this file. The provider timeout is the test default (10 s,
 * test/support/service.ts): no test here is about timeouts, and with 800 ms the in-process simulator,
 * slower than that on a loaded CI host, had a refund answered 502 "did not answer".
 */
const SERVICE_ENV = { STATUS_SYNC_SCHEDULE: '300ms,300ms,300ms,300ms,300ms,300ms', STATUS_SYNC_POLL_INTERVAL: '200ms' };

beforeAll(async () => {
  t = await startTestService(SERVICE_ENV);
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Wallet Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  const creds = await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'wallet-shop-client', client_secret: 'wallet-shop-secret' } });
  expect(creds.status).toBe(200);
  // Stored without webhook_id: the service registered its callback URL and kept the id.
  expect(creds.body.data.config_summary.webhook_id).toEqual(expect.any(String));
});
afterAll(async () => {
  await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'ok' });
  await t.stop();
  await receiver.stop();
});

describe('walletpay: create, approve, capture', () => {
  it('creates a pending payment whose next_action is the approval link; capture after approval completes it', async () => {
    const created = await create();
    expect(created.status).toBe(201);
    const p = created.body.data;
    expect(p).toMatchObject({ provider: 'walletpay', status: 'pending', amount: '45.00', currency: 'USD' });
    expect(p.provider_ref).toEqual(expect.any(String));
    expect(p.next_action).toEqual({ type: 'redirect', url: expect.stringContaining('/sandbox/walletpay/') });
    const detail = await get(p.id);
    expect(detail.provider_response).toMatchObject({ id: p.provider_ref, links: expect.arrayContaining([expect.objectContaining({ href: p.next_action.url })]) });

    const location = await buyer(p.next_action.url, 'approve');
    expect(location).toContain('https://shop.example.com/return');
    expect(location).toContain(`token=${p.provider_ref}`);

    const captured = await capture(p.id);
    expect(captured.status).toBe(200);
    expect(captured.body).toEqual({
      success: true,
      data: { id: p.id, status: 'completed', provider_ref: p.provider_ref, amount: '45.00', currency: 'USD', provider: 'walletpay', created_at: p.created_at },
    });
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === p.id));
    // The provider's PAYMENT.CAPTURE.COMPLETED arrives too: verified, stored, and it moves nothing twice.
    await eventually(() => t.sql('SELECT 1 FROM provider_events WHERE provider = $1 AND payment_id = $2', ['walletpay', p.id]).then((r) => r.length > 0), 10_000, 'capture event');
    const events = await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id]);
    expect(events).toEqual([{ type: 'payment.completed' }]);
    // The capture id is kept where mobile money keeps its receipt; search finds receipts (interface.md), not it.
    const [row] = await t.sql<{ receipt_number: string | null }>('SELECT receipt_number FROM payments WHERE id = $1', [p.id]);
    const captureId = row!.receipt_number!;
    expect(captureId).toEqual(expect.any(String));
    const search = (value: string) => t.http.get('/v1/payments').query({ search: value }).set('X-API-Key', key);
    expect((await search(captureId)).body.meta.total).toBe(0);
    expect((await search(p.idempotency_key)).body.data.map((x: { id: string }) => x.id)).toEqual([p.id]);
  });

  it('answers 409 to a capture before approval and to a second capture; 404 for unknown or foreign ids', async () => {
    const p = (await create()).body.data;
    const early = await capture(p.id);
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('CONFLICT');
    expect((await get(p.id)).status).toBe('pending');
    await buyer(p.next_action.url, 'approve');
    await capture(p.id).expect(200);
    expect((await capture(p.id)).status).toBe(409);
    expect((await capture('00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const other = await t.createMerchant('Wallet Thief');
    expect((await capture(p.id, other.apiKey)).status).toBe(404);
  });

  it("a buyer who cancels at PayPal leaves the payment pending through the status sync (no payment.failed); the same link approves it later", async () => {
    const p = (await create()).body.data;
    const location = await buyer(p.next_action.url, 'cancel');
    expect(location).toBe(`https://shop.example.com/cancel?token=${p.provider_ref}`);
    // PayPal keeps the order awaiting the buyer: the status sync reads it and changes nothing.
    await eventually(() => t.sql<{ sync_attempts: number }>('SELECT sync_attempts FROM payments WHERE id = $1', [p.id])
      .then(([row]) => row!.sync_attempts >= 2), 15_000, 'two status syncs');
    expect(await get(p.id)).toMatchObject({ status: 'pending', next_action: p.next_action, failure_reason: null });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);

    await buyer(p.next_action.url, 'approve');
    const captured = await capture(p.id);
    expect(captured.status).toBe(200);
    expect(captured.body.data.status).toBe('completed');
  });

  it('a declined capture fails the payment', async () => {
    const p = (await create()).body.data;
    await buyer(p.next_action.url, 'approve-decline');
    const res = await capture(p.id);
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('failed');
  });

  it("a capture refused INSTRUMENT_DECLINED is 409 and sends the buyer back to next_action; after they approve again, the capture completes", async () => {
    const p = (await create()).body.data;
    await buyer(p.next_action.url, 'approve-instrument-declined');
    // A status sync sees the order approved: nothing for the buyer to do, so next_action is cleared.
    await t.inContext(() => t.service.container.services.statusSync.syncOne(p.id));
    expect(await get(p.id)).toMatchObject({ status: 'pending', next_action: null });
    const refused = await capture(p.id);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('INSTRUMENT_DECLINED') });
    expect(refused.body.error.message).toContain('next_action.url');
    const waiting = await get(p.id);
    expect(waiting).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: expect.stringContaining(p.provider_ref) } });

    // The buyer chooses another funding source at the link, and the merchant captures again (a new
    // PayPal-Request-Id: PayPal would replay the refusal for the first one).
    expect(await buyer(waiting.next_action.url, 'approve')).toContain('https://shop.example.com/return');
    const done = await capture(p.id);
    expect(done.status).toBe(200);
    expect(done.body.data.status).toBe('completed');
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === p.id));
    expect(receiver.events('payment.failed').find((e) => e.json.data.payment_id === p.id)).toBeUndefined();
  });

  it('a capture refused for good (TRANSACTION_REFUSED) fails the payment with the reason and payment.failed', async () => {
    const p = (await create()).body.data;
    await buyer(p.next_action.url, 'approve-refused');
    const res = await capture(p.id);
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('failed');
    expect(await get(p.id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('TRANSACTION_REFUSED'), next_action: null });
    const failed = await eventually(() => receiver.events('payment.failed').find((e) => e.json.data.payment_id === p.id));
    expect(failed.json.data).toMatchObject({ status: 'failed', previous_status: 'pending' });
  });

  it('refunds in part and then in full, instantly', async () => {
    const p = (await create({ amount: '20.00' })).body.data;
    await buyer(p.next_action.url, 'approve');
    await capture(p.id).expect(200);
    const part = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id, amount: '5.00' });
    expect(part.status).toBe(201);
    expect(part.body.data).toMatchObject({ status: 'completed', amount: '5.00' });
    const rest = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id });
    expect(rest.body.data).toMatchObject({ status: 'completed', amount: '15.00' });
    expect(await get(p.id)).toMatchObject({ status: 'refunded', amount_refunded: '20.00' });
    // The provider's PAYMENT.CAPTURE.REFUNDED events for our own refunds change nothing more.
    await eventually(() => t.sql(`SELECT 1 FROM provider_events WHERE provider = 'walletpay' AND payment_id = $1 AND outcome = 'PAYMENT.CAPTURE.REFUNDED'`, [p.id]).then((r) => r.length >= 2), 10_000, 'refund events');
    const refunds = await t.sql('SELECT count(*)::int AS n FROM refunds WHERE payment_id = $1', [p.id]);
    expect(refunds[0]!.n).toBe(2);
  });
});

describe('walletpay on a loaded host', () => {
  it('with this file\'s settings, a simulator that answers every request a second late still captures and refunds', async () => {
    const slow = await startTestService({ ...SERVICE_ENV, SANDBOX_LATENCY_MS: '1000' });
    try {
      const { apiKey } = await slow.createMerchant('Slow Wallet Shop');
      await slow.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
        .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'slow-shop-client', client_secret: 'slow-shop-secret' } }).expect(200);
      const p = (await slow.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `slow-${Date.now()}`)
        .send({ provider: 'walletpay', amount: '20.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })).body.data;
      await buyer(p.next_action.url, 'approve');
      await slow.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', apiKey).send({}).expect(200);
      const part = await slow.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: p.id, amount: '5.00' });
      expect(part.status).toBe(201);
      expect(part.body.data).toMatchObject({ status: 'completed', amount: '5.00' });
    } finally {
      await slow.stop();
    }
  });
});

describe('walletpay currencies', () => {
  const paymentRows = async () => (await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM payments'))[0]!.n;

  it('a currency walletpay cannot charge, or a fraction of HUF, is 422 on its field and nothing is written', async () => {
    const before = await paymentRows();
    const shilling = await create({ currency: 'KES', amount: '100.00' });
    expect(shilling.status).toBe(422);
    expect(shilling.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', details: [{ field: 'currency', issue: 'walletpay cannot charge KES' }] } });
    const fraction = await create({ currency: 'HUF', amount: '1000.50' });
    expect(fraction.status).toBe(422);
    expect(fraction.body.error.details).toEqual([{ field: 'amount', issue: 'must be a whole number of HUF for walletpay (the provider takes no fractions of HUF)' }]);
    expect(await paymentRows()).toBe(before);
  });

  it('HUF is charged in whole forints: created, approved, captured and refunded with the amounts matching', async () => {
    const p = (await create({ currency: 'HUF', amount: '1000' })).body.data;
    expect(p).toMatchObject({ status: 'pending', amount: '1000.00', currency: 'HUF' });
    const [order] = await t.sql<{ amount_minor: string }>('SELECT amount_minor::text FROM sandbox_walletpay_orders WHERE id = $1', [p.provider_ref]);
    expect(order!.amount_minor).toBe('1000'); // the provider's units: whole forints
    await buyer(p.next_action.url, 'approve');
    expect((await capture(p.id)).body.data).toMatchObject({ status: 'completed', amount: '1000.00' });
    const half = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id, amount: '0.50' });
    expect(half.status).toBe(422);
    expect(half.body.error.details).toEqual([{ field: 'amount', issue: 'must be a whole number of HUF for walletpay (the provider takes no fractions of HUF)' }]);
    const refund = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id, amount: '400' });
    expect(refund.body.data).toMatchObject({ status: 'completed', amount: '400.00' });
    expect(await get(p.id)).toMatchObject({ status: 'completed', amount_refunded: '400.00' });
  });
});

describe('walletpay return and cancel URLs', () => {
  const paymentRows = async () => (await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM payments'))[0]!.n;

  it.each(['return_url', 'cancel_url'])('%s that is not http(s) is 422 naming it, nothing is written and the key stays free', async (field) => {
    for (const url of ['ftp://shop.example.com/return', 'javascript:alert(1)', 'myapp://checkout/done']) {
      const before = await paymentRows();
      const idem = `wallet-url-${++n}`;
      const res = await create({ [field]: url }, idem);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', details: [{ field, issue: expect.stringContaining('http') }] } });
      expect(await paymentRows()).toBe(before);
      // Nothing was claimed: the key takes the corrected request.
      expect((await create({}, idem)).status).toBe(201);
      expect(await paymentRows()).toBe(before + 1);
    }
  });
});

describe('walletpay callbacks', () => {
  it('rejects a forged callback with 401 and changes nothing', async () => {
    const p = (await create()).body.data;
    const forged = JSON.stringify({
      id: 'WH-FORGED-1', event_type: 'PAYMENT.CAPTURE.COMPLETED', resource_type: 'capture',
      resource: { id: 'CAP-FORGED', status: 'COMPLETED', custom_id: p.id, supplementary_data: { related_ids: { order_id: p.provider_ref } } },
    });
    const res = await t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json')
      .set('Walletpay-Transmission-Id', 'forged-transmission-1').set('Walletpay-Transmission-Time', new Date().toISOString())
      .set('Walletpay-Transmission-Sig', Buffer.from('not a signature').toString('base64'))
      .set('Walletpay-Cert-Url', `${t.baseUrl}/sandbox/walletpay/v1/notifications/certs/CERT-X`).set('Walletpay-Auth-Algo', 'SHA256withRSA')
      .send(forged);
    expect(res.status).toBe(401);
    expect((await get(p.id)).status).toBe('pending');
    expect(await t.sql(`SELECT 1 FROM provider_events WHERE event_id = 'forged-transmission-1'`)).toHaveLength(0);
  });

  it('acknowledges a replayed transmission and ignores it', async () => {
    const p = (await create()).body.data;
    await buyer(p.next_action.url, 'approve');
    await capture(p.id).expect(200);
    const replay = await replayTransmission(p.provider_ref);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual({ received: true });
    const stored = await t.sql('SELECT count(*)::int AS n FROM provider_events WHERE payment_id = $1', [p.id]);
    expect(stored[0]!.n).toBe(1);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.completed' }]);
  });
});

describe('walletpay tokens and outages', () => {
  it('refreshes an expired access token transparently', async () => {
    const p = (await create()).body.data;
    await t.http.post('/sandbox/walletpay/_control/expire-tokens').send({}).expect(200);
    await buyer(p.next_action.url, 'approve');
    expect((await capture(p.id)).body.data.status).toBe('completed');
  });

  it('keeps a payment pending through a provider outage on create and settles it when the provider is back', async () => {
    await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'error' }).expect(200);
    const res = await create();
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'ok' }).expect(200);
    const synced = await eventually(async () => {
      const p = await get(res.body.data.id);
      return p.provider_ref ? p : null;
    }, 15_000, 'order created by the status sync');
    expect(synced.status).toBe('pending');
    expect(synced.next_action).toEqual({ type: 'redirect', url: expect.any(String) });
    // Created once: the sync re-sent the creation with the same PayPal-Request-Id.
    const orders = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM sandbox_walletpay_orders WHERE purchase_unit->>'custom_id' = $1`, [res.body.data.id]);
    expect(orders[0]!.n).toBe(1);
  });
});
