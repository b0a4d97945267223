import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MOCKED_ISSUES } from '../../server/sandbox/walletpay/mock-response.js';
import { startTestService, type TestService } from '../support/service.js';

/** The walletpay simulator on the wire, as any PayPal REST client would see it. */
let t: TestService;
let base: string;
beforeAll(async () => {
  t = await startTestService();
  base = `${t.baseUrl}/sandbox/walletpay`;
});
afterAll(async () => t.stop());

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

async function token(clientId = `client-${randomUUID()}`): Promise<string> {
  const res = await t.http
    .post('/sandbox/walletpay/v1/oauth2/token')
    .set('Authorization', basic(clientId, 'secret'))
    .type('form')
    .send('grant_type=client_credentials')
    .expect(200);
  return res.body.access_token as string;
}

const order = (overrides: Record<string, unknown> = {}) => ({
  intent: 'CAPTURE',
  purchase_units: [{ reference_id: 'REF123456789', custom_id: 'pay-1', amount: { currency_code: 'USD', value: '25.00' } }],
  application_context: { return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' },
  ...overrides,
});

describe('POST /v1/oauth2/token', () => {
  it('issues a bearer token for any client id and secret', async () => {
    const res = await t.http
      .post('/sandbox/walletpay/v1/oauth2/token')
      .set('Authorization', basic('my-app', 'my-secret'))
      .type('form')
      .send('grant_type=client_credentials')
      .expect(200);
    expect(res.body).toEqual({
      scope: expect.stringContaining('https://uri.paypal.com/services/payments/payment/authcapture'),
      access_token: expect.stringMatching(/^A21AA/),
      token_type: 'Bearer',
      app_id: expect.stringMatching(/^APP-[A-Z0-9]{17}$/),
      expires_in: 32400,
      nonce: expect.any(String),
    });
  });

  it('refuses a wrong secret, missing credentials and another grant type', async () => {
    const bad = await t.http.post('/sandbox/walletpay/v1/oauth2/token').set('Authorization', basic('my-app', 'bad-secret')).type('form').send('grant_type=client_credentials');
    expect(bad.status).toBe(401);
    expect(bad.body).toEqual({ error: 'invalid_client', error_description: 'Client Authentication failed' });
    expect((await t.http.post('/sandbox/walletpay/v1/oauth2/token').type('form').send('grant_type=client_credentials')).status).toBe(401);
    const grant = await t.http.post('/sandbox/walletpay/v1/oauth2/token').set('Authorization', basic('my-app', 's')).type('form').send('grant_type=password');
    expect(grant.status).toBe(400);
    expect(grant.body.error).toBe('unsupported_grant_type');
  });

  it('takes the token request form-encoded only, as PayPal: the same request as JSON is 400 unsupported_grant_type', async () => {
    const json = await t.http.post('/sandbox/walletpay/v1/oauth2/token').set('Authorization', basic('my-app', 'my-secret'))
      .set('Content-Type', 'application/json').send(JSON.stringify({ grant_type: 'client_credentials' }));
    expect(json.status).toBe(400);
    expect(json.body).toEqual({ error: 'unsupported_grant_type', error_description: 'Grant Type is NULL' });
  });

  it("answers malformed JSON with PayPal's own error (400 INVALID_REQUEST, MALFORMED_REQUEST_JSON), not the service's envelope", async () => {
    const live = await token();
    const res = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${live}`)
      .set('Content-Type', 'application/json').send('{"intent": "CAPTURE",');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      name: 'INVALID_REQUEST',
      message: 'Request is not well-formed, syntactically incorrect, or violates schema.',
      debug_id: expect.any(String),
      details: [{ field: '/', location: 'body', issue: 'MALFORMED_REQUEST_JSON', description: 'The request JSON is not well formed.' }],
      links: [expect.objectContaining({ rel: 'information_link' })],
    });
    // The service's own routes keep theirs (for a caller with a key: an anonymous one is 401 before the body is read).
    const { apiKey } = await t.createMerchant('Own Envelope');
    const own = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Content-Type', 'application/json').send('{"provider":');
    expect(own.status).toBe(400);
    expect(own.body).toMatchObject({ success: false, error: { code: 'BAD_REQUEST' } });
  });

  it('answers 401 AUTHENTICATION_FAILURE without a token, with an unknown one and with an expired one', async () => {
    const none = await t.http.get('/sandbox/walletpay/v2/checkout/orders/ABC');
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ name: 'AUTHENTICATION_FAILURE', message: expect.any(String), debug_id: expect.any(String) });
    expect((await t.http.get('/sandbox/walletpay/v2/checkout/orders/ABC').set('Authorization', 'Bearer nope')).status).toBe(401);

    const clientId = `client-${randomUUID()}`;
    const live = await token(clientId);
    expect((await t.http.get('/sandbox/walletpay/v1/notifications/webhooks').set('Authorization', `Bearer ${live}`)).status).toBe(200);
    const expired = await t.http.post('/sandbox/walletpay/_control/expire-tokens').send({ client_id: clientId }).expect(200);
    expect(expired.body).toEqual({ expired: 1 });
    const after = await t.http.get('/sandbox/walletpay/v1/notifications/webhooks').set('Authorization', `Bearer ${live}`);
    expect(after.status).toBe(401);
    expect(after.body.name).toBe('AUTHENTICATION_FAILURE');
  });
});

describe('POST /v2/checkout/orders', () => {
  it('creates a CREATED order with self/approve/update/capture links (application_context)', async () => {
    const bearer = await token();
    const res = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201);
    const id = res.body.id as string;
    expect(res.body).toEqual({
      id: expect.stringMatching(/^[A-Z0-9]{17}$/),
      status: 'CREATED',
      links: [
        { href: `${base}/v2/checkout/orders/${id}`, rel: 'self', method: 'GET' },
        { href: `${base}/checkoutnow?token=${id}`, rel: 'approve', method: 'GET' },
        { href: `${base}/v2/checkout/orders/${id}`, rel: 'update', method: 'PATCH' },
        { href: `${base}/v2/checkout/orders/${id}/capture`, rel: 'capture', method: 'POST' },
      ],
    });
    const full = await t.http.get(`/sandbox/walletpay/v2/checkout/orders/${id}`).set('Authorization', `Bearer ${bearer}`).expect(200);
    expect(full.body).toMatchObject({
      id,
      intent: 'CAPTURE',
      status: 'CREATED',
      purchase_units: [{ reference_id: 'REF123456789', custom_id: 'pay-1', amount: { currency_code: 'USD', value: '25.00' } }],
      create_time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    });
  });

  it('answers PAYER_ACTION_REQUIRED with a payer-action link for payment_source.paypal.experience_context', async () => {
    const bearer = await token();
    const body = order({
      application_context: undefined,
      payment_source: { paypal: { experience_context: { return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c', user_action: 'PAY_NOW' } } },
    });
    const res = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).set('Prefer', 'return=representation')
      .set('PayPal-Request-Id', randomUUID()).send(body).expect(201);
    expect(res.body.status).toBe('PAYER_ACTION_REQUIRED');
    expect(res.body.payment_source).toEqual({ paypal: {} });
    expect(res.body.links.map((l: { rel: string }) => l.rel)).toEqual(['self', 'payer-action']);
  });

  it('refuses an order with a payment_source but no PayPal-Request-Id, as PayPal: 400 PAYPAL_REQUEST_ID_REQUIRED', async () => {
    const bearer = await token();
    const body = order({ application_context: undefined, payment_source: { paypal: { experience_context: { return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' } } } });
    const res = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      name: 'INVALID_REQUEST',
      details: [{
        field: 'PayPal-Request-Id', location: 'header', issue: 'PAYPAL_REQUEST_ID_REQUIRED',
        description: expect.stringContaining('A PayPal-Request-Id is required if you are trying to process payment for an Order'),
      }],
    });
    // Nothing was created; without a payment_source the header stays optional.
    expect(await t.sql('SELECT 1 FROM sandbox_walletpay_orders WHERE request_id IS NULL AND uses_payment_source')).toEqual([]);
    expect((await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order())).status).toBe(201);
  });

  it('answers the same order with 200 for the same PayPal-Request-Id', async () => {
    const bearer = await token();
    const requestId = randomUUID();
    const first = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).set('PayPal-Request-Id', requestId).send(order());
    const again = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).set('PayPal-Request-Id', requestId).send(order());
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    // Request ids are per app: another client gets its own order.
    const other = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${await token()}`).set('PayPal-Request-Id', requestId).send(order());
    expect(other.status).toBe(201);
    expect(other.body.id).not.toBe(first.body.id);
  });

  it('keeps a PayPal-Request-Id 6 h, as PayPal: the same key after that is a new request, a new order (201)', async () => {
    const bearer = await token();
    const requestId = randomUUID();
    const create = () => t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).set('PayPal-Request-Id', requestId).send(order());
    const first = await create();
    expect(first.status).toBe(201);
    await t.sql(`UPDATE sandbox_walletpay_orders SET created_at = created_at - interval '5 hours' WHERE id = $1`, [first.body.id]);
    const within = await create();
    expect(within.status).toBe(200);
    expect(within.body.id).toBe(first.body.id);
    await t.sql(`UPDATE sandbox_walletpay_orders SET created_at = created_at - interval '2 hours' WHERE id = $1`, [first.body.id]);
    const after = await create();
    expect(after.status).toBe(201);
    expect(after.body.id).not.toBe(first.body.id);
    expect(after.body.status).toBe('CREATED');
    // The new order holds the key now: repeated, it is answered again.
    const again = await create();
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(after.body.id);
  });

  it.each([
    ['no intent', order({ intent: undefined }), 400, 'INVALID_REQUEST', 'MISSING_REQUIRED_PARAMETER', '/intent'],
    ['no purchase units', order({ purchase_units: [] }), 400, 'INVALID_REQUEST', 'MISSING_REQUIRED_PARAMETER', '/purchase_units'],
    ['no amount', order({ purchase_units: [{}] }), 400, 'INVALID_REQUEST', 'MISSING_REQUIRED_PARAMETER', '/purchase_units/0/amount'],
    ['a non-decimal value', order({ purchase_units: [{ amount: { currency_code: 'USD', value: '1e3' } }] }), 400, 'INVALID_REQUEST', 'INVALID_PARAMETER_SYNTAX', '/purchase_units/0/amount/value'],
    ['three decimals in USD', order({ purchase_units: [{ amount: { currency_code: 'USD', value: '1.005' } }] }), 422, 'UNPROCESSABLE_ENTITY', 'DECIMAL_PRECISION', '/purchase_units/0/amount/value'],
    ['a zero amount', order({ purchase_units: [{ amount: { currency_code: 'USD', value: '0.00' } }] }), 422, 'UNPROCESSABLE_ENTITY', 'CANNOT_BE_ZERO_OR_NEGATIVE', '/purchase_units/0/amount/value'],
    ['an unknown currency', order({ purchase_units: [{ amount: { currency_code: 'XYZ', value: '1.00' } }] }), 422, 'UNPROCESSABLE_ENTITY', 'CURRENCY_NOT_SUPPORTED', '/purchase_units/0/amount/currency_code'],
    ['a currency PayPal does not take (KES)', order({ purchase_units: [{ amount: { currency_code: 'KES', value: '100.00' } }] }), 422, 'UNPROCESSABLE_ENTITY', 'CURRENCY_NOT_SUPPORTED', '/purchase_units/0/amount/currency_code'],
    ['a decimal point in HUF, which has no decimals at PayPal', order({ purchase_units: [{ amount: { currency_code: 'HUF', value: '1000.00' } }] }), 422, 'UNPROCESSABLE_ENTITY', 'DECIMAL_PRECISION', '/purchase_units/0/amount/value'],
    ['a bad return URL', order({ application_context: { return_url: 'not a url' } }), 400, 'INVALID_REQUEST', 'INVALID_PARAMETER_SYNTAX', '/application_context/return_url'],
  ])('rejects %s like PayPal', async (_name, body, status, name, issue, field) => {
    const res = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${await token()}`).send(body);
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ name, message: expect.any(String), debug_id: expect.any(String) });
    expect(res.body.details[0]).toMatchObject({ issue, field, description: expect.any(String) });
  });
});

describe('approval page', () => {
  async function newOrder(bearer: string, extra: Record<string, unknown> = {}): Promise<string> {
    const res = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order(extra)).expect(201);
    return res.body.id as string;
  }

  it('shows the amount with Approve and Cancel buttons that post back', async () => {
    const id = await newOrder(await token());
    const res = await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}`).expect(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.text).toContain('25.00 USD');
    expect(res.text).toMatch(/<form method="post">.*name="action" value="approve"/s);
    expect(res.text).toMatch(/name="action" value="cancel"/);
  });

  it('approves from the form post and redirects to return_url with token and PayerID', async () => {
    const bearer = await token();
    const id = await newOrder(bearer);
    const res = await t.http.post(`/sandbox/walletpay/checkoutnow?token=${id}`).type('form').send(`token=${id}&action=approve`).expect(302);
    const location = new URL(res.headers.location!);
    expect(`${location.origin}${location.pathname}`).toBe('https://shop.example.com/return');
    expect(location.searchParams.get('token')).toBe(id);
    expect(location.searchParams.get('PayerID')).toMatch(/^[A-Z0-9]{13}$/);
    const approved = await t.http.get(`/sandbox/walletpay/v2/checkout/orders/${id}`).set('Authorization', `Bearer ${bearer}`).expect(200);
    expect(approved.body.status).toBe('APPROVED');
    expect(approved.body.payer.payer_id).toBe(location.searchParams.get('PayerID'));
    expect(approved.body.links.map((l: { rel: string }) => l.rel)).toEqual(['self', 'update', 'capture']);
    // Approving again is harmless: the same redirect.
    const again = await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=approve`).expect(302);
    expect(again.headers.location).toBe(res.headers.location);
    // …but a cancel after approval is refused.
    expect((await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=cancel`)).status).toBe(422);
  });

  it("cancel sends the buyer to cancel_url and leaves the order awaiting them, as PayPal: the same link approves it afterwards", async () => {
    const bearer = await token();
    const body = order({
      application_context: undefined,
      payment_source: { paypal: { experience_context: { return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel?cart=7' } } },
    });
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`)
      .set('PayPal-Request-Id', randomUUID()).send(body).expect(201);
    const id = created.body.id as string;
    const link = created.body.links.find((l: { rel: string }) => l.rel === 'payer-action').href as string;

    const cancelled = await fetch(`${link}&auto=cancel`, { redirect: 'manual' });
    expect(cancelled.status).toBe(302);
    expect(cancelled.headers.get('location')).toBe(`https://shop.example.com/cancel?cart=7&token=${id}`);
    const read = await t.http.get(`/sandbox/walletpay/v2/checkout/orders/${id}`).set('Authorization', `Bearer ${bearer}`).expect(200);
    expect(read.body.status).toBe('PAYER_ACTION_REQUIRED');
    expect(read.body.links).toContainEqual({ href: link, rel: 'payer-action', method: 'GET' });
    const early = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`).send({});
    expect(early.status).toBe(422);
    expect(early.body.details[0].issue).toBe('ORDER_NOT_APPROVED');

    // The buyer comes back to the same link and approves: the order captures.
    const approved = await fetch(`${link}&auto=approve`, { redirect: 'manual' });
    expect(approved.headers.get('location')).toMatch(/^https:\/\/shop\.example\.com\/return\?token=/);
    const captured = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`).send({}).expect(201);
    expect(captured.body.status).toBe('COMPLETED');
  });

  it("keeps an order 3 h from creation, 3 h from the buyer's redirect once sent to approve, and lets an approved order never captured expire then, as PayPal", async () => {
    const bearer = await token();
    const read = (id: string) => t.http.get(`/sandbox/walletpay/v2/checkout/orders/${id}`).set('Authorization', `Bearer ${bearer}`);
    const capture = (id: string) => t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`).send({});
    /** The simulator's clock for the order: `created` and (when opened) `redirected` hours ago. */
    const age = (id: string, created: number, redirected: number) => t.sql(
      `UPDATE sandbox_walletpay_orders SET created_at = now() - make_interval(hours => $2::int), redirected_at = redirected_at - make_interval(hours => $3::int) WHERE id = $1`,
      [id, created, redirected],
    );

    // Never shown to the buyer: gone 3 h after its creation.
    const untouched = await newOrder(bearer);
    await age(untouched, 4, 0);
    expect((await read(untouched)).status).toBe(404);

    // Shown to the buyer 2 h after its creation: still there 4 h after its creation, and the buyer approves it.
    const redirected = await newOrder(bearer);
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${redirected}`).expect(200);
    await age(redirected, 4, 2);
    expect((await read(redirected)).body.status).toBe('CREATED');
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${redirected}&auto=approve`).expect(302);
    expect((await read(redirected)).body.status).toBe('APPROVED');
    // 3 h after the redirect, approved but not captured: expired, the capture refused as for an unknown order.
    await age(redirected, 1, 2);
    const gone = await read(redirected);
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ name: 'RESOURCE_NOT_FOUND', details: [{ issue: 'INVALID_RESOURCE_ID' }] });
    const late = await capture(redirected);
    expect(late.status).toBe(404);
    expect(late.body.details[0].issue).toBe('INVALID_RESOURCE_ID');
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [redirected])).toEqual([]);
    expect((await t.http.get(`/sandbox/walletpay/checkoutnow?token=${redirected}`)).status).toBe(404);

    // Captured in time: a completed order does not expire.
    const paid = await newOrder(bearer);
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${paid}&auto=approve`).expect(302);
    expect((await capture(paid)).status).toBe(201);
    await age(paid, 10, 10);
    expect((await read(paid)).body.status).toBe('COMPLETED');
  });

  it('answers 404 for an unknown order and 400 for an unknown auto value', async () => {
    expect((await t.http.get('/sandbox/walletpay/checkoutnow?token=NOPE')).status).toBe(404);
    expect((await t.http.get('/sandbox/walletpay/checkoutnow?token=NOPE&auto=steal')).status).toBe(400);
  });
});

describe('capture and refund on the wire', () => {
  it('captures once (201), replays the same PayPal-Request-Id (200), and exposes capture and refund', async () => {
    const bearer = await token();
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201);
    const id = created.body.id as string;
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=approve`).expect(302);
    const capture = () =>
      t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`)
        .set('PayPal-Request-Id', `cap-${id}`).set('Prefer', 'return=representation').send({});
    const first = await capture();
    expect(first.status).toBe(201);
    expect(first.body.status).toBe('COMPLETED');
    const cap = first.body.purchase_units[0].payments.captures[0];
    expect(cap).toMatchObject({
      id: expect.stringMatching(/^[A-Z0-9]{17}$/),
      status: 'COMPLETED',
      amount: { currency_code: 'USD', value: '25.00' },
      final_capture: true,
      seller_receivable_breakdown: { gross_amount: { currency_code: 'USD', value: '25.00' }, paypal_fee: { currency_code: 'USD', value: '1.36' }, net_amount: { currency_code: 'USD', value: '23.64' } },
      create_time: expect.any(String),
    });
    const replay = await capture();
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);

    const got = await t.http.get(`/sandbox/walletpay/v2/payments/captures/${cap.id}`).set('Authorization', `Bearer ${bearer}`).expect(200);
    expect(got.body.supplementary_data).toEqual({ related_ids: { order_id: id } });

    const refund = await t.http.post(`/sandbox/walletpay/v2/payments/captures/${cap.id}/refund`).set('Authorization', `Bearer ${bearer}`)
      .set('Prefer', 'return=representation').send({ amount: { currency_code: 'USD', value: '5.00' }, note_to_payer: 'sorry' }).expect(201);
    expect(refund.body).toMatchObject({
      id: expect.stringMatching(/^[A-Z0-9]{17}$/),
      status: 'COMPLETED',
      amount: { currency_code: 'USD', value: '5.00' },
      links: expect.arrayContaining([{ href: `${base}/v2/payments/captures/${cap.id}`, rel: 'up', method: 'GET' }]),
    });
    const gotRefund = await t.http.get(`/sandbox/walletpay/v2/payments/refunds/${refund.body.id}`).set('Authorization', `Bearer ${bearer}`).expect(200);
    expect(gotRefund.body.seller_payable_breakdown.total_refunded_amount).toEqual({ currency_code: 'USD', value: '5.00' });
    const partially = await t.http.get(`/sandbox/walletpay/v2/payments/captures/${cap.id}`).set('Authorization', `Bearer ${bearer}`).expect(200);
    expect(partially.body.status).toBe('PARTIALLY_REFUNDED');

    const mismatch = await t.http.post(`/sandbox/walletpay/v2/payments/captures/${cap.id}/refund`).set('Authorization', `Bearer ${bearer}`)
      .send({ amount: { currency_code: 'EUR', value: '1.00' } });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.details[0].issue).toBe('CURRENCY_MISMATCH');
    // No amount refunds what remains.
    const rest = await t.http.post(`/sandbox/walletpay/v2/payments/captures/${cap.id}/refund`).set('Authorization', `Bearer ${bearer}`)
      .set('Prefer', 'return=representation').send({}).expect(201);
    expect(rest.body.amount).toEqual({ currency_code: 'USD', value: '20.00' });
  });

  it("keeps a capture's PayPal-Request-Id 6 h and a refund's 45 days, as PayPal documents: after that the same key is a new request", async () => {
    const bearer = await token();
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201);
    const id = created.body.id as string;
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=approve`).expect(302);
    const capture = () => t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`).set('PayPal-Request-Id', `cap-${id}`).send({});
    expect((await capture()).status).toBe(201);
    const [{ id: captureId }] = await t.sql<{ id: string }>('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [id]) as [{ id: string }];
    await t.sql(`UPDATE sandbox_walletpay_captures SET created_at = created_at - interval '5 hours' WHERE id = $1`, [captureId]);
    expect((await capture()).status).toBe(200);
    await t.sql(`UPDATE sandbox_walletpay_captures SET created_at = created_at - interval '2 hours' WHERE id = $1`, [captureId]);
    const late = await capture();
    expect(late.status).toBe(422);
    expect(late.body.details[0].issue).toBe('ORDER_ALREADY_CAPTURED');

    const refund = () => t.http.post(`/sandbox/walletpay/v2/payments/captures/${captureId}/refund`).set('Authorization', `Bearer ${bearer}`)
      .set('PayPal-Request-Id', `ref-${id}`).send({ amount: { currency_code: 'USD', value: '5.00' } });
    const first = await refund();
    expect(first.status).toBe(201);
    await t.sql(`UPDATE sandbox_walletpay_refunds SET created_at = created_at - interval '44 days' WHERE id = $1`, [first.body.id]);
    const within = await refund();
    expect(within.body.id).toBe(first.body.id);
    await t.sql(`UPDATE sandbox_walletpay_refunds SET created_at = created_at - interval '2 days' WHERE id = $1`, [first.body.id]);
    const after = await refund();
    expect(after.status).toBe(201);
    expect(after.body.id).not.toBe(first.body.id);
    expect(await t.sql('SELECT amount_minor::int AS minor FROM sandbox_walletpay_refunds WHERE capture_id = $1 ORDER BY created_at', [captureId])).toEqual([{ minor: 500 }, { minor: 500 }]);
  });

  it('answers a capture repeating the PayPal-Request-Id of a refused one with that refusal for 6 h, as PayPal ("the latest status of the previous request")', async () => {
    const bearer = await token();
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201);
    const id = created.body.id as string;
    const capture = (requestId: string) =>
      t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`).set('PayPal-Request-Id', requestId).send({});
    const early = await capture(`early-${id}`);
    expect(early.status).toBe(422);
    expect(early.body.details[0].issue).toBe('ORDER_NOT_APPROVED');

    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=approve`).expect(302);
    // Approved now, but the same id is answered with its refusal, and nothing is captured.
    const replayed = await capture(`early-${id}`);
    expect(replayed.status).toBe(422);
    expect(replayed.body).toMatchObject({ name: 'UNPROCESSABLE_ENTITY', details: [{ issue: 'ORDER_NOT_APPROVED' }] });
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [id])).toEqual([]);
    // 6 h later PayPal no longer keeps the id: it is a new request, and it captures.
    await t.sql(`UPDATE sandbox_walletpay_capture_refusals SET created_at = created_at - interval '7 hours' WHERE order_id = $1`, [id]);
    expect((await capture(`early-${id}`)).status).toBe(201);

    // A refusal for good is replayed the same way; without an id each request is answered afresh.
    const refusedOrder = (await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201)).body.id as string;
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${refusedOrder}&auto=approve-refused`).expect(302);
    const refuse = () => t.http.post(`/sandbox/walletpay/v2/checkout/orders/${refusedOrder}/capture`).set('Authorization', `Bearer ${bearer}`).set('PayPal-Request-Id', `ref-${refusedOrder}`).send({});
    expect((await refuse()).body.details[0].issue).toBe('TRANSACTION_REFUSED');
    expect((await refuse()).body.details[0].issue).toBe('TRANSACTION_REFUSED');
    const noId = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${refusedOrder}/capture`).set('Authorization', `Bearer ${bearer}`).send({});
    expect(noId.body.details[0].issue).toBe('TRANSACTION_REFUSED');
    expect(await t.sql('SELECT request_id FROM sandbox_walletpay_capture_refusals WHERE order_id = $1', [refusedOrder])).toEqual([{ request_id: `ref-${refusedOrder}` }]);
  });

  it("answers a capture without Prefer minimally, as PayPal: the capture, not the order's representation", async () => {
    const bearer = await token();
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201);
    const id = created.body.id as string;
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=approve`).expect(302);
    const capture = () => t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`)
      .set('PayPal-Request-Id', `cap-${id}`).send({});
    const first = await capture();
    expect(first.status).toBe(201);
    // No intent, order amount, payee, custom_id or times; the purchase unit only names itself and its captures.
    expect(Object.keys(first.body).sort()).toEqual(['id', 'links', 'payer', 'payment_source', 'purchase_units', 'status']);
    expect(first.body).toMatchObject({ id, status: 'COMPLETED', links: [{ href: `${base}/v2/checkout/orders/${id}`, rel: 'self', method: 'GET' }] });
    expect(first.body.purchase_units).toEqual([{ reference_id: 'REF123456789', payments: { captures: [expect.objectContaining({ status: 'COMPLETED', amount: { currency_code: 'USD', value: '25.00' }, custom_id: 'pay-1' })] } }]);
    // A replay (200) answers the same way; the full order only on request.
    const replay = await capture();
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);
    const full = await capture().set('Prefer', 'return=representation').expect(200);
    expect(full.body).toMatchObject({ intent: 'CAPTURE', purchase_units: [{ amount: { currency_code: 'USD', value: '25.00' }, custom_id: 'pay-1' }], create_time: expect.any(String) });
  });

  it("refuses a refund of a pending capture 422 PENDING_CAPTURE and answers a refund's replay 201 with the same refund, as PayPal documents", async () => {
    const bearer = await token();
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201);
    const id = created.body.id as string;
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=approve`).expect(302);
    const captured = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`).send({}).expect(201);
    const captureId = captured.body.purchase_units[0].payments.captures[0].id as string;
    const refund = (requestId: string) => t.http.post(`/sandbox/walletpay/v2/payments/captures/${captureId}/refund`).set('Authorization', `Bearer ${bearer}`)
      .set('PayPal-Request-Id', requestId).send({ amount: { currency_code: 'USD', value: '5.00' } });

    // PayPal still holds the capture (an eCheck not yet cleared): set on the simulator's row.
    await t.sql(`UPDATE sandbox_walletpay_captures SET status = 'PENDING', status_reason = 'ECHECK' WHERE id = $1`, [captureId]);
    const held = await refund(randomUUID());
    expect(held.status).toBe(422);
    expect(held.body).toMatchObject({ name: 'UNPROCESSABLE_ENTITY', details: [{ issue: 'PENDING_CAPTURE', description: expect.stringContaining('the capture is pending') }] });

    await t.sql(`UPDATE sandbox_walletpay_captures SET status = 'COMPLETED', status_reason = NULL WHERE id = $1`, [captureId]);
    const requestId = randomUUID();
    const first = await refund(requestId);
    expect(first.status).toBe(201);
    const again = await refund(requestId);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(await t.sql('SELECT id FROM sandbox_walletpay_refunds WHERE capture_id = $1', [captureId])).toEqual([{ id: first.body.id }]);
  });

  it('answers 404 RESOURCE_NOT_FOUND for unknown ids and unknown paths', async () => {
    const bearer = await token();
    const res = await t.http.get('/sandbox/walletpay/v2/payments/captures/NOPE').set('Authorization', `Bearer ${bearer}`);
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ name: 'RESOURCE_NOT_FOUND', details: [{ issue: 'INVALID_RESOURCE_ID' }] });
    expect((await t.http.get('/sandbox/walletpay/v2/nothing-here').set('Authorization', `Bearer ${bearer}`)).body.name).toBe('RESOURCE_NOT_FOUND');
  });

  it("answers another app's capture, refund and order capture 403 NOT_AUTHORIZED / PERMISSION_DENIED, as PayPal documents; its order 404", async () => {
    const owner = await token();
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${owner}`).send(order()).expect(201);
    const id = created.body.id as string;
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=approve`).expect(302);
    const captured = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${owner}`).set('Prefer', 'return=representation').send({}).expect(201);
    const captureId = captured.body.purchase_units[0].payments.captures[0].id as string;
    const refund = await t.http.post(`/sandbox/walletpay/v2/payments/captures/${captureId}/refund`).set('Authorization', `Bearer ${owner}`)
      .send({ amount: { currency_code: 'USD', value: '1.00' } }).expect(201);
    const approvedElsewhere = (await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${owner}`).send(order()).expect(201)).body.id as string;
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${approvedElsewhere}&auto=approve`).expect(302);

    const stranger = await token();
    const denied = {
      name: 'NOT_AUTHORIZED',
      details: [{ issue: 'PERMISSION_DENIED', description: 'You do not have permission to access or perform operations on this resource.' }],
    };
    for (const res of [
      await t.http.get(`/sandbox/walletpay/v2/payments/captures/${captureId}`).set('Authorization', `Bearer ${stranger}`),
      await t.http.post(`/sandbox/walletpay/v2/payments/captures/${captureId}/refund`).set('Authorization', `Bearer ${stranger}`).send({}),
      await t.http.get(`/sandbox/walletpay/v2/payments/refunds/${refund.body.id}`).set('Authorization', `Bearer ${stranger}`),
      await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${approvedElsewhere}/capture`).set('Authorization', `Bearer ${stranger}`).send({}),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject(denied);
    }
    // Nothing was done for the stranger; GET order documents no 403 at PayPal: 404 as an unknown id.
    expect(await t.sql('SELECT id FROM sandbox_walletpay_refunds WHERE capture_id = $1', [captureId])).toEqual([{ id: refund.body.id }]);
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [approvedElsewhere])).toEqual([]);
    const order404 = await t.http.get(`/sandbox/walletpay/v2/checkout/orders/${id}`).set('Authorization', `Bearer ${stranger}`);
    expect(order404.status).toBe(404);
    expect(order404.body.details[0].issue).toBe('INVALID_RESOURCE_ID');
    // Unknown ids stay 404.
    expect((await t.http.get('/sandbox/walletpay/v2/payments/refunds/NOSUCHREFUND00001').set('Authorization', `Bearer ${stranger}`)).status).toBe(404);
  });

  it('answers 500 INTERNAL_SERVER_ERROR while the outage switch is on', async () => {
    await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      const res = await t.http.post('/sandbox/walletpay/v1/oauth2/token').set('Authorization', basic('a', 'b')).type('form').send('grant_type=client_credentials');
      expect(res.status).toBe(500);
      expect(res.body.name).toBe('INTERNAL_SERVER_ERROR');
    } finally {
      await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
  });

  it('fails captures alone in the capture-only modes: captures_error answers a capture 500 and captures nothing, captures_hang never answers it; a token and a read of the order are answered', async () => {
    const bearer = await token();
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201);
    const id = created.body.id as string;
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${id}&auto=approve`).expect(302);
    const capture = () => fetch(`${base}/v2/checkout/orders/${id}/capture`, {
      method: 'POST', headers: { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json', 'PayPal-Request-Id': `only-${id}` }, body: '{}', signal: AbortSignal.timeout(1_500),
    });
    try {
      await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'captures_error' }).expect(200);
      await token();
      expect((await t.http.get(`/sandbox/walletpay/v2/checkout/orders/${id}`).set('Authorization', `Bearer ${bearer}`)).body.status).toBe('APPROVED');
      const failed = await capture();
      expect(failed.status).toBe(500);
      expect(((await failed.json()) as { name: string }).name).toBe('INTERNAL_SERVER_ERROR');

      await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'captures_hang' }).expect(200);
      await expect(capture()).rejects.toMatchObject({ name: 'TimeoutError' });
      expect((await t.http.get(`/sandbox/walletpay/v2/checkout/orders/${id}`).set('Authorization', `Bearer ${bearer}`)).body.status).toBe('APPROVED');
      expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [id])).toEqual([]);
    } finally {
      await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    expect((await capture()).status).toBe(201);
  });

  it('takes the capture-only modes on the walletpay switch only: cardpay has no such mode (400)', async () => {
    const refused = await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'captures_error' });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('mode must be ok, error or hang');
    const unknown = await t.http.post('/sandbox/walletpay/_control/outage').send({ mode: 'refunds_error' });
    expect(unknown.body.error).toBe('mode must be ok, error, hang, captures_error or captures_hang');
  });
});

describe('negative testing with PayPal-Mock-Response', () => {
  const mock = (code: string) => JSON.stringify({ mock_application_codes: code });

  async function approvedOrder(bearer: string): Promise<string> {
    const created = await t.http.post('/sandbox/walletpay/v2/checkout/orders').set('Authorization', `Bearer ${bearer}`).send(order()).expect(201);
    await t.http.get(`/sandbox/walletpay/checkoutnow?token=${created.body.id}&auto=approve`).expect(302);
    return created.body.id as string;
  }

  function expectMockedRefusal(res: { status: number; body: Record<string, any> }, code: string) {
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ name: 'UNPROCESSABLE_ENTITY', message: expect.any(String), debug_id: expect.stringMatching(/^[0-9a-f]{13}$/) });
    expect(res.body.details).toEqual([{ issue: code, description: expect.any(String) }]);
  }

  it.each(MOCKED_ISSUES.capture)('a capture answers 422 %s and captures nothing; the order still captures without the header', async (code) => {
    const bearer = await token();
    const id = await approvedOrder(bearer);
    const refused = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`)
      .set('PayPal-Request-Id', `mock-${id}`).set('PayPal-Mock-Response', mock(code)).send({});
    expectMockedRefusal(refused, code);
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [id])).toEqual([]);
    expect(await t.sql('SELECT status, capture_request_id FROM sandbox_walletpay_orders WHERE id = $1', [id])).toEqual([{ status: 'APPROVED', capture_request_id: null }]);
    // Nothing remembered under the PayPal-Request-Id either: the same id then captures.
    await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`).set('PayPal-Request-Id', `mock-${id}`).send({}).expect(201);
  });

  it.each(MOCKED_ISSUES.refund)('a refund answers 422 %s and refunds nothing', async (code) => {
    const bearer = await token();
    const id = await approvedOrder(bearer);
    const captured = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`).send({}).expect(201);
    const captureId = captured.body.purchase_units[0].payments.captures[0].id as string;
    const refused = await t.http.post(`/sandbox/walletpay/v2/payments/captures/${captureId}/refund`).set('Authorization', `Bearer ${bearer}`)
      .set('PayPal-Request-Id', `mock-${captureId}`).set('PayPal-Mock-Response', mock(code)).send({ amount: { currency_code: 'USD', value: '5.00' } });
    expectMockedRefusal(refused, code);
    expect(await t.sql('SELECT id FROM sandbox_walletpay_refunds WHERE capture_id = $1', [captureId])).toEqual([]);
    expect(await t.sql('SELECT status, refunded_minor::int AS refunded FROM sandbox_walletpay_captures WHERE id = $1', [captureId])).toEqual([{ status: 'COMPLETED', refunded: 0 }]);
  });

  it("a code PayPal does not mock for the call, or a header that is not JSON, changes nothing: the call's actual answer", async () => {
    const bearer = await token();
    const id = await approvedOrder(bearer);
    const statuses: number[] = [];
    for (const header of [mock('REFUND_TIME_LIMIT_EXCEEDED'), mock('NOT_A_CODE'), 'INSTRUMENT_DECLINED']) {
      const res = await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${id}/capture`).set('Authorization', `Bearer ${bearer}`)
        .set('PayPal-Request-Id', `real-${id}`).set('PayPal-Mock-Response', header).send({});
      statuses.push(res.status);
    }
    // The first captures (201); the repeats with its PayPal-Request-Id replay that capture (200), capturing nothing more.
    expect(statuses).toEqual([201, 200, 200]);
    expect(await t.sql('SELECT count(*)::int AS n FROM sandbox_walletpay_captures WHERE order_id = $1', [id])).toEqual([{ n: 1 }]);
  });
});
