import { generateKeyPairSync, sign as rsaSign } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * Live-env mobile money: the real operator's callbacks carry no signature. A callback with an
 * X-Mobilemoney-Signature is applied once the signature verifies; one without is never believed —
 * the service asks the operator (STK query) and applies its answer. The simulator counts the queries.
 */
const PHONES = { success: '254708374149', silent: '254700000003' };
const LIVE_CREDS = {
  env: 'live', consumer_key: 'live-consumer-key', consumer_secret: 'live-consumer-secret', initiator: 'apiop', security_credential: 'c2VjcmV0',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
};
/** The operator answers a push this long after it was sent (callback, or the STK query's result). */
const OPERATOR_DELAY_MS = 2500;

let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;
const operatorKey = generateKeyPairSync('rsa', { modulusLength: 2048, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } });

const pay = async (phone: string) => {
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `live-${Date.now()}-${++n}`)
    .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; provider_ref: string; status: string };
};
const get = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;
const queriesOf = async (checkoutRequestId: string) =>
  (await t.sql<{ n: number }>('SELECT query_count AS n FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1', [checkoutRequestId]))[0]!.n;
const successBody = (checkoutRequestId: string, receipt: string) => ({
  Body: { stkCallback: {
    MerchantRequestID: 'm-live', CheckoutRequestID: checkoutRequestId, ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
    CallbackMetadata: { Item: [{ Name: 'Amount', Value: 100 }, { Name: 'MpesaReceiptNumber', Value: receipt }, { Name: 'TransactionDate', Value: 20261123120000 }, { Name: 'PhoneNumber', Value: 254700000003 }] },
  } },
});

beforeAll(async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mm-live-cert-'));
  writeFileSync(path.join(dir, 'operator.pem'), operatorKey.publicKey);
  t = await startTestService({ MOBILEMONEY_CERT_PATH: path.join(dir, 'operator.pem'), SANDBOX_CALLBACK_DELAY_MS: String(OPERATOR_DELAY_MS), MOBILEMONEY_RECONCILE_INTERVAL: '1h' });
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Live Duka'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: LIVE_CREDS }).expect(200);
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('live-env operator callbacks', () => {
  it("the operator's own unsigned callback settles a completed push through the STK query", async () => {
    const p = await pay(PHONES.success);
    // The simulator posts the result unsigned, like the operator; the service asks before it believes it.
    const done = await eventually(async () => ((await get(p.id)).status === 'completed' ? get(p.id) : null), 15_000, 'payment settled');
    expect(done).toMatchObject({ status: 'completed', amount: '100.00' });
    expect(await queriesOf(p.provider_ref)).toBeGreaterThanOrEqual(1);
    const [transition] = await t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed' AND accepted`, [p.id]);
    expect(transition!.trigger).toBe('confirmed:stk');
    const event = await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === p.id));
    expect(event.json.data).toMatchObject({ status: 'completed', previous_status: 'pending' });
  });

  it("a payment confirmed by the query gets its receipt from the operator's settled transactions (reconciliation)", async () => {
    const p = await pay(PHONES.success);
    await eventually(async () => (await get(p.id)).status === 'completed', 15_000, 'payment settled');
    // The STK query names no receipt: until reconciliation, the payment is known by its CheckoutRequestID.
    expect(await get(p.id)).toMatchObject({ status: 'completed', provider_ref: p.provider_ref });
    // A settled transaction that quotes this payment's reference with another amount gives it nothing.
    await t.http.post('/sandbox/mobilemoney/_control/misreport').send({ amount: 1 }).expect(200);
    const hostile = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send({});
    await t.http.post('/sandbox/mobilemoney/_control/misreport').send({}).expect(200);
    expect(hostile.status).toBe(200);
    expect(await get(p.id)).toMatchObject({ provider_ref: p.provider_ref, integrity: { status: 'mismatch' } });
    const report = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send({});
    expect(report.status).toBe(200);
    const row = report.body.data.results.find((r: { payment_id?: string }) => r.payment_id === p.id);
    expect(row).toMatchObject({ outcome: 'skipped' });
    const settled = await get(p.id);
    expect(settled).toMatchObject({ status: 'completed', provider_ref: row.receipt });
    expect(settled.provider_ref).not.toBe(p.provider_ref);
    // Found by its receipt from now on, as any payment whose callback was verified.
    const search = await t.http.get('/v1/payments').query({ search: row.receipt }).set('X-API-Key', key);
    expect(search.body.data.map((x: { id: string }) => x.id)).toEqual([p.id]);
  });

  it('an unsigned forged "success" for a push the operator has not completed changes nothing', async () => {
    const p = await pay(PHONES.silent);
    const forged = await t.http.post('/v1/webhooks/mobilemoney').send(successBody(p.provider_ref, 'FORGED0001'));
    expect(forged.status).toBe(200);
    expect(await queriesOf(p.provider_ref)).toBe(1);
    const after = await get(p.id);
    expect(after).toMatchObject({ status: 'pending', provider_ref: p.provider_ref });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);
    // Not stored in the inbox either: a forged notification cannot shadow the operator's real one.
    expect(await t.sql('SELECT 1 FROM provider_events WHERE payment_id = $1', [p.id])).toEqual([]);
  });

  it('a callback with a valid operator signature is applied as it says, without a query', async () => {
    const p = await pay(PHONES.silent);
    const body = JSON.stringify(successBody(p.provider_ref, 'LIVE123456'));
    const signature = rsaSign('sha256', Buffer.from(body), operatorKey.privateKey).toString('base64');
    const res = await t.http.post('/v1/webhooks/mobilemoney').set('Content-Type', 'application/json').set('X-Mobilemoney-Signature', signature).send(body);
    expect(res.status).toBe(200);
    expect(await get(p.id)).toMatchObject({ status: 'completed', provider_ref: 'LIVE123456' });
    expect(await queriesOf(p.provider_ref)).toBe(0);
  });

  it('a callback whose signature does not verify is refused (401) and asks nothing', async () => {
    const p = await pay(PHONES.silent);
    const body = JSON.stringify(successBody(p.provider_ref, 'LIVE999999'));
    const res = await t.http.post('/v1/webhooks/mobilemoney').set('Content-Type', 'application/json')
      .set('X-Mobilemoney-Signature', rsaSign('sha256', Buffer.from(`${body} `), operatorKey.privateKey).toString('base64')).send(body);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('UNAUTHORIZED');
    expect(await get(p.id)).toMatchObject({ status: 'pending' });
    expect(await queriesOf(p.provider_ref)).toBe(0);
  });
});
