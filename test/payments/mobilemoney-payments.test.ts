import { generateKeyPairSync, sign as rsaSign } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StatusWriter } from '../../server/domain/payments/status-writer.js';
import { callbackToken } from '../../server/providers/mobilemoney/callback.js';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { statusQueriesSentDuring } from '../support/operator-watch.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

const PHONES = { success: '254708374149', cancelled: '254700000001', insufficient: '254700000002', silent: '254700000003' };
const SANDBOX_CREDS = {
  env: 'sandbox', consumer_key: 'mm-consumer-key', consumer_secret: 'mm-consumer-secret',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379', nominated_number: '254708374149',
};

let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;
const keyPair = generateKeyPairSync('rsa', { modulusLength: 2048, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } });

/**
 * A push, once the phone's earlier prompt (another case's, on the same simulator phone) is closed: while
 * one is open the operator refuses a second ("Unable to lock subscriber"), and on a fast machine the next
 * case comes within the first's callback delay.
 */
const pay = async (body: Record<string, unknown>, apiKey = key) => {
  if (typeof body.phone === 'string') {
    const phone = body.phone.replace(/^0/, '254');
    await eventually(async () => (await t.sql('SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE phone = $1 AND completes_at > now()', [phone])).length === 0, 10_000, `${phone}'s earlier prompt to close`);
  }
  return t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `mm-${Date.now()}-${++n}`).send({ provider: 'mobilemoney', currency: 'KES', amount: '100', ...body });
};
const get = async (id: string, apiKey = key) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', apiKey)).body.data;
const settled = (id: string, status: string, apiKey = key) =>
  eventually(async () => {
    const p = await get(id, apiKey);
    return p.status === status ? p : null;
  }, 15_000, `payment ${id} to become ${status}`);
/** This service's error-level log lines about a payment. */
const errorLogs = (paymentId: string) => readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter(Boolean)
  .map((line) => JSON.parse(line) as { level: number; paymentId?: string })
  .filter((l) => l.level >= 50 && l.paymentId === paymentId);
/**
 * The customer pays again by paybill, quoting `reference` as the account: a push straight to the simulator
 * (its own token), 100 KES to `shortcode`, so the pull lists a second transaction. Answers the HTTP status.
 */
async function paidAgainByPaybill(shortcode: string, phone: string, reference: string): Promise<number> {
  const token = await fetch(`${t.baseUrl}/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials`, { headers: { Authorization: `Basic ${Buffer.from(`paybill-${shortcode}:secret`).toString('base64')}` } });
  const { access_token } = (await token.json()) as { access_token: string };
  const ts = '20261122120000';
  const res = await fetch(`${t.baseUrl}/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest`, {
    method: 'POST', headers: { Authorization: `Bearer ${access_token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ BusinessShortCode: shortcode, Password: Buffer.from(`${shortcode}x${ts}`).toString('base64'), Timestamp: ts, TransactionType: 'CustomerPayBillOnline', Amount: 100, PartyA: phone, PartyB: shortcode, PhoneNumber: phone, CallBackURL: 'http://127.0.0.1:9/none', AccountReference: reference, TransactionDesc: 'paid again' }),
  });
  return res.status;
}
const storeCreds = (apiKey: string, creds: Record<string, unknown>) =>
  t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'mobilemoney', mobilemoney: creds }).expect(200);

beforeAll(async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mm-cert-'));
  writeFileSync(path.join(dir, 'operator.pem'), keyPair.publicKey);
  t = await startTestService({ MOBILEMONEY_CERT_PATH: path.join(dir, 'operator.pem'), MOBILEMONEY_RECONCILE_INTERVAL: '1h' });
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Duka'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await storeCreds(key, SANDBOX_CREDS);
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('STK push payments', () => {
  it('success: pending with the CheckoutRequestID, then completed by the callback with the receipt as provider_ref', async () => {
    const res = await pay({ phone: '0708374149' });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ provider: 'mobilemoney', status: 'pending', amount: '100.00', currency: 'KES' });
    expect(res.body.data.provider_ref).toMatch(/^ws_CO_/);
    const done = await settled(res.body.data.id, 'completed');
    expect(done.provider_ref).toMatch(/^[A-Z0-9]{10}$/);
    const event = await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === res.body.data.id));
    expect(event.json.data).toMatchObject({ provider: 'mobilemoney', status: 'completed', previous_status: 'pending', amount: '100.00' });
    const search = await t.http.get('/v1/payments').query({ search: done.provider_ref }).set('X-API-Key', key);
    expect(search.body.data.map((p: { id: string }) => p.id)).toEqual([res.body.data.id]);
  });

  it.each([
    ['cancelled by the user (1032)', PHONES.cancelled, '1032'],
    ['insufficient funds (1)', PHONES.insufficient, 'ResultCode 1)'],
  ])('%s: failed with the reason, payment.failed', async (_name, phone, reason) => {
    const res = await pay({ phone });
    const failed = await settled(res.body.data.id, 'failed');
    expect(failed.failure_reason).toContain(reason);
    await eventually(() => receiver.events('payment.failed').find((e) => e.json.data.payment_id === res.body.data.id));
  });

  it('a token revoked mid-way (another system took a token for the same consumer key, Daraja answers 401.002.01): the next payment still succeeds, after one new token', async () => {
    const { apiKey } = await t.createMerchant('Token Duka');
    const consumerKey = `mm-shared-key-${Date.now()}`;
    await storeCreds(apiKey, { ...SANDBOX_CREDS, consumer_key: consumerKey });
    const tokensIssued = async () => (await t.sql('SELECT 1 FROM sandbox_mobilemoney_tokens WHERE consumer_key = $1', [consumerKey])).length;
    const first = await pay({ phone: '254722000881' }, apiKey);
    expect(first.status).toBe(201);
    expect(await tokensIssued()).toBe(1);

    // The other system sharing the consumer key takes a token: ours (still cached for ~58 min) is revoked.
    const other = await fetch(`${t.baseUrl}/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials`, {
      headers: { Authorization: `Basic ${Buffer.from(`${consumerKey}:${SANDBOX_CREDS.consumer_secret}`).toString('base64')}` },
    });
    expect(other.status).toBe(200);

    const next = await pay({ phone: '254722000882' }, apiKey);
    expect(next.status).toBe(201);
    expect(next.body.data).toMatchObject({ status: 'pending', provider_ref: expect.stringMatching(/^ws_CO_/) });
    expect(await tokensIssued()).toBe(3); // ours, the other system's, and exactly one new one of ours
    await settled(next.body.data.id, 'completed', apiKey);
  });

  it('a push to a phone whose prompt is still open: 502 PROVIDER_ERROR naming the busy subscriber, that payment failed; the first completes, and a new key can ask again', async () => {
    const config = t.service.container.config;
    const saved = config.sandboxCallbackDelayMs;
    config.sandboxCallbackDelayMs = 3000; // the customer answers the first prompt after 3 s
    const phone = '254722000777';
    const repeatKey = `mm-busy-${Date.now()}`;
    let first;
    let second;
    try {
      first = await pay({ phone });
      second = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', repeatKey)
        .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone });
    } finally {
      config.sandboxCallbackDelayMs = saved;
    }
    expect(first.status).toBe(201);
    expect(first.body.data.status).toBe('pending');
    expect(second.status).toBe(502);
    expect(second.body.error.code).toBe('PROVIDER_ERROR');
    expect(second.body.error.message).toMatch(/another transaction in progress \(500\.001\.1001\): Unable to lock subscriber/);
    // The refused payment is failed with the operator's words; its key answers it again (nothing is sent twice).
    const replay = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', repeatKey)
      .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone });
    expect(replay.status).toBe(200); // a replay
    expect(replay.body.data).toMatchObject({ status: 'failed', failure_reason: expect.stringMatching(/Unable to lock subscriber/) });
    // The first push is untouched and completes; then the phone takes a push again.
    await settled(first.body.data.id, 'completed');
    const again = await pay({ phone });
    expect(again.status).toBe(201);
    expect(again.body.data.status).toBe('pending');
  });

  it.each([
    ['a consumer secret the operator refuses', { consumer_secret: 'bad-secret' }, /token request failed, the consumer key and secret were refused \(invalid authentication\) \(400\.008\.01\)/],
    ['a passkey that is not the sandbox shortcode\'s', { passkey: `${SANDBOX_CREDS.passkey.slice(0, -1)}0` }, /STK push failed, merchant does not exist or wrong credentials \(shortcode\/passkey\) \(500\.001\.1001\): Wrong credentials/],
  ])('%s: stored as given, each payment 502 PROVIDER_ERROR naming the credentials, failed', async (_name, change, words) => {
    const shop = await t.createMerchant(`Typo ${Object.keys(change)[0]}`);
    await storeCreds(shop.apiKey, { ...SANDBOX_CREDS, ...change });
    const res = await pay({ phone: '254722000888' }, shop.apiKey);
    expect(res.status).toBe(502);
    expect(res.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringMatching(words) });
    expect(res.body.error.message).not.toContain('bad-secret');
    const [failed] = (await t.http.get('/v1/payments').set('X-API-Key', shop.apiKey)).body.data;
    expect(failed).toMatchObject({ status: 'failed', failure_reason: expect.stringMatching(words) });
  });

  it.each([
    ['a currency other than KES', { currency: 'USD', phone: PHONES.success }, 'currency'],
    ['decimals', { amount: '10.50', phone: PHONES.success }, 'amount'],
    ['more than 250,000 KES', { amount: '250001', phone: PHONES.success }, 'amount'],
    ['a phone that is not 254 + 9 digits', { phone: '12345' }, 'phone'],
    ['a phone of another country', { phone: '+255712345678' }, 'phone'],
    ['a missing phone', {}, 'phone'],
  ])('refuses %s with 422 naming the field', async (_name, body, field) => {
    const res = await pay(body);
    expect(res.status).toBe(422);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    expect(res.body.error.message).toEqual(expect.any(String));
  });
});

describe('a phone in the contract\'s format that is no M-Pesa number', () => {
  it('254212345678 (254 + 9 digits, the contract\'s format): 201 pending; the operator cannot reach it (1037), so the payment fails with the reason', async () => {
    const res = await pay({ phone: '254212345678' });
    expect(res.status).toBe(201); // was 422 "must be a Kenyan mobile number in the format 254XXXXXXXXX"
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: expect.stringMatching(/^ws_CO_/) });
    const failed = await settled(res.body.data.id, 'failed');
    expect(failed.failure_reason).toContain('DS timeout user cannot be reached');
    expect(failed.failure_reason).toContain('1037');
  });
});

describe('callback security', () => {
  async function pendingSilent() {
    const res = await pay({ phone: PHONES.silent });
    return res.body.data as { id: string; provider_ref: string };
  }
  const stkBody = (checkoutId: string, code = 0) => ({
    Body: { stkCallback: {
      MerchantRequestID: 'm-1', CheckoutRequestID: checkoutId, ResultCode: code, ResultDesc: code === 0 ? 'ok' : 'failed',
      ...(code === 0 ? { CallbackMetadata: { Item: [{ Name: 'Amount', Value: 100 }, { Name: 'MpesaReceiptNumber', Value: 'FAKE123456' }, { Name: 'PhoneNumber', Value: 254700000003 }] } } : {}),
    } },
  });

  it('refuses a forged callback (wrong or missing token) with 401 and changes nothing', async () => {
    const p = await pendingSilent();
    for (const query of [`?ref=${p.id}&token=${'0'.repeat(64)}`, `?ref=${p.id}`, '']) {
      const res = await t.http.post(`/v1/webhooks/mobilemoney${query}`).send(stkBody(p.provider_ref));
      expect(res.status).toBe(401);
    }
    expect((await get(p.id)).status).toBe('pending');
  });

  it('accepts the operator callback once; a replay of the same CheckoutRequestID is acknowledged and ignored', async () => {
    const res = await pay({ phone: PHONES.success });
    await settled(res.body.data.id, 'completed');
    const [stk] = await t.sql<{ callback_url: string; checkout_request_id: string }>('SELECT callback_url, checkout_request_id FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1', [res.body.data.provider_ref]);
    const url = new URL(stk!.callback_url);
    const replay = await t.http.post(`${url.pathname}${url.search}`).send(stkBody(stk!.checkout_request_id, 1032));
    expect(replay.status).toBe(200);
    expect((await get(res.body.data.id)).status).toBe('completed');
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [res.body.data.id])).toEqual([{ type: 'payment.completed' }]);
  });

  it('refuses callbacks from addresses off the allowlist when loopback is not allowed (sandbox off)', async () => {
    const strict = await startTestService({ SANDBOX: 'false', MOBILEMONEY_BASE_URL: `${t.baseUrl}/sandbox/mobilemoney` });
    try {
      const res = await strict.http.post('/v1/webhooks/mobilemoney').send(stkBody('ws_CO_anything'));
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('UNAUTHORIZED');
    } finally {
      await strict.stop();
    }
  });

  it('live env: verifies the RSA signature with the operator certificate', async () => {
    const live = await t.createMerchant('Live Duka');
    await storeCreds(live.apiKey, { ...SANDBOX_CREDS, env: 'live', consumer_key: 'live-key', initiator: 'apiop', security_credential: 'c2VjcmV0' });
    const res = await pay({ phone: PHONES.silent }, live.apiKey);
    const p = res.body.data;
    const body = JSON.stringify(stkBody(p.provider_ref));
    const bad = await t.http.post('/v1/webhooks/mobilemoney').set('Content-Type', 'application/json').set('X-Mobilemoney-Signature', Buffer.from('forged').toString('base64')).send(body);
    expect(bad.status).toBe(401);
    expect((await get(p.id, live.apiKey)).status).toBe('pending');
    const signature = rsaSign('sha256', Buffer.from(body), keyPair.privateKey).toString('base64');
    const good = await t.http.post('/v1/webhooks/mobilemoney').set('Content-Type', 'application/json').set('X-Mobilemoney-Signature', signature).send(body);
    expect(good.status).toBe(200);
    expect((await get(p.id, live.apiKey))).toMatchObject({ status: 'completed', provider_ref: 'FAKE123456' });
  });
});

describe('a late success for a payment recorded failed', () => {
  /** A silent push (no callback) the customer paid at the operator, while the service recorded it failed (an STK query answered 1037). */
  async function paidButFailed() {
    const p = (await pay({ phone: PHONES.silent })).body.data as { id: string; provider_ref: string };
    const [stk] = await eventually(() => t.sql<{ callback_url: string; receipt_number: string }>(
      'SELECT callback_url, receipt_number FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()', [p.provider_ref])
      .then((r) => (r.length ? r : null)), 10_000, 'push completed at the operator');
    const c = t.service.container;
    const writer = new StatusWriter(c.orm.em, c.deliveryQueue, c.metrics.integrityMismatches, c.logger);
    await t.inContext(() => writer.applyPayment(p.id, { status: 'failed', failureReason: 'DS timeout user cannot be reached (ResultCode 1037)' }, 'status-sync'));
    const url = new URL(stk!.callback_url);
    return { ...p, receipt: stk!.receipt_number, callbackPath: `${url.pathname}${url.search}` };
  }
  const callbackBody = (checkoutId: string, code: number, receipt?: string) => ({
    Body: { stkCallback: {
      MerchantRequestID: 'm-late', CheckoutRequestID: checkoutId, ResultCode: code, ResultDesc: code === 0 ? 'The service request is processed successfully.' : 'DS timeout user cannot be reached',
      ...(receipt ? { CallbackMetadata: { Item: [{ Name: 'Amount', Value: 100 }, { Name: 'MpesaReceiptNumber', Value: receipt }, { Name: 'PhoneNumber', Value: 254700000003 }] } } : {}),
    } },
  });
  const chargedMetric = async () => total(await scrapeMetrics(t), 'payments_integrity_mismatches_total', { provider: 'mobilemoney', source: 'callback:stk:charged_but_failed' });
  const refusedMoves = (paymentId: string) =>
    t.sql(`SELECT from_status, to_status, trigger, note FROM payment_transitions WHERE payment_id = $1 AND NOT accepted ORDER BY id`, [paymentId]);

  it("the operator's verified success callback is recorded as charged_but_failed, logged as an error and counted once; the payment stays failed", async () => {
    const p = await paidButFailed();
    const before = await chargedMetric();
    for (const _delivery of [1, 2]) {
      const res = await t.http.post(p.callbackPath).send(callbackBody(p.provider_ref, 0, p.receipt));
      expect(res.status).toBe(200);
    }
    expect(await get(p.id)).toMatchObject({ status: 'failed', provider_ref: p.provider_ref });
    expect(await refusedMoves(p.id)).toEqual([
      { from_status: 'failed', to_status: 'completed', trigger: 'callback:stk', note: expect.stringMatching(/^a payment recorded failed was charged at the provider/) },
    ]);
    expect(await chargedMetric()).toBe(before + 1);
    // Logged as an error each time it is reported (recorded and counted the first time).
    const logged = { source: 'callback:stk', reference: p.receipt, msg: expect.stringMatching(/recorded failed was charged/) };
    expect(errorLogs(p.id)).toEqual([expect.objectContaining({ ...logged, firstReport: true }), expect.objectContaining({ ...logged, firstReport: false })]);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.failed' }]);
  });

  it("a success after the operator's failure callback with the same CheckoutRequestID is no repeat: recorded as charged_but_failed", async () => {
    const p = await paidButFailed();
    const before = await chargedMetric();
    // The operator's failure callback (the id is now in the inbox), then its success for the same push.
    expect((await t.http.post(p.callbackPath).send(callbackBody(p.provider_ref, 1037))).status).toBe(200);
    expect((await t.http.post(p.callbackPath).send(callbackBody(p.provider_ref, 0, p.receipt))).status).toBe(200);
    expect(await get(p.id)).toMatchObject({ status: 'failed' });
    expect(await refusedMoves(p.id)).toEqual([
      { from_status: 'failed', to_status: 'completed', trigger: 'callback:stk', note: expect.stringMatching(/^a payment recorded failed was charged at the provider/) },
    ]);
    expect(await chargedMetric()).toBe(before + 1);
    expect(errorLogs(p.id)).toHaveLength(1);
  });
});

describe('a late success for a payment recorded failed, found by check-status', () => {
  it('the STK query reports the failed push paid: recorded as charged_but_failed (check-status), counted once; the payment stays failed', async () => {
    const p = (await pay({ phone: PHONES.silent })).body.data as { id: string; provider_ref: string };
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()`, [p.provider_ref]).then((r) => r.length > 0), 10_000, 'push completed at the operator');
    const c = t.service.container;
    const writer = new StatusWriter(c.orm.em, c.deliveryQueue, c.metrics.integrityMismatches, c.logger);
    await t.inContext(() => writer.applyPayment(p.id, { status: 'failed', failureReason: 'DS timeout user cannot be reached (ResultCode 1037)' }, 'status-sync'));
    const metric = async () => total(await scrapeMetrics(t), 'payments_integrity_mismatches_total', { provider: 'mobilemoney', source: 'check-status:charged_but_failed' });
    const before = await metric();
    for (const _ask of [1, 2]) {
      const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${p.provider_ref}`).set('X-API-Key', key);
      expect(ack.status).toBe(200);
      expect(ack.body.data).toMatchObject({ ConversationID: p.provider_ref, ResponseDescription: 'payment status: failed; the provider reports completed' });
    }
    expect(await get(p.id)).toMatchObject({ status: 'failed', provider_ref: p.provider_ref });
    expect(await t.sql(`SELECT from_status, to_status, trigger FROM payment_transitions WHERE payment_id = $1 AND NOT accepted`, [p.id]))
      .toEqual([{ from_status: 'failed', to_status: 'completed', trigger: 'check-status' }]);
    expect(await metric()).toBe(before + 1);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.failed' }]);
  });
});

describe('reversals', () => {
  async function completedPayment(apiKey = key, amount = '100') {
    const res = await pay({ phone: PHONES.success, amount }, apiKey);
    return settled(res.body.data.id, 'completed', apiKey);
  }
  const refund = (body: Record<string, unknown>, apiKey = key) => t.http.post('/v1/refunds').set('X-API-Key', apiKey).send(body);
  const refundOf = (id: string, apiKey = key) =>
    eventually(async () => {
      const r = (await t.http.get(`/v1/refunds/${id}`).set('X-API-Key', apiKey)).body.data;
      return r.status !== 'pending' ? r : null;
    }, 15_000, 'reversal result');

  it('result 0: refund pending, then completed; payment reversed; payment.reversed', async () => {
    const p = await completedPayment();
    const res = await refund({ payment_id: p.id });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', amount: '100.00' });
    const again = await refund({ payment_id: p.id });
    expect(again.status).toBe(409);
    expect((await refundOf(res.body.data.id)).status).toBe('completed');
    expect(await get(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    const event = await eventually(() => receiver.events('payment.reversed').find((e) => e.json.data.payment_id === p.id));
    expect(event.json.data).toMatchObject({ status: 'reversed', previous_status: 'completed', refund_id: res.body.data.id });
  });

  it('a failing result arriving after the reversal completed changes nothing (only a card refund fails after completing)', async () => {
    const p = await completedPayment();
    const res = await refund({ payment_id: p.id });
    const refundId = res.body.data.id as string;
    const completed = await refundOf(refundId);
    expect(completed.status).toBe('completed');
    // A genuine result address (the token the service gave the operator), with a failure code.
    const late = (originatorConversationId: string) => t.http
      .post(`/v1/webhooks/mobilemoney/reversal/result?ref=${refundId}&token=${callbackToken(SANDBOX_CREDS.passkey, refundId)}`)
      .send({ Result: { ResultType: 0, ResultCode: 2001, ResultDesc: 'The initiator information is invalid.', OriginatorConversationID: originatorConversationId, ConversationID: 'AG_late', TransactionID: 'LATEREV001' } });
    // For this reversal request (its OriginatorConversationID): acknowledged, nothing changes.
    expect((await late(completed.provider_ref)).status).toBe(200);
    // Naming another request than this refund's: not this refund's result at all.
    expect((await late(`late-${refundId}`)).status).toBe(401);
    // And the status writer itself never fails a completed reversal, whatever reaches it.
    const c = t.service.container;
    const writer = new StatusWriter(c.orm.em, c.deliveryQueue, c.metrics.integrityMismatches, c.logger);
    const outcome = await t.inContext(() => writer.applyRefund(refundId, { status: 'failed', reversal: true, failureReason: 'The initiator information is invalid.' }, 'callback:reversal'));
    expect(outcome.transitioned).toBe(false);
    expect((await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', key)).body.data).toMatchObject({ status: 'completed', failure_reason: null });
    expect(await get(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00', integrity: { status: 'ok' } });
    expect(receiver.events('refund.failed').filter((e) => e.json.data.payment_id === p.id)).toEqual([]);
  });

  it('refuses a partial reversal with 422', async () => {
    const p = await completedPayment();
    const res = await refund({ payment_id: p.id, amount: '50' });
    expect(res.status).toBe(422);
    expect(res.body.error.details[0].field).toBe('amount');
  });

  it.each([
    ['2001 invalid initiator credentials', { security_credential: 'invalid-credential' }, '100', '2001'],
    ['21 initiator not allowed', { initiator: 'testapi_norole' }, '100', '21'],
    ['1 insufficient balance', {}, '99999', 'ResultCode 1)'],
  ])('result %s: refund failed with the reason, payment stays completed, refund.failed', async (_name, creds, amount, reason) => {
    const m = await t.createMerchant(`Reversal ${reason}`);
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', m.apiKey).send({ webhook_url: receiver.url }).expect(200);
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: `key-${n}-${reason.length}`, ...creds });
    const p = await completedPayment(m.apiKey, amount);
    const res = await refund({ payment_id: p.id }, m.apiKey);
    const r = await refundOf(res.body.data.id, m.apiKey);
    expect(r.status).toBe('failed');
    expect(r.failure_reason).toContain(reason);
    expect((await get(p.id, m.apiKey)).status).toBe('completed');
    const event = await eventually(() => receiver.events('refund.failed').find((e) => e.json.data.payment_id === p.id));
    expect(event.json.data).toMatchObject({ status: 'completed', refund_id: res.body.data.id });
  });

  it("a queue-timeout notice is no final outcome: the refund stays pending (recorded), and the reversal's success result after it completes the refund", async () => {
    const m = await t.createMerchant('Reversal queue timeout');
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: 'queue-timeout-key' });
    const p = await completedPayment(m.apiKey);
    const control = (path: string, body: unknown) =>
      fetch(`${t.baseUrl}/sandbox/mobilemoney/_control/${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json());
    // The operator sends a queue-timeout notice, then carries the reversal out all the same: both held, released in order.
    await control('queue-timeouts', { count: 1 });
    await control('hold-results', { count: 2 });
    const res = await refund({ payment_id: p.id }, m.apiKey);
    expect(res.status).toBe(201);
    const refundId = res.body.data.id as string;
    const held = await eventually(() => t.sql<{ url: string }>(`SELECT job->>'url' AS url FROM sandbox_held_results WHERE provider = 'mobilemoney' ORDER BY id`)
      .then((rows) => {
        const mine = rows.filter((r) => new URL(r.url).searchParams.get('ref') === refundId);
        return mine.length === 2 ? mine : null;
      }), 10_000, 'the notice and the result held');
    expect(held.map((r) => new URL(r.url).pathname)).toEqual(['/v1/webhooks/mobilemoney/reversal/timeout', '/v1/webhooks/mobilemoney/reversal/result']);

    expect((await control('release-results', { count: 1 })).statuses).toEqual([200]);
    expect((await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', m.apiKey)).body.data).toMatchObject({ status: 'pending', failure_reason: null });
    expect(await t.sql(`SELECT to_status, note FROM payment_transitions WHERE refund_id = $1 AND NOT accepted`, [refundId])).toEqual([
      { to_status: 'failed', note: expect.stringContaining('queue timeout notice') },
    ]);

    expect((await control('release-results', { count: 1 })).statuses).toEqual([200]);
    expect((await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', m.apiKey)).body.data.status).toBe('completed');
    expect(await get(p.id, m.apiKey)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    expect((await t.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1 ORDER BY created_at', [p.id])).map((e) => e.type)).toEqual(['payment.completed', 'payment.reversed']);
  });

  it('result R000002 (receipt unknown to the shortcode) fails; R000001 (already reversed) completes', async () => {
    const m = await t.createMerchant('Reversal R codes');
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: 'r-codes-key' });
    const first = await completedPayment(m.apiKey);
    const second = await completedPayment(m.apiKey);
    // The shortcode changes: the old receipts are not this shortcode's → R000002.
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: 'r-codes-key', shortcode: '600000' });
    const invalid = await refundOf((await refund({ payment_id: first.id }, m.apiKey)).body.data.id, m.apiKey);
    expect(invalid.status).toBe('failed');
    expect(invalid.failure_reason).toContain('R000002');
    // Reversed at the operator directly (outside the service) first → R000001 → still a completed reversal.
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: 'r-codes-key' });
    const tokenRes = await fetch(`${t.baseUrl}/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials`, {
      headers: { Authorization: `Basic ${Buffer.from('r-codes-direct:secret').toString('base64')}` },
    });
    const { access_token } = (await tokenRes.json()) as { access_token: string };
    const direct = await fetch(`${t.baseUrl}/sandbox/mobilemoney/mpesa/reversal/v1/request`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${access_token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        Initiator: 'testapi', SecurityCredential: 'x', CommandID: 'TransactionReversal', TransactionID: second.provider_ref, Amount: 100,
        ReceiverParty: '174379', RecieverIdentifierType: '11', ResultURL: 'http://127.0.0.1:9/none', QueueTimeOutURL: 'http://127.0.0.1:9/none', Remarks: 'direct reversal',
      }),
    });
    expect(direct.status).toBe(200);
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_reversals WHERE transaction_id = $1`, [second.provider_ref]).then((r) => r.length > 0), 10_000, 'direct reversal');
    const already = await refundOf((await refund({ payment_id: second.id }, m.apiKey)).body.data.id, m.apiKey);
    expect(already.status).toBe('completed');
    expect((await get(second.id, m.apiKey)).status).toBe('reversed');
  });
});

describe('stored result_url and timeout_url', () => {
  // The test service's PUBLIC_BASE_URL is the address it listens at.
  const ours = (route: string) => `${t.baseUrl}/v1/webhooks/mobilemoney${route}`;
  const control = (path: string, body: unknown) =>
    fetch(`${t.baseUrl}/sandbox/mobilemoney/_control/${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json());
  /** Holds the operator's next result, runs `send`, and answers the address the operator was given for it (naming `ref`). */
  async function heldResultUrl(ref: () => string | undefined, send: () => Promise<void>): Promise<URL> {
    await control('hold-results', { count: 1 });
    await send();
    const [held] = await eventually(() => t.sql<{ url: string }>(`SELECT job->>'url' AS url FROM sandbox_held_results WHERE provider = 'mobilemoney'`)
      .then((rows) => (rows.some((r) => new URL(r.url).searchParams.get('ref') === ref()) ? rows.filter((r) => new URL(r.url).searchParams.get('ref') === ref()) : null)), 10_000, 'the held result');
    return new URL(held!.url);
  }
  const release = () => control('release-results', { count: 1 });
  let apiKey: string;
  let merchantId: string;

  beforeAll(async () => {
    ({ apiKey, merchantId } = await t.createMerchant('Own addresses'));
    const res = await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'mobilemoney', mobilemoney: {
      ...SANDBOX_CREDS, consumer_key: 'gateway-key', result_url: ours('/reversal/result'), timeout_url: ours('/transactionstatus/timeout'),
    } }).expect(200);
    expect(res.body.data.config_summary).toMatchObject({ result_url: ours('/reversal/result'), timeout_url: ours('/transactionstatus/timeout') });
  });
  const completed = async (merchantKey = apiKey) => settled((await pay({ phone: PHONES.success }, merchantKey)).body.data.id, 'completed', merchantKey);
  const expectOurAddress = (url: URL, route: string, ref: string) => {
    expect(`${url.origin}${url.pathname}`).toBe(ours(route));
    expect(Object.fromEntries(url.searchParams)).toEqual({ ref, token: callbackToken(SANDBOX_CREDS.passkey, ref) });
  };

  it("a reversal's ResultURL is this service's own address (PUBLIC_BASE_URL, ref, token), and the result arriving there completes the refund", async () => {
    const p = await completed();
    let refundId: string | undefined;
    const url = await heldResultUrl(() => refundId, async () => {
      const res = await t.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: p.id }).expect(201);
      refundId = res.body.data.id;
    });
    expectOurAddress(url, '/reversal/result', refundId!);
    expect((await release()).statuses).toEqual([200]);
    expect((await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', apiKey)).body.data.status).toBe('completed');
    expect(await get(p.id, apiKey)).toMatchObject({ status: 'reversed' });
  });

  it("a result_url on another host stored before this rule is not used: the reversal's ResultURL is on PUBLIC_BASE_URL", async () => {
    const m = await t.createMerchant('Stored earlier');
    const creds = { ...SANDBOX_CREDS, consumer_key: 'earlier-key' };
    await storeCreds(m.apiKey, creds);
    const sealed = t.service.container.secrets.sealJson({ ...creds, result_url: 'https://shop.example.com/v1/webhooks/mobilemoney/reversal/result' });
    await t.sql(`UPDATE provider_credentials SET secrets_enc = $1 WHERE merchant_id = $2 AND provider = 'mobilemoney'`, [sealed, m.merchantId]);
    const p = await completed(m.apiKey);
    let refundId: string | undefined;
    const url = await heldResultUrl(() => refundId, async () => {
      refundId = (await t.http.post('/v1/refunds').set('X-API-Key', m.apiKey).send({ payment_id: p.id }).expect(201)).body.data.id;
    });
    expectOurAddress(url, '/reversal/result', refundId!);
    expect((await release()).statuses).toEqual([200]);
    expect((await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', m.apiKey)).body.data.status).toBe('completed');
  });

  it("a reversal's QueueTimeOutURL is on PUBLIC_BASE_URL, and the notice arriving there is recorded; the refund stays pending", async () => {
    const p = await completed();
    await t.sql(`UPDATE payments SET receipt_number = 'TIMEOUT0000' WHERE id = $1`, [p.id]);
    let refundId: string | undefined;
    const url = await heldResultUrl(() => refundId, async () => {
      refundId = (await t.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: p.id }).expect(201)).body.data.id;
    });
    expectOurAddress(url, '/reversal/timeout', refundId!);
    expect((await release()).statuses).toEqual([200]);
    expect((await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', apiKey)).body.data).toMatchObject({ status: 'pending' });
    expect(await t.sql(`SELECT note FROM payment_transitions WHERE refund_id = $1 AND NOT accepted`, [refundId])).toEqual([{ note: expect.stringContaining('queue timeout notice') }]);
  });

  it("a status query's ResultURL and QueueTimeOutURL are on PUBLIC_BASE_URL: its result arriving there is recorded, a queue-timeout notice too, leaving the query open", async () => {
    const p = await completed();
    const queryOf = async (code: string) => (await t.sql<{ id: string }>('SELECT id FROM provider_status_queries WHERE merchant_id = $1 AND code = $2', [merchantId, code]))[0]?.id;
    let queryId: string | undefined;
    const resultUrl = await heldResultUrl(() => queryId, async () => {
      await t.http.post(`/v1/payments/mobilemoney/check-status/${p.provider_ref}`).set('X-API-Key', apiKey).expect(200);
      queryId = await queryOf(p.provider_ref);
    });
    expectOurAddress(resultUrl, '/transactionstatus/result', queryId!);
    expect((await release()).statuses).toEqual([200]);
    expect(await t.sql('SELECT result_code FROM provider_status_queries WHERE id = $1 AND completed_at IS NOT NULL', [queryId])).toEqual([{ result_code: '0' }]);

    let timeoutQueryId: string | undefined;
    const timeoutUrl = await heldResultUrl(() => timeoutQueryId, async () => {
      await t.http.post('/v1/payments/mobilemoney/check-status/TIMEOUT0000').set('X-API-Key', apiKey).expect(200);
      timeoutQueryId = await queryOf('TIMEOUT0000');
    });
    expectOurAddress(timeoutUrl, '/transactionstatus/timeout', timeoutQueryId!);
    expect((await release()).statuses).toEqual([200]);
    // A queue timeout is no answer (the operator may still send the result): recorded, the query left open for its result.
    expect(await t.sql('SELECT result_code, completed_at FROM provider_status_queries WHERE id = $1', [timeoutQueryId])).toEqual([{ result_code: '1037', completed_at: null }]);
  });

  it.each([
    ["result_url on the merchant's own server", () => ({ result_url: 'https://shop.example.com/v1/webhooks/mobilemoney/reversal/result' }), 'mobilemoney.result_url'],
    ['timeout_url on another host name of this machine', () => ({ timeout_url: ours('/reversal/timeout').replace('127.0.0.1', 'localhost') }), 'mobilemoney.timeout_url'],
    ['result_url on another port', () => ({ result_url: `http://127.0.0.1:9/v1/webhooks/mobilemoney/reversal/result` }), 'mobilemoney.result_url'],
    ['result_url under another path prefix', () => ({ result_url: `${t.baseUrl}/api/v1/webhooks/mobilemoney/reversal/result` }), 'mobilemoney.result_url'],
    ['result_url naming none of our routes', () => ({ result_url: `${t.baseUrl}/mpesa/results` }), 'mobilemoney.result_url'],
    ['result_url naming a timeout route', () => ({ result_url: ours('/reversal/timeout') }), 'mobilemoney.result_url'],
    ['timeout_url naming a result route', () => ({ timeout_url: ours('/transactionstatus/result') }), 'mobilemoney.timeout_url'],
    ['result_url with a query', () => ({ result_url: `${ours('/reversal/result')}?ref=x` }), 'mobilemoney.result_url'],
    ['timeout_url that is not http(s)', () => ({ timeout_url: ours('/reversal/timeout').replace(/^http/, 'ftp') }), 'mobilemoney.timeout_url'],
  ])('refuses a %s with 422 naming the field, and stores nothing', async (_name, urls, field) => {
    const before = await t.http.get('/v1/merchant/credentials').set('X-API-Key', apiKey).expect(200);
    const res = await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'mobilemoney', mobilemoney: { ...SANDBOX_CREDS, consumer_key: 'gateway-key', ...urls() } });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ field, issue: expect.stringContaining(`reach this service (at ${new URL(t.baseUrl).origin})`) }] });
    expect((await t.http.get('/v1/merchant/credentials').set('X-API-Key', apiKey).expect(200)).body).toEqual(before.body);
  });

  it('behind a proxy that serves the service under a path prefix (PUBLIC_BASE_URL with a path), takes addresses under that prefix and refuses them without it', async () => {
    const proxied = await startTestService({ PUBLIC_BASE_URL: 'https://payments.example.com/gateway' });
    try {
      const m = await proxied.createMerchant('Behind a prefix');
      const store = (urls: Record<string, string>) =>
        proxied.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'mobilemoney', mobilemoney: { ...SANDBOX_CREDS, consumer_key: 'gateway-key', ...urls } });
      const underPrefix = {
        result_url: 'https://payments.example.com/gateway/v1/webhooks/mobilemoney/reversal/result',
        timeout_url: 'https://payments.example.com/gateway/v1/webhooks/mobilemoney/transactionstatus/timeout',
      };
      const stored = await store(underPrefix);
      expect(stored.status).toBe(200);
      expect(stored.body.data.config_summary).toMatchObject(underPrefix);
      const withoutPrefix = await store({ result_url: 'https://payments.example.com/v1/webhooks/mobilemoney/reversal/result' });
      expect(withoutPrefix.status).toBe(422);
      expect(withoutPrefix.body.error.details).toEqual([{ field: 'mobilemoney.result_url', issue: expect.stringContaining('reach this service') }]);
      expect((await proxied.http.get('/v1/merchant/credentials').set('X-API-Key', m.apiKey).expect(200)).body.data).toEqual([
        expect.objectContaining({ provider: 'mobilemoney', config_summary: expect.objectContaining(underPrefix) }),
      ]);
    } finally {
      await proxied.stop();
    }
  });
});

describe('check-status', () => {
  it('accepts a receipt number, and the result reaches the service', async () => {
    const res = await pay({ phone: PHONES.success });
    const p = await settled(res.body.data.id, 'completed');
    const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${p.provider_ref}`).set('X-API-Key', key);
    expect(ack.status).toBe(200);
    expect(ack.body.data).toEqual({ OriginatorConversationID: expect.any(String), ConversationID: expect.any(String), ResponseCode: '0', ResponseDescription: expect.any(String) });
    const [query] = await eventually(() =>
      t.sql<{ result_code: string; payment_id: string }>('SELECT result_code, payment_id FROM provider_status_queries WHERE provider_query_ref = $1 AND completed_at IS NOT NULL', [ack.body.data.OriginatorConversationID])
        .then((rows) => (rows.length ? rows : null)), 10_000, 'status result');
    expect(query).toEqual({ result_code: '0', payment_id: p.id });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.completed' }]);
  });

  it('settles a pending push asked for by its CheckoutRequestID (STK query) and enqueues the event', async () => {
    const silent = (await pay({ phone: PHONES.silent })).body.data;
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()`, [silent.provider_ref]).then((r) => r.length > 0), 10_000, 'push completed at the operator');
    const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${silent.provider_ref}`).set('X-API-Key', key);
    expect(ack.status).toBe(200);
    expect(ack.body.data).toMatchObject({ ConversationID: silent.provider_ref, ResponseCode: '0' });
    expect((await get(silent.id)).status).toBe('completed');
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === silent.id));
  });

  it("a push completed by check-status (no receipt) takes the receipt of the operator's verified callback arriving after, and can be refunded", async () => {
    const silent = (await pay({ phone: PHONES.silent })).body.data;
    const [stk] = await eventually(() => t.sql<{ callback_url: string; receipt_number: string }>(
      'SELECT callback_url, receipt_number FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()', [silent.provider_ref])
      .then((r) => (r.length ? r : null)), 10_000, 'push completed at the operator');
    await t.http.post(`/v1/payments/mobilemoney/check-status/${silent.provider_ref}`).set('X-API-Key', key).expect(200);
    // The STK query names no receipt: the payment is completed, known by its CheckoutRequestID.
    expect(await get(silent.id)).toMatchObject({ status: 'completed', provider_ref: silent.provider_ref });
    const url = new URL(stk!.callback_url);
    const callback = (amount: number) => t.http.post(`${url.pathname}${url.search}`).send({
      Body: { stkCallback: {
        MerchantRequestID: 'm-1', CheckoutRequestID: silent.provider_ref, ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
        CallbackMetadata: { Item: [{ Name: 'Amount', Value: amount }, { Name: 'MpesaReceiptNumber', Value: stk!.receipt_number }, { Name: 'PhoneNumber', Value: 254700000003 }] },
      } },
    });
    // Another amount gives it nothing (an integrity mismatch)…
    expect((await callback(1)).status).toBe(200);
    expect(await get(silent.id)).toMatchObject({ status: 'completed', provider_ref: silent.provider_ref, integrity: { status: 'mismatch' } });
    // …the operator's callback with its amount gives it the receipt.
    expect((await callback(100)).status).toBe(200);
    expect(await get(silent.id)).toMatchObject({ status: 'completed', provider_ref: stk!.receipt_number });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [silent.id])).toEqual([{ type: 'payment.completed' }]);
    const refund = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: silent.id });
    expect(refund.status).toBe(201);
    expect(refund.body.data).toMatchObject({ status: 'pending', amount: '100.00' });
    await settled(silent.id, 'reversed');
  });

  /** The STK queries the operator was asked for a push, and the status queries recorded under a code. */
  const stkQueries = async (checkoutId: string) => (await t.sql<{ n: number }>('SELECT query_count AS n FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1', [checkoutId]))[0]!.n;
  const statusQueries = (code: string) => t.sql('SELECT 1 FROM provider_status_queries WHERE code = $1', [code]);

  it('a cancelled push, once failed, asked for by its CheckoutRequestID: answered by the STK query (200), stays failed, nothing sent as a TransactionID', async () => {
    const p = (await pay({ phone: PHONES.cancelled })).body.data;
    await settled(p.id, 'failed');
    const asked = await stkQueries(p.provider_ref);
    const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${p.provider_ref}`).set('X-API-Key', key);
    expect(ack.status).toBe(200);
    expect(ack.body.data).toEqual({ OriginatorConversationID: expect.any(String), ConversationID: p.provider_ref, ResponseCode: '0', ResponseDescription: 'payment status: failed' });
    expect(await stkQueries(p.provider_ref)).toBe(asked + 1);
    expect(await statusQueries(p.provider_ref)).toEqual([]);
    expect(await get(p.id)).toMatchObject({ status: 'failed', provider_ref: p.provider_ref, failure_reason: expect.stringContaining('1032') });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.failed' }]);
  });

  it('a push completed by the STK query (no receipt) asked for again: answered by the STK query again (200), nothing changes', async () => {
    const silent = (await pay({ phone: PHONES.silent })).body.data;
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()`, [silent.provider_ref]).then((r) => r.length > 0), 10_000, 'push completed at the operator');
    await t.http.post(`/v1/payments/mobilemoney/check-status/${silent.provider_ref}`).set('X-API-Key', key).expect(200);
    expect(await get(silent.id)).toMatchObject({ status: 'completed', provider_ref: silent.provider_ref });
    const again = await t.http.post(`/v1/payments/mobilemoney/check-status/${silent.provider_ref}`).set('X-API-Key', key);
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ ConversationID: silent.provider_ref, ResponseCode: '0', ResponseDescription: 'payment status: completed' });
    expect(await stkQueries(silent.provider_ref)).toBe(2);
    expect(await statusQueries(silent.provider_ref)).toEqual([]);
    expect(await get(silent.id)).toMatchObject({ status: 'completed', provider_ref: silent.provider_ref });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [silent.id])).toEqual([{ type: 'payment.completed' }]);
  });

  it('a failed push whose STK query still says "being processed", asked for twice: 200 naming both statuses, no refused failed→pending transition written', async () => {
    const config = t.service.container.config;
    const saved = config.sandboxCallbackDelayMs;
    config.sandboxCallbackDelayMs = 8000; // the prompt stays open: the STK query answers "being processed"
    let p;
    try {
      p = (await pay({ phone: '254700000006' })).body.data; // the customer lets it expire (1019) in the end
    } finally {
      config.sandboxCallbackDelayMs = saved;
    }
    // Recorded failed meanwhile (as a status sync can), while the operator still has the prompt open.
    const c = t.service.container;
    const writer = new StatusWriter(c.orm.em, c.deliveryQueue, c.metrics.integrityMismatches, c.logger);
    await t.inContext(() => writer.applyPayment(p.id, { status: 'failed', failureReason: 'DS timeout user cannot be reached (ResultCode 1037)' }, 'status-sync'));
    const asked = await stkQueries(p.provider_ref);
    for (const _click of [1, 2]) {
      const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${p.provider_ref}`).set('X-API-Key', key);
      expect(ack.status).toBe(200);
      expect(ack.body.data).toMatchObject({ ConversationID: p.provider_ref, ResponseCode: '0', ResponseDescription: 'payment status: failed; the provider reports pending' });
    }
    const [stk] = await t.sql<{ open: boolean }>('SELECT completes_at > now() AS open FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1', [p.provider_ref]);
    expect(stk!.open).toBe(true); // both asked while the prompt was open
    expect(await stkQueries(p.provider_ref)).toBe(asked + 2);
    expect(await t.sql(`SELECT from_status, to_status, accepted FROM payment_transitions WHERE payment_id = $1 AND to_status = 'pending' AND from_status = 'failed'`, [p.id])).toEqual([]);
    expect(await get(p.id)).toMatchObject({ status: 'failed' });
  });

  it.each(['ws_CO_22112026000000000000', 'WS_CO_22112026000000000001'])("a CheckoutRequestID of none of the merchant's payments (%s: its prefix in any case): 404, nothing sent to the operator", async (code) => {
    const { result: res, sent } = await statusQueriesSentDuring(t, async () => {
      const answer = await t.http.post(`/v1/payments/mobilemoney/check-status/${code}`).set('X-API-Key', key);
      // A receipt-like code is sent: the operator's side is watched.
      await t.http.post('/v1/payments/mobilemoney/check-status/QWE1RT2YUI').set('X-API-Key', key).expect(200);
      return answer;
    });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
    expect(sent).toContain('QWE1RT2YUI');
    expect(sent).not.toContain(code);
    expect(await statusQueries(code)).toEqual([]);
  });

  it("the customer's phone number is no receipt: asked as an unknown TransactionID, not answered about one of the customer's pushes", async () => {
    const m = await t.createMerchant('Two pushes from one phone');
    await storeCreds(m.apiKey, SANDBOX_CREDS);
    const first = (await pay({ phone: PHONES.success }, m.apiKey)).body.data;
    const done = await settled(first.id, 'completed', m.apiKey);
    const config = t.service.container.config;
    const saved = config.sandboxCallbackDelayMs;
    config.sandboxCallbackDelayMs = 8000; // the second push's prompt stays open: it stays pending
    let open;
    try {
      open = (await pay({ phone: PHONES.success }, m.apiKey)).body.data;
    } finally {
      config.sandboxCallbackDelayMs = saved;
    }
    const asked = await stkQueries(open.provider_ref);
    const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${PHONES.success}`).set('X-API-Key', m.apiKey);
    expect(ack.status).toBe(200);
    expect([done.reference, open.reference]).not.toContain(ack.body.data.OriginatorConversationID);
    expect([done.provider_ref, open.provider_ref]).not.toContain(ack.body.data.ConversationID);
    expect(await stkQueries(open.provider_ref)).toBe(asked);
    expect(await t.sql('SELECT payment_id FROM provider_status_queries WHERE merchant_id = $1 AND code = $2', [m.merchantId, PHONES.success])).toEqual([{ payment_id: null }]);
    // The completed push is still found by its CheckoutRequestID (no longer its provider_ref): asked by its receipt.
    await t.http.post(`/v1/payments/mobilemoney/check-status/${first.provider_ref}`).set('X-API-Key', m.apiKey).expect(200);
    expect(await t.sql('SELECT payment_id FROM provider_status_queries WHERE merchant_id = $1 AND code = $2', [m.merchantId, first.provider_ref])).toEqual([{ payment_id: done.id }]);
  });

  it('a code that is neither a receipt (letters and digits) nor a CheckoutRequestID (ws_CO_…): 422 naming code, nothing recorded or sent (was 502 from the operator)', async () => {
    for (const code of ['ABC_DEF-123', 'NOT-A-RECEIPT', 'ABC123_', 'x']) {
      const { result: res, sent } = await statusQueriesSentDuring(t, () => t.http.post(`/v1/payments/mobilemoney/check-status/${code}`).set('X-API-Key', key));
      expect(res.status).toBe(422);
      expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ field: 'code', issue: expect.stringContaining('CheckoutRequestID') }] });
      expect(sent).toEqual([]);
      expect(await statusQueries(code)).toEqual([]);
    }
  });

  it('a code the operator refuses as a TransactionID: 502 PROVIDER_ERROR, and no status query is left recorded', async () => {
    const code = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123'; // longer than the (simulated) operator takes
    const res = await t.http.post(`/v1/payments/mobilemoney/check-status/${code}`).set('X-API-Key', key);
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('PROVIDER_ERROR');
    expect(await statusQueries(code)).toEqual([]);
  });

  it('a push whose prompt is still open, queried while the operator answers 200 ResultCode 4999 "still under processing": stays pending, then the callback completes it', async () => {
    const config = t.service.container.config;
    const saved = config.sandboxCallbackDelayMs;
    config.sandboxCallbackDelayMs = 6000; // the customer answers the prompt after 6 s
    let p;
    try {
      p = (await pay({ phone: '254700000007' })).body.data;
    } finally {
      config.sandboxCallbackDelayMs = saved;
    }
    const ack = await t.http.post(`/v1/payments/mobilemoney/check-status/${p.provider_ref}`).set('X-API-Key', key);
    expect(ack.status).toBe(200);
    expect(ack.body.data).toMatchObject({ ConversationID: p.provider_ref, ResponseCode: '0', ResponseDescription: 'payment status: pending' });
    expect(await get(p.id)).toMatchObject({ status: 'pending', failure_reason: null });
    const [stk] = await t.sql<{ open: boolean }>('SELECT completes_at > now() AS open FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1', [p.provider_ref]);
    expect(stk!.open).toBe(true); // asked while the prompt was open: the answer was 4999
    const done = await settled(p.id, 'completed');
    expect(done.provider_ref).toMatch(/^[A-Z0-9]{10}$/);
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === p.id));
    expect(receiver.events('payment.failed').filter((e) => e.json.data.payment_id === p.id)).toEqual([]);
  });

  it("a status query whose answer is lost on the way back (the operator took it): 502, its row is kept, and the operator's later result is recorded", async () => {
    const p = await settled((await pay({ phone: PHONES.success })).body.data.id, 'completed');
    await t.http.post('/sandbox/mobilemoney/_control/lose-answers').send({ count: 1 }).expect(200);
    let res;
    try {
      res = await t.http.post(`/v1/payments/mobilemoney/check-status/${p.provider_ref}`).set('X-API-Key', key);
    } finally {
      await t.http.post('/sandbox/mobilemoney/_control/lose-answers').send({ count: 0 });
    }
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('PROVIDER_ERROR');
    const [query] = await eventually(() =>
      t.sql<{ payment_id: string; result_code: string }>('SELECT payment_id, result_code FROM provider_status_queries WHERE code = $1 AND completed_at IS NOT NULL', [p.provider_ref])
        .then((rows) => (rows.length ? rows : null)), 10_000, 'the late status result');
    expect(query).toEqual({ payment_id: p.id, result_code: '0' });
  });

  it('records a queue timeout, and leaves the query open for the result the operator may still send', async () => {
    const ack = await t.http.post('/v1/payments/mobilemoney/check-status/TIMEOUT0000').set('X-API-Key', key);
    expect(ack.status).toBe(200);
    const [query] = await eventually(() =>
      t.sql<{ result_code: string; completed_at: Date | null }>(`SELECT result_code, completed_at FROM provider_status_queries WHERE provider_query_ref = $1 AND result_code IS NOT NULL`, [ack.body.data.OriginatorConversationID])
        .then((r) => (r.length ? r : null)), 10_000, 'timeout notice');
    expect(query).toEqual({ result_code: '1037', completed_at: null });
  });

  it('needs mobilemoney credentials (422)', async () => {
    const m = await t.createMerchant('No creds');
    expect((await t.http.post('/v1/payments/mobilemoney/check-status/NLJ7RT61SV').set('X-API-Key', m.apiKey)).status).toBe(422);
  });
});

describe('reconciliation', () => {
  it('recovers a silent payment exactly once, and reports skipped and not_found', async () => {
    const m = await t.createMerchant('Reconciler');
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', m.apiKey).send({ webhook_url: receiver.url }).expect(200);
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: 'reconciler-key', shortcode: '777001' });
    const silent = (await pay({ phone: PHONES.silent }, m.apiKey)).body.data;
    const loud = (await pay({ phone: PHONES.success }, m.apiKey)).body.data;
    await settled(loud.id, 'completed', m.apiKey);
    // A transaction on the shortcode that this service never created.
    const outsider = await fetch(`${t.baseUrl}/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials`, { headers: { Authorization: `Basic ${Buffer.from('outsider:secret').toString('base64')}` } });
    const { access_token } = (await outsider.json()) as { access_token: string };
    const ts = '20261122120000';
    await fetch(`${t.baseUrl}/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest`, {
      method: 'POST', headers: { Authorization: `Bearer ${access_token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ BusinessShortCode: '777001', Password: Buffer.from(`777001x${ts}`).toString('base64'), Timestamp: ts, TransactionType: 'CustomerPayBillOnline', Amount: 5, PartyA: PHONES.silent, PartyB: '777001', PhoneNumber: PHONES.silent, CallBackURL: 'http://127.0.0.1:9/none', AccountReference: 'WALKIN', TransactionDesc: 'walk in' }),
    });
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE shortcode = '777001' AND completes_at <= now()`).then((r) => r.length === 3), 10_000, 'three completed transactions');

    const first = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', m.apiKey).send({});
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ pulled: 3, updated: 1, skipped: 1, not_found: 1 });
    expect(first.body.data.results).toEqual(expect.arrayContaining([
      { receipt: expect.any(String), outcome: 'updated', payment_id: silent.id },
      { receipt: expect.any(String), outcome: 'skipped', payment_id: loud.id },
      { receipt: expect.any(String), outcome: 'not_found' },
    ]));
    expect((await get(silent.id, m.apiKey)).status).toBe('completed');
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === silent.id));

    const second = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', m.apiKey).send({});
    expect(second.body.data).toMatchObject({ pulled: 3, updated: 0, skipped: 2, not_found: 1 });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [silent.id])).toEqual([{ type: 'payment.completed' }]);
  });

  it('a settled transaction of a payment recorded failed is reported as charged_but_failed (not a plain skip), in its transitions and the integrity metric once', async () => {
    const m = await t.createMerchant('Charged but failed');
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', m.apiKey).send({ webhook_url: receiver.url }).expect(200);
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: 'charged-failed-key', shortcode: '777002' });
    // The customer pays (no callback comes); meanwhile the service recorded the payment failed (as from an
    // STK query answered with a failure code).
    const p = (await pay({ phone: PHONES.silent }, m.apiKey)).body.data;
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()`, [p.provider_ref]).then((r) => r.length > 0), 10_000, 'push completed at the operator');
    const c = t.service.container;
    const writer = new StatusWriter(c.orm.em, c.deliveryQueue, c.metrics.integrityMismatches, c.logger);
    await t.inContext(() => writer.applyPayment(p.id, { status: 'failed', failureReason: 'DS timeout user cannot be reached (ResultCode 1037)' }, 'status-sync'));
    const metric = async () => total(await scrapeMetrics(t), 'payments_integrity_mismatches_total', { provider: 'mobilemoney', source: 'reconciliation:charged_but_failed' });
    const before = await metric();

    for (const _run of [1, 2]) {
      const res = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', m.apiKey).send({});
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ pulled: 1, updated: 0, skipped: 1, not_found: 0 });
      expect(res.body.data.results).toEqual([{ receipt: expect.any(String), outcome: 'skipped', payment_id: p.id, reason: 'charged_but_failed' }]);
    }
    expect(await get(p.id, m.apiKey)).toMatchObject({ status: 'failed' });
    const refused = await t.sql(`SELECT from_status, to_status, trigger, note FROM payment_transitions WHERE payment_id = $1 AND NOT accepted`, [p.id]);
    expect(refused).toEqual([{ from_status: 'failed', to_status: 'completed', trigger: 'reconciliation', note: expect.stringMatching(/^a payment recorded failed was charged at the provider/) }]);
    expect(await metric()).toBe(before + 1);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.failed' }]);

    // Told it failed, the customer pays again by paybill quoting its reference: a second charge to refund,
    // recorded and counted on its own (each note names its receipt), not folded into the first.
    expect(await paidAgainByPaybill('777002', '254722000334', p.reference)).toBe(200);
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE shortcode = '777002' AND completes_at <= now()`).then((r) => r.length === 2), 10_000, 'both transactions completed');
    for (const _run of [1, 2]) {
      const res = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', m.apiKey).send({});
      expect(res.body.data.results).toEqual([
        { receipt: expect.any(String), outcome: 'skipped', payment_id: p.id, reason: 'charged_but_failed' },
        { receipt: expect.any(String), outcome: 'skipped', payment_id: p.id, reason: 'charged_but_failed' },
      ]);
    }
    const receipts = (await t.sql<{ receipt_number: string }>(`SELECT receipt_number FROM sandbox_mobilemoney_stk_requests WHERE shortcode = '777002' ORDER BY receipt_number`)).map((r) => r.receipt_number);
    const notes = (await t.sql<{ note: string }>(`SELECT note FROM payment_transitions WHERE payment_id = $1 AND NOT accepted ORDER BY note`, [p.id])).map((r) => r.note);
    expect(notes).toEqual(receipts.map((r) => `a payment recorded failed was charged at the provider: ${r}`).sort());
    expect(await metric()).toBe(before + 2);
  });

  /** The advisory lock a held callback waits for (two-int form: no clash with the service's own keys). */
  const HOLD = '4243, 1';
  /**
   * A callback lands between the reconciliation's read of a payment and its write: the operator's callback
   * `body` is posted to the push's callback URL and held by the database, as another session can hold it — a
   * trigger makes its transition's insert (its unit of work has locked and changed the payment's row, not yet
   * committed) wait for an advisory lock the test holds — until the reconciliation, which read the payment as it
   * was (pending), waits for that row; then the lock is released and the callback commits. Answers the
   * reconciliation's report.
   */
  async function reconcileAsACallbackLands(apiKey: string, payment: { id: string; callbackPath: string }, body: object) {
    await t.sql(`CREATE OR REPLACE FUNCTION test_hold_callback() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(${HOLD}); RETURN NEW; END $$`);
    await t.sql(`CREATE TRIGGER test_hold_callback BEFORE INSERT ON payment_transitions FOR EACH ROW
      WHEN (NEW.payment_id = '${payment.id}' AND NEW.trigger = 'callback:stk') EXECUTE FUNCTION test_hold_callback()`);
    const holder = new pg.Client({ connectionString: t.databaseUrl });
    await holder.connect();
    const requests: Promise<unknown>[] = [];
    // The session `pid` blocks (by a lock it holds), whatever statement waits.
    const blockedBy = (pid: number, what: string) => eventually(() => t.sql<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])
      .then((rows) => rows[0]?.pid ?? null), 10_000, what);
    try {
      const [{ pid: holderPid }] = (await holder.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid, pg_advisory_lock(${HOLD})`)).rows as [{ pid: number }];
      const callback = t.http.post(payment.callbackPath).send(body).then((res) => res);
      requests.push(callback.catch(() => undefined));
      const callbackPid = await blockedBy(holderPid, 'the callback held with the payment row locked');
      const reconcile = t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', apiKey).send({}).then((res) => res);
      requests.push(reconcile.catch(() => undefined));
      await blockedBy(callbackPid, 'the reconciliation to wait for the payment row');
      await holder.query(`SELECT pg_advisory_unlock(${HOLD})`);
      expect((await callback).status).toBe(200);
      const res = await reconcile;
      expect(res.status).toBe(200);
      return res.body.data as { pulled: number; updated: number; skipped: number; results: unknown[] };
    } finally {
      // Also when a wait fails: the held callback would keep the row locked and a pool connection for the rest of the file.
      await holder.end();
      await Promise.allSettled(requests);
      await t.sql('DROP TRIGGER IF EXISTS test_hold_callback ON payment_transitions');
    }
  }
  /** A merchant of its own shortcode with a push the customer paid (no callback came): its receipt at the operator. */
  async function paidSilently(name: string, shortcode: string) {
    const m = await t.createMerchant(name);
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: `${shortcode}-key`, shortcode });
    const p = (await pay({ phone: PHONES.silent }, m.apiKey)).body.data as { id: string; provider_ref: string; reference: string };
    const [{ receipt_number: receipt, callback_url: callbackUrl }] = await eventually(() => t.sql<{ receipt_number: string; callback_url: string }>(
      'SELECT receipt_number, callback_url FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()', [p.provider_ref],
    ).then((r) => (r.length ? r : null)), 10_000, 'push completed at the operator') as [{ receipt_number: string; callback_url: string }];
    const url = new URL(callbackUrl);
    return { m, p: { ...p, callbackPath: `${url.pathname}${url.search}` }, receipt };
  }
  /** The operator's callback for push `checkoutId`: paid with `receipt`, or (without one) cancelled by the customer. */
  const operatorCallback = (checkoutId: string, receipt?: string) => ({
    Body: { stkCallback: {
      MerchantRequestID: 'm-raced', CheckoutRequestID: checkoutId, ResultCode: receipt ? 0 : 1032,
      ResultDesc: receipt ? 'The service request is processed successfully.' : 'Request cancelled by user',
      ...(receipt ? { CallbackMetadata: { Item: [{ Name: 'Amount', Value: 100 }, { Name: 'MpesaReceiptNumber', Value: receipt }, { Name: 'PhoneNumber', Value: 254700000003 }] } } : {}),
    } },
  });
  const refusedMovesOf = (paymentId: string) => t.sql<{ from_status: string; to_status: string; trigger: string; note: string }>(
    'SELECT from_status, to_status, trigger, note FROM payment_transitions WHERE payment_id = $1 AND NOT accepted ORDER BY id', [paymentId]);

  it('a transaction a callback applied between the reconciliation\'s read and its write is reported skipped (already applied), not updated: one completion, the callback\'s', async () => {
    const { m, p, receipt } = await paidSilently('Raced by a callback', '777004');
    const report = await reconcileAsACallbackLands(m.apiKey, p, operatorCallback(p.provider_ref, receipt));
    expect(report).toMatchObject({ pulled: 1, updated: 0, skipped: 1 });
    expect(report.results).toEqual([{ receipt, outcome: 'skipped', payment_id: p.id }]);
    expect(await get(p.id, m.apiKey)).toMatchObject({ status: 'completed', provider_ref: receipt });
    expect(await t.sql(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed' AND accepted`, [p.id])).toEqual([{ trigger: 'callback:stk' }]);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.completed' }]);
  });

  it('a payment a callback failed between the reconciliation\'s read and its write is reported charged_but_failed, as the writer recorded it (not a plain skip)', async () => {
    const { m, p, receipt } = await paidSilently('Failed meanwhile', '777005');
    const report = await reconcileAsACallbackLands(m.apiKey, p, operatorCallback(p.provider_ref));
    expect(report.results).toEqual([{ receipt, outcome: 'skipped', payment_id: p.id, reason: 'charged_but_failed' }]);
    expect(await get(p.id, m.apiKey)).toMatchObject({ status: 'failed' });
    expect(await refusedMovesOf(p.id)).toEqual([
      { from_status: 'failed', to_status: 'completed', trigger: 'reconciliation', note: `a payment recorded failed was charged at the provider: ${receipt}` },
    ]);
  });

  it('a paybill charge quoting a payment a callback completed between the reconciliation\'s read and its write is reported duplicate_charge and recorded', async () => {
    const { m, p, receipt } = await paidSilently('Paid twice meanwhile', '777006');
    expect(await paidAgainByPaybill('777006', '254722000335', p.reference)).toBe(200);
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE shortcode = '777006' AND completes_at <= now()`).then((r) => r.length === 2), 10_000, 'both transactions completed');
    // The paybill charge is listed first (the pull lists by completion time), so it is the one whose read the callback outruns.
    await t.sql(`UPDATE sandbox_mobilemoney_stk_requests SET completes_at = (SELECT completes_at - interval '1 second' FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1)
      WHERE shortcode = '777006' AND checkout_request_id <> $1`, [p.provider_ref]);
    const report = await reconcileAsACallbackLands(m.apiKey, p, operatorCallback(p.provider_ref, receipt));
    const [second] = (await t.sql<{ receipt_number: string }>(`SELECT receipt_number FROM sandbox_mobilemoney_stk_requests WHERE shortcode = '777006' AND checkout_request_id <> $1`, [p.provider_ref])).map((r) => r.receipt_number);
    expect(report.results).toEqual([
      { receipt: second, outcome: 'skipped', payment_id: p.id, reason: 'duplicate_charge' },
      { receipt, outcome: 'skipped', payment_id: p.id },
    ]);
    expect(await get(p.id, m.apiKey)).toMatchObject({ status: 'completed', provider_ref: receipt });
    expect(await refusedMovesOf(p.id)).toEqual([{ from_status: 'completed', to_status: 'completed', trigger: 'reconciliation', note: expect.stringMatching(new RegExp(`^a second charge ${second} \\(100\\.00 KES\\) quotes this payment, paid with ${receipt}`)) }]);
  });

  it('a second charge quoting a completed payment (paybill with its reference) is reported as duplicate_charge, not a plain skip; counted once, nothing changes', async () => {
    const m = await t.createMerchant('Charged twice');
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', m.apiKey).send({ webhook_url: receiver.url }).expect(200);
    await storeCreds(m.apiKey, { ...SANDBOX_CREDS, consumer_key: 'charged-twice-key', shortcode: '777003' });
    const p = await settled((await pay({ phone: PHONES.success }, m.apiKey)).body.data.id, 'completed', m.apiKey);
    // The customer also pays by paybill, quoting the payment's reference as the account.
    expect(await paidAgainByPaybill('777003', '254722000333', p.reference)).toBe(200);
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE shortcode = '777003' AND completes_at <= now()`).then((r) => r.length === 2), 10_000, 'both transactions completed');
    const metric = async () => total(await scrapeMetrics(t), 'payments_integrity_mismatches_total', { provider: 'mobilemoney', source: 'reconciliation:duplicate_charge' });
    const before = await metric();

    for (const _run of [1, 2]) {
      const res = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', m.apiKey).send({});
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ pulled: 2, updated: 0, skipped: 2, not_found: 0 });
      expect(res.body.data.results).toEqual(expect.arrayContaining([
        { receipt: p.provider_ref, outcome: 'skipped', payment_id: p.id },
        { receipt: expect.not.stringMatching(p.provider_ref), outcome: 'skipped', payment_id: p.id, reason: 'duplicate_charge' },
      ]));
    }
    expect(await get(p.id, m.apiKey)).toMatchObject({ status: 'completed', provider_ref: p.provider_ref, amount_refunded: '0.00', integrity: { status: 'ok' } });
    const refused = await t.sql<{ note: string }>(`SELECT note FROM payment_transitions WHERE payment_id = $1 AND NOT accepted`, [p.id]);
    expect(refused).toEqual([{ note: expect.stringMatching(new RegExp(`^a second charge [A-Z0-9]{10} \\(100\\.00 KES\\) quotes this payment, paid with ${p.provider_ref}`)) }]);
    expect(await metric()).toBe(before + 1);
    expect(errorLogs(p.id)).toHaveLength(2);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.completed' }]);
  });

  it('refuses a window longer than 48 hours, or reversed, with 422', async () => {
    const long = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send({ since: '2026-11-01T00:00:00Z', until: '2026-11-03T00:00:01Z' });
    expect(long.status).toBe(422);
    const reversed = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send({ since: '2026-11-03T00:00:00Z', until: '2026-11-02T00:00:00Z' });
    expect(reversed.status).toBe(422);
    const bad = await t.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', key).send({ since: 'yesterday' });
    expect(bad.status).toBe(422);
  });

  it('register-pull answers 1000, then 1001 (already registered)', async () => {
    const first = await t.http.post('/v1/payments/mobilemoney/register-pull').set('X-API-Key', key).send({});
    expect(first.status).toBe(200);
    expect(first.body.data).toEqual({ registered: true, response_code: '1000', response_description: expect.any(String) });
    const second = await t.http.post('/v1/payments/mobilemoney/register-pull').set('X-API-Key', key).send({ nominated_number: '254708374149' });
    expect(second.body.data.response_code).toBe('1001');
  });
});
