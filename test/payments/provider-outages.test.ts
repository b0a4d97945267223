import { X509Certificate, constants, publicEncrypt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { newDrainRun, oneBatchRun } from '../../server/domain/payments/sync-schedule.js';
import { SYNC_PAYMENTS_JOB } from '../../server/jobs/sync-payments.job.js';
import { runCli } from '../support/processes.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { TEST_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';
import { jobRunFinished } from '../support/job-run.js';

// Outages of the wallet provider on capture and of the mobile-money operator on reversal: a clear 502,
// nothing moves, and the merchant's retry works once the provider is back (without a double effect).

let t: TestService;
let key: string;
let n = 0;
// The capture-only modes fail walletpay's capture POST alone: the read of the order before it is answered.
const outage = (provider: string, mode: 'ok' | 'error' | 'hang' | 'captures_error' | 'captures_hang') => t.http.post(`/sandbox/${provider}/_control/outage`).send({ mode }).expect(200);
const get = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;
/** A walletpay payment of `amount` USD its buyer approved (at the simulator's approval page). */
async function approvedWalletpayPayment(amount: string, keyPrefix: string): Promise<{ id: string; provider_ref: string }> {
  const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `${keyPrefix}-${++n}-${Date.now()}`)
    .send({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
  const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
  await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });
  return p;
}
/** Captures of a walletpay order at the simulator. */
const capturesOf = async (orderId: string) => (await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM sandbox_walletpay_captures WHERE order_id = $1`, [orderId]))[0]!.n;

beforeAll(async () => {
  // 3 s: a hang is cut short, but a slow answer of the in-process simulator on a loaded host is not (800 ms
  // was: CI at a4148c9 had a mobile-money reversal answered 502 'did not answer' under load).
  t = await startTestService({ PROVIDER_TIMEOUT_MS: '3000' });
  ({ apiKey: key } = await t.createMerchant('Outage Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'outage-client', client_secret: 'outage-secret' } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'outage-key', consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' } }).expect(200);
});
afterAll(async () => {
  await outage('walletpay', 'ok');
  await outage('mobilemoney', 'ok');
  await t.stop();
});

describe('walletpay outage on capture', () => {
  it.each(['captures_error', 'captures_hang'] as const)('%s: 502 PROVIDER_ERROR with Payments-Outcome: unknown, the payment stays pending, the retried capture completes it once', async (mode) => {
    const p = await approvedWalletpayPayment('30.00', 'out');
    await outage('walletpay', mode);
    const failed = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    await outage('walletpay', 'ok');
    expect(failed.status).toBe(502);
    expect(failed.body.error.code).toBe('PROVIDER_ERROR');
    expect(failed.body.error.message).toContain('walletpay');
    expect(failed.headers['payments-outcome']).toBe('unknown'); // the capture was sent: it may have happened
    expect((await get(p.id)).status).toBe('pending');
    const retried = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(retried.status).toBe(200);
    expect(retried.body.data.status).toBe('completed');
    expect(await capturesOf(p.provider_ref)).toBe(1);
  });
});

describe('walletpay outage on a capture sent with an Idempotency-Key', () => {
  it('502, then the retry with the same key captures once the provider is back (not the stored 502 replayed)', async () => {
    const p = await approvedWalletpayPayment('31.00', 'out-key');
    const captureKey = `cap-1-${p.id}`;
    const capture = () => t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).set('Idempotency-Key', captureKey).send({});
    await outage('walletpay', 'captures_error');
    const failed = await capture();
    await outage('walletpay', 'ok');
    expect(failed.status).toBe(502);
    expect(failed.body.error.code).toBe('PROVIDER_ERROR');
    expect(failed.headers['payments-outcome']).toBe('unknown');
    expect((await get(p.id)).status).toBe('pending');

    const retried = await capture();
    expect(retried.status).toBe(200);
    expect(retried.body.data).toMatchObject({ id: p.id, status: 'completed' });
    const again = await capture();
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(await capturesOf(p.provider_ref)).toBe(1);
  });
});

describe('walletpay outage before a capture is sent (the order read before it fails)', () => {
  it.each(['error', 'hang'] as const)('%s: 502 PROVIDER_ERROR without Payments-Outcome (nothing sent), nothing captured, the payment unchanged; the retry with the same key after recovery captures once', async (mode) => {
    const p = await approvedWalletpayPayment('33.00', 'out-read');
    const before = await get(p.id);
    const captureKey = `cap-read-${mode}-${p.id}`;
    const capture = () => t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).set('Idempotency-Key', captureKey).send({});
    const captures = () => capturesOf(p.provider_ref);
    await outage('walletpay', mode);
    const refused = await capture();
    await outage('walletpay', 'ok');
    expect(refused.status).toBe(502);
    expect(refused.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringMatching(/^walletpay capture not sent: .*no capture sent$/) });
    // Nothing was sent, so nothing moved: not the "may have been captured" answer.
    expect(refused.headers['payments-outcome']).toBeUndefined();
    expect(await get(p.id)).toEqual(before);
    expect(await captures()).toBe(0);
    const [order] = await t.sql<{ status: string }>('SELECT status FROM sandbox_walletpay_orders WHERE id = $1', [p.provider_ref]);
    expect(order!.status).toBe('APPROVED');

    // The key resumes the capture (not the 502 replayed), and it captures once.
    const retried = await capture();
    expect(retried.status).toBe(200);
    expect(retried.body.data).toMatchObject({ id: p.id, status: 'completed' });
    const again = await capture();
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(await captures()).toBe(1);
  });
});

describe('walletpay captures without an Idempotency-Key while the order cannot be read', () => {
  const capture = (id: string) => t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', key).send({});

  it('the first capture: "not sent", no Payments-Outcome; a second one that also sends nothing says the same (the first took its mark back); once walletpay answers, it captures once', async () => {
    const p = await approvedWalletpayPayment('34.00', 'out-keyless');
    await outage('walletpay', 'error');
    const first = await capture(p.id);
    const second = await capture(p.id);
    await outage('walletpay', 'ok');
    for (const refused of [first, second]) {
      expect(refused.status).toBe(502);
      expect(refused.headers['payments-outcome']).toBeUndefined();
      expect(refused.body.error.message).toMatch(/^walletpay capture not sent: /);
    }
    expect((await capture(p.id)).body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(await capturesOf(p.provider_ref)).toBe(1);
  });

  it('after a capture whose outcome is unknown, one that sends nothing answers Payments-Outcome: unknown, not "not sent"', async () => {
    const p = await approvedWalletpayPayment('35.00', 'out-keyless');
    await outage('walletpay', 'captures_error');
    const unknown = await capture(p.id);
    expect(unknown.headers['payments-outcome']).toBe('unknown');
    await outage('walletpay', 'error');
    const unread = await capture(p.id);
    await outage('walletpay', 'ok');
    expect(unread.status).toBe(502);
    expect(unread.headers['payments-outcome']).toBe('unknown');
    expect(unread.body.error.message).toContain('an earlier capture request of this payment may have captured it');
    expect((await capture(p.id)).body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(await capturesOf(p.provider_ref)).toBe(1);
  });
});

describe('a capture key an earlier version bound to its 502 (answer `undecided`)', () => {
  it('the retry with the key resumes the capture once the provider is back', async () => {
    const p = await approvedWalletpayPayment('32.00', 'out-old');
    const captureKey = `cap-old-${p.id}`;
    const capture = () => t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).set('Idempotency-Key', captureKey).send({});
    await outage('walletpay', 'captures_error');
    expect((await capture()).status).toBe(502);
    await outage('walletpay', 'ok');
    // As the earlier version stored it: finished, its answer the 502 kept until the payment settles.
    const undecided = { status: 200, undecided: { code: 'PROVIDER_ERROR', message: 'walletpay capture failed: walletpay answered 500 INTERNAL_SERVER_ERROR' } };
    await t.sql(`UPDATE idempotency_keys SET recovery_point = 'finished', answer = $1::jsonb, lease_token = NULL, locked_until = NULL WHERE scope = 'payment.capture' AND key = $2`,
      [JSON.stringify(undecided), captureKey]);

    const [first, second] = await Promise.all([capture(), capture()]);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(first.body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(second.body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(await capturesOf(p.provider_ref)).toBe(1);
  });
});

describe('mobilemoney outage on reversal', () => {
  it('502 and a reversal that was never sent is failed at once, so it does not block the retry; the retry reverses the payment', async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `out-mm-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
    const id = created.body.data.id;
    await eventually(async () => (await get(id)).status === 'completed', 10_000, 'the push callback');
    await outage('mobilemoney', 'error');
    const failed = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id });
    await outage('mobilemoney', 'ok');
    expect(failed.status).toBe(502);
    expect((await get(id)).status).toBe('completed');
    const retry = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id });
    expect(retry.status).toBe(201);
    expect(retry.body.data.status).toBe('pending');
    await eventually(async () => (await get(id)).status === 'reversed', 10_000, 'the reversal result');
    const refunds = await t.sql('SELECT status, failure_reason FROM refunds WHERE payment_id = $1 ORDER BY created_at', [id]);
    expect(refunds).toEqual([
      // Never sent (the operator's certificate could not be had): failed at once, so it blocks nothing.
      { status: 'failed', failure_reason: expect.stringMatching(/^not sent: /) },
      { status: 'completed', failure_reason: null },
    ]);
  });
});

describe('mobilemoney outage before a push is sent', () => {
  it('the token endpoint down: 502, the payment failed (nothing was sent), and a new request with a new key pushes once it is back', async () => {
    // A merchant whose token is not cached yet: the push cannot even be attempted.
    const m = await t.createMerchant('Token Outage Shop');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: `fresh-key-${Date.now()}`, consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' } }).expect(200);
    const pay = (idem: string) => t.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', idem)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
    await outage('mobilemoney', 'error');
    const refused = await pay(`token-out-${Date.now()}`);
    await outage('mobilemoney', 'ok');
    expect(refused.status).toBe(502);
    expect(refused.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringContaining('token request') });
    const [row] = await t.sql<{ status: string; provider_ref: string | null }>('SELECT status, provider_ref FROM payments WHERE merchant_id = $1', [m.merchantId]);
    expect(row).toEqual({ status: 'failed', provider_ref: null }); // not pending for ever with nothing to settle it
    const retried = await pay(`token-back-${Date.now()}`);
    expect(retried.status).toBe(201);
    await eventually(async () => (await t.http.get(`/v1/payments/${retried.body.data.id}`).set('X-API-Key', m.apiKey)).body.data.status === 'completed', 10_000, 'the push callback');
  });
});

describe('mobilemoney push answered with a server error (outcome unknown, nothing charged)', () => {
  it('201 pending with no provider_ref; 2 h after creation the status sync pulls the settled transactions: a failed pull leaves it pending (then for the operator), a pull listing no charge fails it with payment.failed', async () => {
    const m = await t.createMerchant('Unanswered Push Shop');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: `unanswered-${Date.now()}`, consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' } }).expect(200);
    const pay = (phone: string) => t.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `unanswered-${++n}-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone });
    // A first push caches the operator token; the next one reaches the operator, which answers 500 (500.003.1001).
    expect((await pay('254708374149')).status).toBe(201);
    await outage('mobilemoney', 'error');
    const res = await pay('254722000901');
    await outage('mobilemoney', 'ok');
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = res.body.data.id as string;
    const state = async () => (await t.sql<{ status: string; failure_reason: string | null; due_by: boolean | null }>(
      `SELECT status, failure_reason, next_sync_at <= created_at + interval '2 hours 1 minute' AS due_by FROM payments WHERE id = $1`, [id]))[0]!;
    const events = async () => (await t.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1', [id])).map((e) => e.type);
    const unresolved = async () => (await t.sql(`SELECT 1 FROM payments WHERE id = $1 AND status = 'pending' AND next_sync_at IS NULL AND next_action IS NULL`, [id])).length === 1;
    const HOUR = 3_600_000;
    const sync = (laterMs: number) => t.inContext(() => t.service.container.services.statusSync.syncOne(id, Date.now() + laterMs));
    // Scheduled for the status sync from the start.
    expect(await state()).toEqual({ status: 'pending', failure_reason: null, due_by: true });

    // Before its check the customer's prompt may still be answered: it stays pending, due again by the check
    // — even once STATUS_SYNC_SCHEDULE (7 intervals) has run out.
    for (let check = 0; check < 8; check++) await sync(HOUR);
    expect(await t.sql('SELECT sync_attempts FROM payments WHERE id = $1', [id])).toEqual([{ sync_attempts: 8 }]);
    expect(await state()).toEqual({ status: 'pending', failure_reason: null, due_by: true });
    expect(await events()).toEqual([]);

    // At its check the operator cannot be pulled: nothing is known, it stays pending; its schedule has run out,
    // so it is the operator's now (counted by payments_unresolved).
    await outage('mobilemoney', 'error');
    try {
      await sync(2 * HOUR + 2 * 60_000);
    } finally {
      await outage('mobilemoney', 'ok');
    }
    expect(await state()).toMatchObject({ status: 'pending', failure_reason: null });
    expect(await unresolved()).toBe(true);
    expect(await events()).toEqual([]);

    // The next check (the operator's recheck) pulls successfully: no charge listed, so it fails.
    await sync(2 * HOUR + 5 * 60_000);
    const failed = await state();
    expect(failed).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('Nothing was charged') });
    expect(failed.failure_reason).toContain('never answered the request creating this payment');
    expect(failed.failure_reason).toContain('list no charge for it');
    await eventually(async () => ((await events()).includes('payment.failed') ? true : null), 5_000, 'payment.failed');
    const [transition] = await t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'failed' AND accepted`, [id]);
    expect(transition!.trigger).toBe('status-sync');
  });
});

/** In front of the mobile-money simulator; answers the token request itself with an empty token when told to. */
class OperatorStub extends ForwardingStub {
  emptyToken = false;
  protected override intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (this.emptyToken && req.url.includes('/oauth/v1/generate')) return Promise.resolve(jsonAnswer(200, { access_token: '' }));
    return forward();
  }
}

describe('mobilemoney push that never reached the operator', () => {
  let s: TestService;
  let stub: OperatorStub;
  let stubUp = false;
  let merchant: { apiKey: string; merchantId: string };
  const pay = () => s.http.post('/v1/payments').set('X-API-Key', merchant.apiKey).set('Idempotency-Key', `unsent-${++n}-${Date.now()}`)
    .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
  const rowOf = async (id: string) => (await s.sql<{ status: string; provider_ref: string | null }>('SELECT status, provider_ref FROM payments WHERE id = $1', [id]))[0];
  const pushesSent = async () => (await s.sql<{ n: number }>('SELECT count(*)::int AS n FROM sandbox_mobilemoney_stk_requests'))[0]!.n;
  /** The refused request's payment: its id is not in the error, so the merchant's newest payment. */
  const newestPayment = async () => (await s.sql<{ id: string }>('SELECT id FROM payments WHERE merchant_id = $1 ORDER BY created_at DESC LIMIT 1', [merchant.merchantId]))[0]!.id;

  beforeAll(async () => {
    stub = new OperatorStub();
    const stubUrl = await stub.start();
    stubUp = true;
    s = await startTestService({ MOBILEMONEY_BASE_URL: `${stubUrl}/sandbox/mobilemoney`, PROVIDER_TIMEOUT_MS: '3000' });
    stub.target = s.baseUrl;
    merchant = await s.createMerchant('Unreached Operator Shop');
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', merchant.apiKey)
      .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'unreached-key', consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' } }).expect(200);
  });
  afterAll(async () => {
    if (stubUp) await stub.stop();
    await s.stop();
  });

  it('a token answered 200 without a token: 502 PROVIDER_ERROR and the payment failed (no push was sent)', async () => {
    await s.sql('DELETE FROM mobilemoney_tokens');
    stub.emptyToken = true;
    const refused = await pay();
    stub.emptyToken = false;
    expect(refused.status).toBe(502);
    expect(refused.body.error.code).toBe('PROVIDER_ERROR');
    expect(await rowOf(await newestPayment())).toEqual({ status: 'failed', provider_ref: null });
    expect(await pushesSent()).toBe(0);
  });

  it('the operator refusing connections with the token cached: 502 PROVIDER_ERROR and the payment failed, not pending for days', async () => {
    const first = await pay(); // fetches and caches the token
    expect(first.status).toBe(201);
    expect(await pushesSent()).toBe(1);
    await stub.stop();
    stubUp = false;
    const refused = await pay();
    expect(refused.status).toBe(502);
    expect(refused.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringContaining('ECONNREFUSED') });
    expect(await rowOf(await newestPayment())).toEqual({ status: 'failed', provider_ref: null });
    expect(await pushesSent()).toBe(1);
  });
});

describe('mobilemoney reversal whose operator cannot be reached at all', () => {
  let s: TestService;
  const stub = new ForwardingStub();
  let stubUp = false;

  beforeAll(async () => {
    const stubUrl = await stub.start();
    stubUp = true;
    s = await startTestService({ MOBILEMONEY_BASE_URL: `${stubUrl}/sandbox/mobilemoney`, PROVIDER_TIMEOUT_MS: '3000' });
    stub.target = s.baseUrl;
  });
  afterAll(async () => {
    if (stubUp) await stub.stop();
    await s.stop();
  });
  /**
   * The initiator password encrypted with the simulator's certificate, stored as an already-made
   * SecurityCredential: with its own MOBILEMONEY_BASE_URL the service does not fetch the simulator's certificate.
   */
  const securityCredential = async () => {
    const pem = await (await fetch(`${s.baseUrl}/sandbox/mobilemoney/certificates/SandboxCertificate.cer`)).text();
    return publicEncrypt({ key: new X509Certificate(pem).publicKey, padding: constants.RSA_PKCS1_PADDING }, Buffer.from('Safaricom999!*!')).toString('base64');
  };

  it('its token endpoint refusing connections: 502 PROVIDER_ERROR saying nothing was sent, the refund failed, the payment still completed', async () => {
    const m = await s.createMerchant('Unreached Reversal Shop');
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: `unreached-reversal-${Date.now()}`, consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379', initiator: 'testapi', security_credential: await securityCredential() } }).expect(200);
    const created = await s.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `unreached-rev-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    const payment = async () => (await s.http.get(`/v1/payments/${id}`).set('X-API-Key', m.apiKey)).body.data;
    await eventually(async () => (await payment()).status === 'completed', 10_000, 'the push callback');

    // No token cached, and the operator's host refuses every connection (its token endpoint included).
    await s.sql('DELETE FROM mobilemoney_tokens');
    await stub.stop();
    stubUp = false;
    const refused = await s.http.post('/v1/refunds').set('X-API-Key', m.apiKey).set('Idempotency-Key', `unreached-refund-${Date.now()}`).send({ payment_id: id });
    expect(refused.status).toBe(502);
    expect(refused.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringMatching(/could not be reached; the reversal was not sent: mobilemoney token request: .*ECONNREFUSED/) });
    expect(await s.sql('SELECT status, failure_reason FROM refunds WHERE payment_id = $1', [id])).toEqual([
      { status: 'failed', failure_reason: expect.stringMatching(/^not sent: /) },
    ]);
    expect(await payment()).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    expect(await s.sql('SELECT 1 FROM sandbox_mobilemoney_reversals')).toEqual([]);
  });
});

/** In front of the mobile-money simulator: answers pushes 500 (their answer lost) and pulls 429 when told; records the pulls. */
class PullStub extends ForwardingStub {
  pushesLost = false;
  /** Pushes are sent on to the operator, and their answer replaced by a 500 (lost on the way back). */
  answersLost = false;
  pullsRateLimited = false;
  /** Pushes are taken (accepted, with a CheckoutRequestID) but never reach the customer: no callback, nothing charged. */
  pushesTakenSilently = false;
  /** The STK query answers "The transaction is being processed" (HTTP 500, 500.001.1001), whatever it is asked about. */
  stkQueriesProcessing = false;
  /** The STK query answers 503 "Internal Server Error" (500.003.1001: no answer, asked again), whatever it is asked about. */
  stkQueriesDown = false;
  /** When set, the pull lists these entries (Daraja's rows) instead of the operator's own. */
  listed: Record<string, unknown>[] | null = null;
  readonly pulls: { StartDate: string; EndDate: string }[] = [];
  protected override intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (this.pushesLost && req.url.includes('/stkpush/v1/processrequest')) {
      return Promise.resolve(jsonAnswer(500, { requestId: 'stub', errorCode: '500.003.1001', errorMessage: 'Internal Server Error' }));
    }
    if (this.pushesTakenSilently && req.url.includes('/stkpush/v1/processrequest')) {
      const id = `ws_CO_STUB${Date.now()}${Math.floor(Math.random() * 1e6)}`;
      return Promise.resolve(jsonAnswer(200, {
        MerchantRequestID: `stub-${id}`, CheckoutRequestID: id, ResponseCode: '0',
        ResponseDescription: 'Success. Request accepted for processing', CustomerMessage: 'Success. Request accepted for processing',
      }));
    }
    if (this.stkQueriesProcessing && req.url.includes('/stkpushquery/v1/query')) {
      return Promise.resolve(jsonAnswer(500, { requestId: 'stub', errorCode: '500.001.1001', errorMessage: 'The transaction is being processed' }));
    }
    if (this.stkQueriesDown && req.url.includes('/stkpushquery/v1/query')) {
      return Promise.resolve(jsonAnswer(503, { requestId: 'stub', errorCode: '500.003.1001', errorMessage: 'Internal Server Error' }));
    }
    if (this.answersLost && req.url.includes('/stkpush/v1/processrequest')) {
      return forward().then(() => jsonAnswer(500, { requestId: 'stub', errorCode: '500.003.1001', errorMessage: 'Internal Server Error' }));
    }
    if (req.url.includes('/pulltransactions/v1/query')) {
      this.pulls.push(JSON.parse(req.body.toString()) as { StartDate: string; EndDate: string });
      if (this.pullsRateLimited) return Promise.resolve(jsonAnswer(429, { requestId: 'stub', errorCode: '500.003.02', errorMessage: 'Spike arrest violation' }));
      if (this.listed) {
        const first = (JSON.parse(req.body.toString()) as { OffSetValue: string }).OffSetValue === '0';
        return Promise.resolve(jsonAnswer(200, first
          ? { ResponseRefID: 'stub', ResponseCode: '1000', ResponseMessage: 'Success', Response: [this.listed] }
          : { ResponseRefID: 'stub', ResponseCode: '1001', ResponseMessage: 'No transactions found', Response: [[]] }));
      }
    }
    return forward();
  }
}

describe('mobilemoney lost pushes judged by the pull', () => {
  let s: TestService;
  let stub: PullStub;
  let stubUp = false;
  const HOUR = 3_600_000;
  /** The operator's pull times are EAT (UTC+3), whole seconds. */
  const eat = (text: string) => new Date(`${text.replace(' ', 'T')}+03:00`).getTime();
  const merchant = async (name: string) => {
    const m = await s.createMerchant(name);
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: `pull-${name}-${Date.now()}`, consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' } }).expect(200);
    return m;
  };
  /** A push whose answer was lost (the operator answered 500), created `ageMs` ago. */
  const lostPush = async (apiKey: string, ageMs: number): Promise<string> => {
    stub.pushesLost = true;
    const res = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `lost-pull-${++n}-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
    stub.pushesLost = false;
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = res.body.data.id as string;
    await age(id, ageMs);
    return id;
  };
  /** As if payment `id` had been created `ageMs` earlier (the status sync and the admin CLI read the clock). */
  const age = async (id: string, ageMs: number) => {
    if (ageMs <= 0) return;
    // A payment's created_at never changes, so the guard is lifted for this one update (this service's own database).
    await s.sql(`ALTER TABLE payments DISABLE TRIGGER payments_keep_merchant_and_created_at;
      UPDATE payments SET created_at = created_at - ${Number(ageMs)} * interval '1 millisecond' WHERE id = '${id}';
      ALTER TABLE payments ENABLE TRIGGER payments_keep_merchant_and_created_at;`);
  };
  const row = async (id: string) => (await s.sql<{ status: string; failure_reason: string | null; created_at: Date; next_sync_at: Date | null }>(
    'SELECT status, failure_reason, created_at, next_sync_at FROM payments WHERE id = $1', [id]))[0]!;

  beforeAll(async () => {
    stub = new PullStub();
    const stubUrl = await stub.start();
    stubUp = true;
    // The tests run the status sync themselves: the worker's own poll (500 ms in tests) would race them for the
    // payments they make due, and a run the worker won would leave the test's run nothing to pull.
    s = await startTestService({ MOBILEMONEY_BASE_URL: `${stubUrl}/sandbox/mobilemoney`, PROVIDER_TIMEOUT_MS: '3000', STATUS_SYNC_POLL_INTERVAL: '1h' });
    stub.target = s.baseUrl;
    // Its one run (at boot) is over before a test makes anything due.
    await jobRunFinished(s, SYNC_PAYMENTS_JOB);
  });
  afterEach(async () => {
    stub.pullsRateLimited = false;
    stub.pushesTakenSilently = false;
    stub.stkQueriesProcessing = false;
    stub.stkQueriesDown = false;
    stub.listed = null;
    stub.pulls.length = 0;
    // Nothing of one test is due in the next one's status-sync run.
    await s.sql(`UPDATE payments SET next_sync_at = NULL`);
  });
  afterAll(async () => {
    if (stubUp) await stub.stop();
    await s.stop();
  });

  it('the operator answering a pull 429 (spike arrest): one status-sync run sends one pull for three lost pushes of a merchant, not three; they stay pending', async () => {
    const m = await merchant('Rate Limited Pull Shop');
    const ids = [await lostPush(m.apiKey, 3 * HOUR), await lostPush(m.apiKey, 3 * HOUR), await lostPush(m.apiKey, 3 * HOUR)];
    await s.sql(`UPDATE payments SET next_sync_at = now() WHERE id = ANY($1)`, [ids]);
    stub.pullsRateLimited = true;
    await s.inContext(() => s.service.container.services.statusSync.syncDue(oneBatchRun()));
    expect(stub.pulls).toHaveLength(1);
    for (const id of ids) expect(await row(id)).toMatchObject({ status: 'pending', failure_reason: null });
  });

  it('three lost pushes of a merchant due in one status-sync run share one pull, which lists none of them: all three fail', async () => {
    const m = await merchant('Shared Pull Shop');
    const ids = [await lostPush(m.apiKey, 3 * HOUR), await lostPush(m.apiKey, 3 * HOUR), await lostPush(m.apiKey, 3 * HOUR)];
    await s.sql(`UPDATE payments SET next_sync_at = now() WHERE id = ANY($1)`, [ids]);
    await s.inContext(() => s.service.container.services.statusSync.syncDue(oneBatchRun()));
    expect(stub.pulls).toHaveLength(1);
    for (const id of ids) expect(await row(id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('list no charge for it') });
  });

  it('a pull listing an entry it cannot read (an amount written "1,000.00") proves nothing: the lost push stays pending, not failed, and the reconcile report shows the entry set aside', async () => {
    const m = await merchant('Unreadable Entry Shop');
    const id = await lostPush(m.apiKey, 3 * HOUR);
    const { reference } = (await s.sql<{ reference: string }>('SELECT reference FROM payments WHERE id = $1', [id]))[0]!;
    // The customer paid (its amount as the operator might write it): the entry names the payment's reference.
    stub.listed = [{ transactionId: 'THOUSANDS1', trxDate: new Date().toISOString(), msisdn: 254708374149, sender: 'JANE WANJIKU',
      transactiontype: 'c2b-pay-bill-debit', billreference: reference, amount: '1,000.00', organizationname: 'Duka' }];
    await s.inContext(() => s.service.container.services.statusSync.syncOne(id));
    // One pull: its first page, then the next one after the entry (empty).
    expect(stub.pulls.map((p) => (p as { OffSetValue?: string }).OffSetValue)).toEqual(['0', '1']);
    expect(await row(id)).toMatchObject({ status: 'pending', failure_reason: null });
    const report = await s.http.post('/v1/payments/mobilemoney/reconcile').set('X-API-Key', m.apiKey).send({}).expect(200);
    expect(report.body.data).toMatchObject({ pulled: 1, updated: 0, skipped: 1, not_found: 0, results: [{ receipt: 'THOUSANDS1', outcome: 'skipped', reason: 'unreadable' }] });
  });

  it('a re-check 26 h after the push pulls only up to 2 h 30 min after its creation, not a day of transactions, and fails it when nothing is listed', async () => {
    const m = await merchant('Bounded Pull Shop');
    const id = await lostPush(m.apiKey, 26 * HOUR);
    const created = (await row(id)).created_at.getTime();
    await s.inContext(() => s.service.container.services.statusSync.syncOne(id));
    expect(stub.pulls).toHaveLength(1);
    const [pull] = stub.pulls;
    expect(eat(pull!.StartDate)).toBe(Math.floor((created - 30 * 60_000) / 1000) * 1000);
    expect(eat(pull!.EndDate)).toBe(Math.ceil((created + 2.5 * HOUR) / 1000) * 1000);
    expect(await row(id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('list no charge for it') });
  });

  it('a lost push the customer paid: its check\'s pull completes it, with no "creation answer lost" warning', async () => {
    const m = await merchant('Paid Lost Push Shop');
    stub.answersLost = true;
    // 254700000003: paid, and the operator sends no callback (only the pull can tell).
    const res = await s.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `paid-lost-${++n}-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254700000003' });
    stub.answersLost = false;
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = res.body.data.id as string;
    await eventually(async () => ((await s.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE phone = '254700000003' AND receipt_number IS NOT NULL AND completes_at <= now()`)).length === 1 ? true : null), 20_000, 'the push paid');
    await s.inContext(() => s.service.container.services.statusSync.syncOne(id, Date.now() + 2 * HOUR + 2 * 60_000));
    expect(await row(id)).toMatchObject({ status: 'completed' });
    const warned = readFileSync(inProcessLogFile(s.databaseUrl), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.paymentId === id && /not sent again/.test(String(l.msg)));
    expect(warned).toEqual([]);
  });

  describe('a push the operator took whose STK query never gives a final answer', () => {
    const sync = (id: string, laterMs: number) => s.inContext(() => s.service.container.services.statusSync.syncOne(id, Date.now() + laterMs));
    const push = async (apiKey: string, phone: string) => {
      const res = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `unanswered-push-${++n}-${Date.now()}`)
        .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone });
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: expect.stringMatching(/^ws_CO_/) });
      return res.body.data.id as string;
    };

    it('never paid ("being processed" at every query): judged 2 h after creation by the pull, which lists no charge: failed (payment.failed), no longer pending for ever', async () => {
      const m = await merchant('Unanswered Push Shop');
      stub.pushesTakenSilently = true;
      const id = await push(m.apiKey, '254708374149');
      stub.pushesTakenSilently = false;
      stub.stkQueriesProcessing = true;
      // Before its check the prompt may still be answered: pending, and no pull.
      await sync(id, HOUR);
      expect(stub.pulls).toHaveLength(0);
      expect(await row(id)).toMatchObject({ status: 'pending', failure_reason: null });

      await sync(id, 2 * HOUR + 2 * 60_000);
      expect(stub.pulls.length).toBeGreaterThanOrEqual(1);
      const failed = await row(id);
      expect(failed).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('its status query never gave the outcome') });
      expect(failed.failure_reason).toContain('list no charge for it');
      await eventually(async () => ((await s.sql('SELECT 1 FROM events WHERE payment_id = $1 AND type = $2', [id, 'payment.failed'])).length === 1 ? true : null), 5_000, 'payment.failed');
      expect(await s.sql(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'failed' AND accepted`, [id])).toEqual([{ trigger: 'status-sync' }]);
    });

    it('paid without a callback ("being processed" at every query): the pull at its check lists the charge and completes it', async () => {
      const m = await merchant('Unanswered Paid Push Shop');
      // 254700000003: paid at the operator, and no callback is ever sent.
      const id = await push(m.apiKey, '254700000003');
      await eventually(async () => ((await s.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = (SELECT provider_ref FROM payments WHERE id = $1) AND completes_at <= now()`, [id])).length === 1 ? true : null), 20_000, 'the push paid');
      stub.stkQueriesProcessing = true;
      await sync(id, 2 * HOUR + 2 * 60_000);
      expect(stub.pulls.length).toBeGreaterThanOrEqual(1);
      expect(await row(id)).toMatchObject({ status: 'completed', failure_reason: null });
    });

    // Until 2026-11-29 a check whose STK query failed (a 5xx, a timeout, a 200 with no ResultCode) sent no pull:
    // the push stayed pending until its next check (26 h 01), then the operator's once the schedule ran out.
    it('the STK query down (503) at its check: judged by the pull all the same, which lists no charge: failed (payment.failed)', async () => {
      const m = await merchant('Unanswered Push Query Down Shop');
      stub.pushesTakenSilently = true;
      const id = await push(m.apiKey, '254708374149');
      stub.pushesTakenSilently = false;
      stub.stkQueriesDown = true;
      const outcome = await sync(id, 2 * HOUR + 2 * 60_000);
      expect(stub.pulls.length).toBeGreaterThanOrEqual(1);
      const failed = await row(id);
      expect(failed).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('its status query never gave the outcome') });
      expect(failed.failure_reason).toContain('list no charge for it');
      await eventually(async () => ((await s.sql('SELECT 1 FROM events WHERE payment_id = $1 AND type = $2', [id, 'payment.failed'])).length === 1 ? true : null), 5_000, 'payment.failed');
      // The pull answered: the operator counts as answering this check (the provider is not skipped for the run).
      expect(outcome).toBe('checked');
    });

    it('the STK query down (503) at its check, paid without a callback: the pull lists the charge and completes it', async () => {
      const m = await merchant('Unanswered Paid Push Query Down Shop');
      // 254700000003: paid at the operator, and no callback is ever sent.
      const id = await push(m.apiKey, '254700000003');
      await eventually(async () => ((await s.sql(`SELECT 1 FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = (SELECT provider_ref FROM payments WHERE id = $1) AND completes_at <= now()`, [id])).length === 1 ? true : null), 20_000, 'the push paid');
      stub.stkQueriesDown = true;
      await sync(id, 2 * HOUR + 2 * 60_000);
      expect(stub.pulls.length).toBeGreaterThanOrEqual(1);
      expect(await row(id)).toMatchObject({ status: 'completed', failure_reason: null });
    });

    it('the STK query down (503), the pull up: a run whose first batch was such a push goes on to a lost push in its next batch and fails it, the provider not counted down', async () => {
      const m = await merchant('Query Down Run Shop');
      stub.pushesTakenSilently = true;
      const taken = await push(m.apiKey, '254708374149');
      stub.pushesTakenSilently = false;
      await age(taken, 3 * HOUR);
      const lost = await lostPush(m.apiKey, 3 * HOUR);
      // The taken push is due first: the run's first batch (of one) is it alone.
      await s.sql(`UPDATE payments SET next_sync_at = now() - interval '1 minute' WHERE id = $1`, [taken]);
      await s.sql(`UPDATE payments SET next_sync_at = now() WHERE id = $1`, [lost]);
      stub.stkQueriesDown = true;
      const run = newDrainRun();
      const statusSync = s.service.container.services.statusSync;
      expect(await s.inContext(() => statusSync.syncDue(run, 1))).toMatchObject({ due: 1, started: 1 });
      expect(await s.inContext(() => statusSync.syncDue(run, 1))).toMatchObject({ due: 1, started: 1 });
      expect([...run.unavailableProviders]).toEqual([]);
      for (const id of [taken, lost]) expect(await row(id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('list no charge for it') });
    });
  });

  describe('admin payment settle', () => {
    const settle = (args: string[]) =>
      runCli('server/admin/cli.ts', ['payment', 'settle', ...args], { DATABASE_URL: s.databaseUrl, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NODE_ENV: 'test' });
    const moves = async (id: string) => s.sql<{ from_status: string; to_status: string; trigger: string }>(
      `SELECT from_status, to_status, trigger FROM payment_transitions WHERE payment_id = $1 AND accepted AND from_status IS NOT NULL ORDER BY id`, [id]);
    const events = async (id: string) => (await s.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1', [id])).map((e) => e.type);

    it('a lost push whose pulls all failed, past 47.5 h: the status sync can no longer judge it; the operator fails it (payment.failed, audited operator)', async () => {
      const m = await merchant('Operator Settled Shop');
      const id = await lostPush(m.apiKey, 48 * HOUR);
      // Its checks at 2 h, 26 h and 47 h: every pull refused (spike arrest); nothing is known, it stays pending.
      const sync = (ageMs: number) => s.inContext(() => s.service.container.services.statusSync.syncOne(id, Date.now() - 48 * HOUR + ageMs));
      stub.pullsRateLimited = true;
      for (const age of [2, 26, 47]) await sync(age * HOUR + 60_000);
      stub.pullsRateLimited = false;
      expect(stub.pulls).toHaveLength(3);
      expect(await row(id)).toMatchObject({ status: 'pending', failure_reason: null });
      // Past 47.5 h a pull can no longer reach back to it: none is sent, and it stays pending for good — the operator's.
      await sync(48 * HOUR);
      expect(stub.pulls).toHaveLength(3);
      expect(await row(id)).toMatchObject({ status: 'pending', failure_reason: null });

      const noStatus = await settle(['--id', id, '--status', 'completed', '--reason', 'paid at the portal']);
      expect(noStatus.code).toBe(64);
      expect(noStatus.stderr).toContain('--status must be failed');
      const reason = 'no transaction quoting its reference at the operator portal';
      const done = await settle(['--id', id, '--status', 'failed', '--reason', reason]);
      expect(done.code).toBe(0);
      expect(JSON.parse(done.stdout)).toEqual({ payment_id: id, status: 'failed', failure_reason: reason });
      expect(await row(id)).toMatchObject({ status: 'failed', failure_reason: reason });
      expect(await moves(id)).toEqual([{ from_status: 'pending', to_status: 'failed', trigger: 'operator' }]);
      expect(await events(id)).toEqual(['payment.failed']);

      // Settled once: a second run is refused and changes nothing.
      const again = await settle(['--id', id, '--status', 'failed', '--reason', 'again']);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('not pending');
      expect(await row(id)).toMatchObject({ failure_reason: reason });
    }, 90_000);

    it("a push the operator took whose STK query never answered: refused before its check; past the pull's reach, with no check booked, the operator fails it", async () => {
      const m = await merchant('Unanswered Settled Shop');
      const taken = async () => {
        stub.pushesTakenSilently = true;
        const res = await s.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `unanswered-settle-${++n}-${Date.now()}`)
          .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
        stub.pushesTakenSilently = false;
        expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: expect.stringMatching(/^ws_CO_STUB/) });
        return res.body.data.id as string;
      };
      const young = await taken();
      const refused = await settle(['--id', young, '--status', 'failed', '--reason', 'not seen at the portal']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("is judged by reconciliation's pull at");
      expect(await row(young)).toMatchObject({ status: 'pending' });

      // Its pulls all failed, and the operator's list no longer reaches back to it; its schedule has run out.
      const old = await taken();
      await s.sql(`ALTER TABLE payments DISABLE TRIGGER payments_keep_merchant_and_created_at;
        UPDATE payments SET created_at = created_at - interval '48 hours', next_sync_at = NULL WHERE id = '${old}';
        ALTER TABLE payments ENABLE TRIGGER payments_keep_merchant_and_created_at;`);
      const reason = 'no transaction quoting its reference at the operator portal';
      const done = await settle(['--id', old, '--status', 'failed', '--reason', reason]);
      expect(done.code).toBe(0);
      expect(await row(old)).toMatchObject({ status: 'failed', failure_reason: reason });
      expect(await moves(old)).toEqual([{ from_status: 'pending', to_status: 'failed', trigger: 'operator' }]);
    }, 90_000);

    it('a completed payment, a pending cardpay payment and a lost push before its check are refused (exit 1, unchanged)', async () => {
      const m = await merchant('Refused Settle Shop');
      await s.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_settle_refused_0001' } }).expect(200);
      const card = async (method: string) => (await s.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `settle-card-${++n}-${Date.now()}`)
        .send({ provider: 'cardpay', amount: '10.00', currency: 'USD', payment_method: method, return_url: 'https://shop.example.com/r' })).body.data as { id: string; status: string };
      const completed = await card('pm_card_visa');
      expect(completed.status).toBe('completed');
      // Pending while its customer authenticates: the provider's answer, its event or the status sync settles it.
      const pendingCard = await card('pm_card_threeDSecureRequired');
      expect(pendingCard.status).toBe('pending');
      const young = await lostPush(m.apiKey, 0);

      // Past its first check, whose pull failed, with the next check booked while a pull can still reach it.
      const rechecked = await lostPush(m.apiKey, 2 * HOUR + 5 * 60_000);
      stub.pullsRateLimited = true;
      await s.inContext(() => s.service.container.services.statusSync.syncOne(rechecked, Date.now()));
      stub.pullsRateLimited = false;
      expect((await s.sql<{ booked: boolean }>('SELECT next_sync_at IS NOT NULL AS booked FROM payments WHERE id = $1', [rechecked]))[0]).toEqual({ booked: true });

      for (const [id, words] of [[completed.id, 'not pending'], [pendingCard.id, "has cardpay's reference"], [young, 'judged by reconciliation'], [rechecked, 'check of the status sync booked']] as const) {
        const before = await row(id);
        const refused = await settle(['--id', id, '--status', 'failed', '--reason', 'nothing at the portal']);
        expect({ id, code: refused.code }).toEqual({ id, code: 1 });
        expect(refused.stderr).toContain(words);
        expect(await row(id)).toEqual(before);
      }
      expect(await events(young)).toEqual([]);
    }, 90_000); // four runs of the admin CLI, each a process of its own: a loaded CI host took more than 30 s
  });
});
