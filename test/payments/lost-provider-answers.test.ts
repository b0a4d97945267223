import { X509Certificate, constants, generateKeyPairSync, publicEncrypt, randomUUID, sign as rsaSign } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * Also: a capture and a mobile-money reversal whose answer was lost the same way. A card write whose first attempt reached the provider (it charged, or refunded) but whose answer did
 * not arrive in time must stay undecided: a repeat of the request may be answered by something that
 * says nothing about the first attempt — the provider's rate limiter answers 429 before its
 * idempotency layer replays the key — and that answer must never become the outcome. A small HTTP
 * proxy stands in front of the simulator as the cardpay address: the first POST to `trapPath` is
 * forwarded and its answer withheld past PROVIDER_TIMEOUT_MS; any repeat with its Idempotency-Key is
 * answered 429 by the proxy itself. The payment (refund) stays pending and completes later, once.
 */
const HELD_EVENTS_PATH = '/held-events';

class TrapProxy extends ForwardingStub {
  trapPath: string | null = null;
  /**
   * What a repeat of a trapped request gets: 429 from the proxy, the same treatment (forwarded, answer
   * held), or (mobile money) the operator's spike-arrest refusal, `500.003.02`, from the proxy.
   */
  repeats: '429' | 'held' | 'spike-arrest' = '429';
  /** Requests whose path starts with this are answered 500 by the proxy (a provider endpoint down). */
  downPrefix: string | null = null;
  /** Repeats answered with the spike-arrest refusal. */
  spikeArrested = 0;
  private readonly seen = new Set<string>();
  /** The next POST to exactly this path is answered 429 by the proxy (the provider's rate limiter: nothing done); then it is cleared. */
  rateLimitOnce: string | null = null;
  /**
   * GETs of exactly this walletpay order path are answered 503 by the proxy (walletpay cannot be read) once a
   * capture of it (POST <path>/capture) has passed: the read of the order before the capture is answered.
   */
  unreadable: string | null = null;
  /** How the `unreadable` order's GETs are answered: 503 (walletpay down), 429 (its rate limiter) or 403 (permission refused). */
  unreadableAs: 503 | 429 | 403 = 503;
  /** The capture of the `unreadable` order is answered without its captures (a minimal answer): the adapter reads the order to see the capture. */
  minimalCaptureAnswer = false;
  private readonly captureSent = new Set<string>();
  /** A trapped answer waits for release() instead of being withheld for good (an answer that is slow, not lost). */
  holdUntilReleased = false;
  /** Trapped requests forwarded so far (the provider acted on them). */
  trappedForwarded = 0;
  private readonly waiting: (() => void)[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer | 'hold'> {
    const key = String(req.headers['idempotency-key'] ?? '');
    if (this.downPrefix !== null && req.url.startsWith(this.downPrefix)) {
      return jsonAnswer(500, { requestId: 'proxy', errorCode: '500.003.1001', errorMessage: 'Internal Server Error' });
    }
    // A walletpay webhook subscription pointed here: its events are held back (503; the simulator retries later).
    if (req.url.startsWith(HELD_EVENTS_PATH)) return { status: 503 };
    if (req.method === 'POST' && this.unreadable !== null && req.url === `${this.unreadable}/capture`) this.captureSent.add(this.unreadable);
    if (req.method === 'GET' && this.unreadable !== null && req.url === this.unreadable && this.captureSent.has(req.url)) {
      if (this.unreadableAs === 429) return jsonAnswer(429, { name: 'RATE_LIMIT_REACHED', message: 'Too many requests. Blocked due to rate limiting.', debug_id: 'proxy429' });
      if (this.unreadableAs === 403) return jsonAnswer(403, { name: 'NOT_AUTHORIZED', message: 'Authorization failed due to insufficient permissions.', debug_id: 'proxy403' });
      return jsonAnswer(503, { name: 'SERVICE_UNAVAILABLE', message: 'Service Unavailable.', debug_id: 'proxy503' });
    }
    if (req.method === 'POST' && this.minimalCaptureAnswer && this.unreadable !== null && req.url === `${this.unreadable}/capture`) {
      const answer = await forward();
      if (answer.status < 200 || answer.status > 299) return answer;
      const order = JSON.parse(answer.body.toString('utf8')) as { purchase_units?: { payments?: { captures?: unknown } }[] };
      for (const unit of order.purchase_units ?? []) delete unit.payments;
      return { ...answer, body: JSON.stringify(order) };
    }
    if (req.method === 'POST' && this.rateLimitOnce !== null && req.url === this.rateLimitOnce) {
      this.rateLimitOnce = null;
      return jsonAnswer(429, req.url.includes('/walletpay/')
        ? { name: 'RATE_LIMIT_REACHED', message: 'Too many requests. Blocked due to rate limiting.', debug_id: 'proxy429' }
        : { error: { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests hit the API too quickly.' } });
    }
    const trapped = req.method === 'POST' && this.trapPath !== null && req.url === this.trapPath;
    if (trapped && this.seen.has(key) && this.repeats === '429') {
      return jsonAnswer(429, { error: { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests hit the API too quickly.' } });
    }
    if (trapped && this.seen.has(key) && this.repeats === 'spike-arrest') {
      this.spikeArrested += 1;
      return jsonAnswer(429, { requestId: 'proxy-spike', errorCode: '500.003.02', errorMessage: 'Error Occurred - Spike Arrest Violation' });
    }
    if (trapped) this.seen.add(key);
    const answer = await forward();
    if (!trapped) return answer;
    this.trappedForwarded += 1;
    if (this.holdUntilReleased) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
      return answer;
    }
    // The provider acted; a trapped request's answer is held until the caller has given up.
    return 'hold';
  }

  /** Passes the answers waiting for it on (holdUntilReleased). */
  release(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  /** Forgets the requests trapped so far (mobile-money requests carry no key: every one is a repeat of the first). */
  forget(): void {
    this.seen.clear();
    this.spikeArrested = 0;
    this.release();
    this.holdUntilReleased = false;
    this.trappedForwarded = 0;
  }
}

const SECRET = 'sk_test_retry_answers_0001';

/**
 * The operator's test initiator password encrypted with the simulator's certificate (stored as an
 * already-made SecurityCredential: with its own MOBILEMONEY_BASE_URL the service does not fetch the
 * built-in simulator's certificate).
 */
async function securityCredential(): Promise<string> {
  const pem = await (await fetch(`${t.baseUrl}/sandbox/mobilemoney/certificates/SandboxCertificate.cer`)).text();
  return publicEncrypt({ key: new X509Certificate(pem).publicKey, padding: constants.RSA_PKCS1_PADDING }, Buffer.from('Safaricom999!*!')).toString('base64');
}
/** The live operator's signing key: its public half is MOBILEMONEY_CERT_PATH (callbacks with an X-Mobilemoney-Signature). */
const operatorKey = generateKeyPairSync('rsa', { modulusLength: 2048, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } });
let certDir: string;
let t: TestService;
let proxy: TrapProxy;
let proxyUrl: string;
let key: string;
let n = 0;

beforeAll(async () => {
  proxy = new TrapProxy();
  proxyUrl = await proxy.start();
  certDir = mkdtempSync(path.join(os.tmpdir(), 'lost-answers-cert-'));
  writeFileSync(path.join(certDir, 'operator.pem'), operatorKey.publicKey);
  t = await startTestService({
    MOBILEMONEY_CERT_PATH: path.join(certDir, 'operator.pem'),
    CARDPAY_BASE_URL: `${proxyUrl}/sandbox/cardpay`,
    WALLETPAY_BASE_URL: `${proxyUrl}/sandbox/walletpay`,
    MOBILEMONEY_BASE_URL: `${proxyUrl}/sandbox/mobilemoney`,
    // Long enough for a loaded machine's ordinary calls; the proxy holds a trapped answer until the caller gives up anyway.
    PROVIDER_TIMEOUT_MS: '2000',
    STATUS_SYNC_SCHEDULE: '4s,300ms,500ms,1s,1s,1s,2s,2s,2s,3s',
    STATUS_SYNC_POLL_INTERVAL: '200ms',
  });
  proxy.target = t.baseUrl;
  ({ apiKey: key } = await t.createMerchant('Patient Retry Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: SECRET } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'retry-answers-client', client_secret: 'retry-answers-secret' } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'retry-answers-key', consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379', initiator: 'testapi', security_credential: await securityCredential() } }).expect(200);
});
afterAll(async () => {
  await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count: 0 });
});
beforeEach(() => {
  proxy.forget();
  proxy.downPrefix = null;
  proxy.trapPath = null;
  proxy.repeats = '429';
  proxy.rateLimitOnce = null;
  proxy.unreadable = null;
  proxy.unreadableAs = 503;
  proxy.minimalCaptureAnswer = false;
});
afterAll(async () => {
  await proxy.stop();
  await t.stop();
  rmSync(certDir, { recursive: true, force: true });
});

const payment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const intentsOf = (paymentId: string) =>
  t.sql<{ id: string; status: string }>(`SELECT id, status FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [paymentId]);
/**
 * A mobile-money refund of `paymentId` whose reversal request the proxy traps (trapPath and repeats set by the
 * caller), its re-check held off (an hour) as soon as the request has reached the operator, while the service
 * still waits for its answer: the test re-checks it itself. The first re-check is due 4 s after the refund is
 * written, only 2 s after the request gives up: held once the request had answered, a slow machine let the
 * worker's refund sync send the reversal again first.
 */
async function refundWithTrappedReversal(apiKey: string, paymentId: string) {
  const asked = t.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: paymentId }).then((r) => r);
  await eventually(() => proxy.trappedForwarded === 1, 10_000, 'the reversal request at the operator');
  await t.sql(`UPDATE refunds SET next_sync_at = now() + interval '1 hour' WHERE payment_id = $1 AND status = 'pending'`, [paymentId]);
  return asked;
}

describe('a cardpay write whose answer timed out and whose repeat is rate-limited', () => {
  it('payment: stays pending (not failed), then completes; the card was charged once', async () => {
    proxy.trapPath = '/sandbox/cardpay/v1/payment_intents';
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `retry-pay-${++n}`)
      .send({ provider: 'cardpay', amount: '42.00', currency: 'USD', payment_method: 'pm_card_visa' });
    proxy.trapPath = null;
    expect(res.status).toBe(201);
    // Pending, or already completed by the provider's event (the simulator sends it at once): never failed.
    expect(['pending', 'completed']).toContain(res.body.data.status);
    const id = res.body.data.id as string;
    // The provider did charge: the first attempt reached it.
    expect(await intentsOf(id)).toEqual([expect.objectContaining({ status: 'succeeded' })]);

    const done = await eventually(async () => {
      const p = await payment(id);
      return p.status === 'pending' ? null : p;
    }, 20_000, 'the payment settled');
    expect(await t.sql(`SELECT to_status FROM payment_transitions WHERE payment_id = $1 AND to_status = 'failed'`, [id])).toEqual([]);
    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([]);
    expect(done).toMatchObject({ status: 'completed', provider_ref: intent!.id });
  });

  it('refund: stays pending (not failed), then completes; the provider refunded once', async () => {
    const paid = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `retry-pay-${++n}`)
      .send({ provider: 'cardpay', amount: '30.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(paid.body.data).toMatchObject({ status: 'completed' });
    const p = paid.body.data as { id: string; provider_ref: string };

    proxy.trapPath = '/sandbox/cardpay/v1/refunds';
    const refundKey = `retry-refund-${++n}`;
    const ask = () => t.http.post('/v1/refunds').set('X-API-Key', key).set('Idempotency-Key', refundKey).send({ payment_id: p.id, amount: '10.00' });
    const res = await ask();
    proxy.trapPath = null;
    // Its answer lost: 201 with the refund (pending), not an error that reads as "nothing happened".
    expect(res.status).toBe(201);
    const [refund] = await t.sql<{ id: string; status: string }>('SELECT id, status FROM refunds WHERE payment_id = $1', [p.id]);
    expect(res.body.data.id).toBe(refund!.id);
    expect(['pending', 'completed']).toContain(refund!.status);
    const providerRefunds = () => t.sql<{ id: string }>('SELECT id FROM sandbox_cardpay_refunds WHERE payment_intent = $1', [p.provider_ref]);
    expect(await providerRefunds()).toHaveLength(1);

    const done = await eventually(async () => {
      const r = (await t.http.get(`/v1/refunds/${refund!.id}`).set('X-API-Key', key).expect(200)).body.data;
      return r.status === 'pending' ? null : r;
    }, 20_000, 'the refund settled');
    const made = await providerRefunds();
    expect(made).toHaveLength(1);
    expect(done).toMatchObject({ status: 'completed', amount: '10.00', provider_ref: made[0]!.id });
    expect(await payment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '10.00' });

    // The merchant's retry with the key shows the refund as it is now.
    const retried = await ask();
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.body.data).toMatchObject({ id: refund!.id, status: 'completed', amount: '10.00' });
    expect(await providerRefunds()).toHaveLength(1);
  });
});

describe('a capture whose answer timed out (the provider captured)', () => {
  it('answers 502; once the payment completed, a retry with the key answers the completed payment', async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `retry-pay-${++n}`)
      .send({ provider: 'walletpay', amount: '18.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
    const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
    await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });

    proxy.trapPath = `/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}/capture`;
    proxy.repeats = 'held';
    const captureKey = `retry-capture-${++n}`;
    const capture = () => t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).set('Idempotency-Key', captureKey).send({});
    const first = await capture();
    proxy.trapPath = null;
    expect(first.status).toBe(502);
    expect(first.body.error.code).toBe('PROVIDER_ERROR');
    const captures = () => t.sql<{ id: string }>('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref]);
    expect(await captures()).toHaveLength(1);

    await eventually(async () => (await payment(p.id)).status === 'completed', 20_000, 'the captured payment completed');
    // The key held no answer (the 502 released it): the first answer the merchant gets about the capture is
    // not marked as a replay, though this request sent nothing (the provider's event settled the payment).
    const retried = await capture();
    expect(retried.status).toBe(200);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(retried.body.data).toMatchObject({ id: p.id, status: 'completed' });
    // From then on the key holds that answer.
    const again = await capture();
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toEqual(retried.body.data);
    expect(await captures()).toHaveLength(1);
  });
});

/**
 * An approved walletpay payment of a merchant whose walletpay events are held back, so only a capture call
 * can settle it; with the merchant's key, its simulator token, and what stores its credentials (again).
 */
async function heldEventsApprovedPayment(amount: string) {
  const client = { id: `held-events-${randomUUID()}`, secret: 'held-events-secret' };
  const merchant = await t.createMerchant('Held Events Shop');
  const token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(client.id, client.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token as string;
  const webhook = await t.http.post('/sandbox/walletpay/v1/notifications/webhooks').set('Authorization', `Bearer ${token}`)
    .send({ url: `${proxyUrl}${HELD_EVENTS_PATH}`, event_types: [{ name: 'PAYMENT.CAPTURE.COMPLETED' }] }).expect(201);
  const storeCredentials = () => t.http.put('/v1/merchant/credentials').set('X-API-Key', merchant.apiKey)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: client.id, client_secret: client.secret, webhook_id: webhook.body.id } }).expect(200);
  await storeCredentials();
  const created = await t.http.post('/v1/payments').set('X-API-Key', merchant.apiKey).set('Idempotency-Key', `held-pay-${++n}`)
    .send({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
  const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
  await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });
  return { p, apiKey: merchant.apiKey, token, storeCredentials };
}

describe('a capture whose answer was lost, retried with its key while the order cannot be read', () => {
  it('answers Payments-Outcome: unknown (the first request may have captured), never "capture not sent"; the retry once walletpay answers completes it, captured once', async () => {
    const { p, apiKey } = await heldEventsApprovedPayment('18.00');
    const orderPath = `/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}`;
    const capture = () => t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', apiKey).set('Idempotency-Key', `lost-capture-${p.id}`).send({});
    // The first capture reaches walletpay, which captures; its answer never comes back. From then on the order cannot be read.
    proxy.trapPath = `${orderPath}/capture`;
    proxy.repeats = 'held';
    proxy.unreadable = orderPath;
    const lost = await capture();
    proxy.trapPath = null;
    expect(lost.status).toBe(502);
    expect(lost.headers['payments-outcome']).toBe('unknown');
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref])).toHaveLength(1);

    // The retry sends nothing (its read of the order fails) but must not say that nothing was captured.
    const unread = await capture();
    expect(unread.status).toBe(502);
    expect(unread.headers['payments-outcome']).toBe('unknown');
    expect(unread.body.error.message).toContain('an earlier capture request of this payment may have captured it');
    expect(unread.body.error.message).not.toMatch(/capture not sent/);

    proxy.unreadable = null;
    const settled = await capture();
    expect(settled.status).toBe(200);
    expect(settled.body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref])).toHaveLength(1);
  });
});

describe('a capture walletpay answered 2xx without its captures, whose follow-up read of the order is refused', () => {
  it.each([429, 403] as const)('read answered %i: 502 with Payments-Outcome: unknown (not "capture not sent"), the capture mark kept; the status sync completes it, captured once', async (status) => {
    const { p, apiKey } = await heldEventsApprovedPayment('26.00');
    const orderPath = `/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}`;
    const captures = () => t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref]);
    proxy.unreadable = orderPath;
    proxy.unreadableAs = status;
    proxy.minimalCaptureAnswer = true;
    const res = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', apiKey).set('Idempotency-Key', `minimal-capture-${p.id}`).send({});
    proxy.unreadable = null;
    // PayPal answered the capture 2xx: it captured. Only its result could not be read, so the outcome is unknown.
    expect(await captures()).toHaveLength(1);
    expect(res.status).toBe(502);
    expect(res.headers['payments-outcome']).toBe('unknown');
    expect(res.body.error.code).toBe('PROVIDER_ERROR');
    expect(res.body.error.message).not.toMatch(/capture not sent/);
    expect(await t.sql('SELECT status, capture_sent_at IS NOT NULL AS marked FROM payments WHERE id = $1', [p.id])).toEqual([{ status: 'pending', marked: true }]);

    // Its events held back, nothing but the status sync's read of the order settles it.
    await eventually(async () => (await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [p.id]))[0]!.status === 'completed', 20_000, 'the status sync completing the payment');
    expect(await captures()).toHaveLength(1);
  });
});

describe('a capture walletpay answers ORDER_ALREADY_CAPTURED while the order cannot be read', () => {
  it('answers 502 with Payments-Outcome: unknown and keeps the payment pending; the retry once walletpay answers completes it', async () => {
    const { p, apiKey, token } = await heldEventsApprovedPayment('17.00');
    const merchant = { apiKey };
    // Captured at PayPal by another request (another PayPal-Request-Id), e.g. one whose answer was lost.
    await t.http.post(`/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}/capture`).set('Authorization', `Bearer ${token}`)
      .set('PayPal-Request-Id', randomUUID()).send({}).expect(201);

    proxy.unreadable = `/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}`;
    const capture = () => t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', merchant.apiKey).send({});
    const unknown = await capture();
    proxy.unreadable = null;
    expect(unknown.status).toBe(502);
    expect(unknown.headers['payments-outcome']).toBe('unknown');
    expect(unknown.body).toMatchObject({ success: false, error: { code: 'PROVIDER_ERROR' } });
    const get = async () => (await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', merchant.apiKey).expect(200)).body.data;
    expect((await get()).status).toBe('pending');

    const retried = await capture();
    expect(retried.status).toBe(200);
    expect(retried.body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref])).toHaveLength(1);
  });
});

describe('a capture the provider rate-limited (nothing was captured)', () => {
  it('answers 502 and binds the key to no final error: the retry with the key captures, once', async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `retry-pay-${++n}`)
      .send({ provider: 'walletpay', amount: '19.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' });
    const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
    await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });

    proxy.rateLimitOnce = `/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}/capture`;
    const captureKey = `limited-capture-${++n}`;
    const capture = () => t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).set('Idempotency-Key', captureKey).send({});
    const first = await capture();
    expect(first.status).toBe(502);
    expect(first.body.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringContaining('429') });
    expect(first.headers['payments-outcome']).toBeUndefined();
    expect((await payment(p.id)).status).toBe('pending');

    // The retry captures: a first answer (it acted), not "the first answer replayed, nothing new happened".
    const retried = await capture();
    expect(retried.status).toBe(200);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(retried.body.data).toMatchObject({ id: p.id, status: 'completed' });
    // Its answer is the key's from now on: replayed, and nothing is sent again.
    const again = await capture();
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toEqual(retried.body.data);
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref])).toHaveLength(1);
  });
});

describe('a capture resumed after the merchant deleted its walletpay credentials', () => {
  it('is 422 and keeps no answer for the key: the retry with it once the credentials are back captures, once', async () => {
    const { p, apiKey, storeCredentials } = await heldEventsApprovedPayment('24.00');
    const captureKey = `refused-capture-${p.id}`;
    const capture = () => t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', apiKey).set('Idempotency-Key', captureKey).send({});
    const captures = () => t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [p.provider_ref]);
    const keyRow = () => t.sql('SELECT recovery_point, answer FROM idempotency_keys WHERE scope = $1 AND key = $2', ['payment.capture', captureKey]);
    // Not sent (PayPal's rate limiter): the key keeps no answer, a retry with it resumes the capture.
    proxy.rateLimitOnce = `/sandbox/walletpay/v2/checkout/orders/${p.provider_ref}/capture`;
    const notSent = await capture();
    expect(notSent.status).toBe(502);
    expect(notSent.body.error.message).toMatch(/^walletpay capture not sent: /);

    // The resumed capture finds no credentials: refused before anything is sent, and that refusal is not the key's answer.
    await t.http.delete('/v1/merchant/credentials/walletpay').set('X-API-Key', apiKey).expect(200);
    const refused = await capture();
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatchObject({ code: 'VALIDATION_ERROR', message: 'walletpay credentials are not configured for this merchant' });
    expect(await keyRow()).toEqual([{ recovery_point: 'provider_call', answer: null }]);
    expect(await captures()).toHaveLength(0);

    await storeCredentials();
    const captured = await capture();
    expect(captured.status).toBe(200);
    expect(captured.body.data).toMatchObject({ id: p.id, status: 'completed' });
    expect(await captures()).toHaveLength(1);
    expect(await keyRow()).toEqual([{ recovery_point: 'finished', answer: { status: 200 } }]);
  });
});

describe('a payment creation resumed after its key was released (its first request left it unanswered)', () => {
  it('the retry that sends the creation answers 201 without Idempotent-Replayed; only a later retry replays it (200)', async () => {
    const body = { provider: 'walletpay', amount: '23.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' };
    const idem = `released-pay-${++n}`;
    const create = () => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem).send(body);
    // A first request the provider's rate limiter refused: the payment is reserved, nothing made at walletpay.
    proxy.rateLimitOnce = '/sandbox/walletpay/v2/checkout/orders';
    const first = await create();
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = first.body.data.id as string;
    // Its key as a request that died before answering leaves it (not finished, its lease over), the status
    // sync held off: only the merchant's retry sends the creation.
    await t.sql(`UPDATE payments SET next_sync_at = now() + interval '1 hour' WHERE id = $1 AND provider_ref IS NULL`, [id]);
    await t.sql(`UPDATE idempotency_keys SET recovery_point = 'provider_call', answer = NULL, lease_token = NULL, locked_until = NULL WHERE resource_id = $1`, [id]);
    expect((await payment(id)).provider_ref).toBeNull();

    const resumed = await create();
    expect(resumed.status).toBe(201);
    expect(resumed.headers['idempotent-replayed']).toBeUndefined();
    expect(resumed.body.data).toMatchObject({ id, status: 'pending', provider_ref: expect.any(String), next_action: { type: 'redirect' } });

    const again = await create();
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toMatchObject({ id, provider_ref: resumed.body.data.provider_ref });
  });
});

describe('a payment creation the provider rate-limited (429: nothing was created)', () => {
  it.each([
    ['cardpay', '/sandbox/cardpay/v1/payment_intents', { provider: 'cardpay', amount: '21.00', currency: 'USD', payment_method: 'pm_card_visa' }, 'completed'],
    ['walletpay', '/sandbox/walletpay/v2/checkout/orders', { provider: 'walletpay', amount: '21.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c' }, 'pending'],
  ] as const)('%s: 201 pending (not 502 failed); the status sync sends it again with the same idempotency key', async (provider, path, body, settled) => {
    proxy.rateLimitOnce = path;
    const idem = `limited-pay-${++n}`;
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem).send(body);
    expect(proxy.rateLimitOnce).toBeNull();
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = res.body.data.id as string;
    // Made by the status sync's repeat of the creation: the card charged once, the order made (the buyer approves it next).
    const done = await eventually(async () => {
      const p = await payment(id);
      return p.provider_ref && p.status === settled ? p : null;
    }, 20_000, `the ${provider} creation sent again`);
    if (provider === 'cardpay') expect(await intentsOf(id)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
    else expect(done.next_action).toMatchObject({ type: 'redirect', url: expect.any(String) });
    expect(await t.sql(`SELECT to_status FROM payment_transitions WHERE payment_id = $1 AND to_status = 'failed'`, [id])).toEqual([]);
    // The key answers the payment as it is now.
    const replay = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem).send(body);
    expect(replay.status).toBe(200);
    expect(replay.body.data).toMatchObject({ id, status: settled });
  });
});

describe('a mobile-money reversal the operator accepted but whose acknowledgement was lost', () => {
  it('blocks a second reversal (409) instead of failing the first; the refund sync completes it; no refund.failed', async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `retry-pay-${++n}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
    const id = created.body.data.id as string;
    await eventually(async () => (await payment(id)).status === 'completed', 10_000, 'the push callback');

    // The operator reverses the payment; its acknowledgement is held past the timeout, and its result is lost.
    await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count: 1 }).expect(200);
    proxy.trapPath = '/sandbox/mobilemoney/mpesa/reversal/v1/request';
    proxy.repeats = 'held';
    const first = await refundWithTrappedReversal(key, id);
    proxy.trapPath = null;
    expect(first.status).toBe(201);
    const [pending] = await t.sql<{ id: string; status: string; provider_ref: string | null }>('SELECT id, status, provider_ref FROM refunds WHERE payment_id = $1', [id]);
    expect(pending).toMatchObject({ id: first.body.data.id, status: 'pending', provider_ref: null });
    expect(first.body.data).toMatchObject({ status: 'pending', provider_ref: null });

    // The merchant asks again: one reversal at a time, and the first may well have happened.
    const second = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: id });
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('CONFLICT');

    // A re-send that cannot reach the operator (its token endpoint down) proves nothing about the first
    // request: the refund stays pending.
    await t.sql('DELETE FROM mobilemoney_tokens');
    proxy.downPrefix = '/sandbox/mobilemoney/oauth/';
    await t.inContext(() => t.service.container.services.refundSync.syncOne(pending!.id));
    proxy.downPrefix = null;
    expect(await t.sql('SELECT status FROM refunds WHERE id = $1', [pending!.id])).toEqual([{ status: 'pending' }]);
    await t.sql('UPDATE refunds SET next_sync_at = now() WHERE id = $1', [pending!.id]);

    // The refund sync sends the unacknowledged request again; the operator answers "already reversed".
    await eventually(async () => (await payment(id)).status === 'reversed', 20_000, 'the reversal recorded');
    expect(await t.sql('SELECT id, status FROM refunds WHERE payment_id = $1', [id])).toEqual([{ id: pending!.id, status: 'completed' }]);
    const events = ((await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as { type: string }[]).map((e) => e.type);
    expect(events).not.toContain('refund.failed');
    expect(events).toContain('payment.reversed');
  });

  it('a re-sent reversal the operator refuses (spike arrest) leaves the refund pending; the first request\'s result completes it; no refund.failed', async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `retry-pay-${++n}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
    const id = created.body.data.id as string;
    await eventually(async () => (await payment(id)).status === 'completed', 10_000, 'the push callback');

    // The operator accepts the reversal; its acknowledgement is held past the timeout, its result comes 8 s later.
    const config = t.service.container.config;
    const saved = config.sandboxCallbackDelayMs;
    config.sandboxCallbackDelayMs = 8000;
    proxy.trapPath = '/sandbox/mobilemoney/mpesa/reversal/v1/request';
    proxy.repeats = 'spike-arrest';
    let first;
    try {
      first = await refundWithTrappedReversal(key, id);
    } finally {
      config.sandboxCallbackDelayMs = saved;
    }
    expect(first.status).toBe(201);
    const [pending] = await t.sql<{ id: string; status: string; provider_ref: string | null }>('SELECT id, status, provider_ref FROM refunds WHERE payment_id = $1', [id]);
    expect(pending).toMatchObject({ id: first.body.data.id, status: 'pending', provider_ref: null });

    // The refund sync sends the unacknowledged request again: refused at once (500.003.02, spike arrest).
    await t.inContext(() => t.service.container.services.refundSync.syncOne(pending!.id));
    expect(proxy.spikeArrested).toBe(1);
    expect(await t.sql('SELECT status, failure_reason FROM refunds WHERE id = $1', [pending!.id])).toEqual([{ status: 'pending', failure_reason: null }]);
    await t.sql(`UPDATE refunds SET next_sync_at = now() + interval '1 hour' WHERE id = $1`, [pending!.id]);

    // The first request's result arrives: the refund completes and the payment is reversed.
    await eventually(async () => (await payment(id)).status === 'reversed', 20_000, 'the first reversal\'s result');
    expect(await t.sql('SELECT id, status FROM refunds WHERE payment_id = $1', [id])).toEqual([{ id: pending!.id, status: 'completed' }]);
    expect(await payment(id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    const events = ((await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as { type: string }[]).map((e) => e.type);
    expect(events).not.toContain('refund.failed');
    expect(events).toContain('payment.reversed');
  });
});

/**
 * A live push's callback is unsigned, and the STK query names no amount (it reports the push's, which is
 * ours only for a push we recorded). So an unsigned callback naming a CheckoutRequestID the payment has not
 * recorded — its create answer lost — is never confirmed by querying it: any paid push on the shortcode could
 * be named. The payment is left to reconciliation's pull, which lists a charge with its amount under the
 * payment's reference.
 */
describe('a live mobile-money push whose create answer was lost', () => {
  const SILENT = '254700000003';
  const answerPrompt = (phone: string) => t.sql('UPDATE sandbox_mobilemoney_stk_requests SET completes_at = now() WHERE phone = $1 AND completes_at > now()', [phone]);
  const liveMerchant = async (name: string) => {
    const m = await t.createMerchant(name);
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'mobilemoney', mobilemoney: {
      env: 'live', consumer_key: `lost-push-${randomUUID()}`, consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919',
      shortcode: '174379', initiator: 'testapi', security_credential: await securityCredential(),
    } }).expect(200);
    return m;
  };
  /** A 100 KES push to `phone` whose create answer is lost: pending, no provider_ref. */
  const lostPush = async (apiKey: string, phone: string) => {
    proxy.trapPath = '/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest';
    let created;
    try {
      created = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `lost-push-${++n}`)
        .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone });
    } finally {
      proxy.trapPath = null;
    }
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    return created.body.data as { id: string; reference: string };
  };
  const stkSuccess = (checkoutRequestId: string, items: { Name: string; Value: unknown }[]) => ({ Body: { stkCallback: {
    MerchantRequestID: 'm-unsigned', CheckoutRequestID: checkoutRequestId, ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
    CallbackMetadata: { Item: items },
  } } });
  const stkOf = async (checkoutRequestId: string) =>
    (await t.sql<{ receipt_number: string; query_count: number }>('SELECT receipt_number, query_count FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1', [checkoutRequestId]))[0]!;
  const completedTransitions = (paymentId: string) => t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed' AND accepted`, [paymentId]);
  /** The status sync's check of the lost push, 2 h after its creation: it is judged by reconciliation's pull. */
  const judgedByPull = (paymentId: string) => t.inContext(() => t.service.container.services.statusSync.syncOne(paymentId, Date.now() + 2 * 3_600_000 + 2 * 60_000));

  it("the operator's unsigned callback naming our push is not confirmed by querying it (the query names no amount); the pull at 2 h lists the charge under the payment's reference and completes it with its receipt", async () => {
    const { apiKey } = await liveMerchant('Lost Push Live Duka');
    await answerPrompt(SILENT);
    const p = await lostPush(apiKey, SILENT);
    // The customer pays; the operator's callback (unsigned, as the live operator sends it) names the push.
    await answerPrompt(SILENT);
    const [stk] = await t.sql<{ checkout_request_id: string; receipt_number: string }>(
      'SELECT checkout_request_id, receipt_number FROM sandbox_mobilemoney_stk_requests WHERE account_reference = $1', [p.reference.slice(0, 12)]);
    const res = await t.http.post(`/v1/webhooks/mobilemoney?ref=${p.id}`).send(stkSuccess(stk!.checkout_request_id, [
      { Name: 'Amount', Value: 100 }, { Name: 'MpesaReceiptNumber', Value: stk!.receipt_number }, { Name: 'PhoneNumber', Value: 254700000003 },
    ]));
    expect(res.status).toBe(200);
    expect(await t.sql('SELECT status, provider_ref FROM payments WHERE id = $1', [p.id])).toEqual([{ status: 'pending', provider_ref: null }]);
    expect((await stkOf(stk!.checkout_request_id)).query_count).toBe(0);

    await judgedByPull(p.id);
    expect(await t.sql('SELECT status, receipt_number FROM payments WHERE id = $1', [p.id])).toEqual([{ status: 'completed', receipt_number: stk!.receipt_number }]);
    expect(await completedTransitions(p.id)).toEqual([{ trigger: 'reconciliation' }]);
  });

  it("an unsigned success naming a paid push on the shortcode that no payment recorded (1 KES, no Amount stated) does not complete a 100 KES payment whose create answer was lost; nor does the pull listing that 1 KES charge under the payment's reference", async () => {
    const { apiKey } = await liveMerchant('Lost Push Outside Duka');
    // P's customer has not answered its prompt yet (its callback a minute away).
    const config = t.service.container.config;
    const saved = config.sandboxCallbackDelayMs;
    config.sandboxCallbackDelayMs = 60_000;
    let p;
    try {
      p = await lostPush(apiKey, '254700000001');
    } finally {
      config.sandboxCallbackDelayMs = saved;
    }
    // A 1 KES push on the same shortcode made outside the service (quoting P's reference), paid; recorded on no payment.
    const token = (await t.http.get('/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials').auth(`outside-${randomUUID()}`, 's').expect(200)).body.access_token as string;
    const timestamp = new Intl.DateTimeFormat('sv-SE', { timeZone: 'Africa/Nairobi', dateStyle: 'short', timeStyle: 'medium' }).format(new Date()).replace(/\D/g, '');
    const outside = (await t.http.post('/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest').set('Authorization', `Bearer ${token}`).send({
      BusinessShortCode: '174379', Password: Buffer.from(`174379bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919${timestamp}`).toString('base64'),
      Timestamp: timestamp, TransactionType: 'CustomerPayBillOnline', Amount: 1, PartyA: '254711000042', PartyB: '174379', PhoneNumber: '254711000042',
      CallBackURL: `${t.baseUrl}/v1/webhooks/mobilemoney`, AccountReference: p.reference.slice(0, 12), TransactionDesc: 'outside',
    }).expect(200)).body.CheckoutRequestID as string;
    await answerPrompt('254711000042');
    expect((await stkOf(outside)).receipt_number).toBeTruthy();

    // An unsigned success at P's address naming that push, stating no amount.
    const res = await t.http.post(`/v1/webhooks/mobilemoney?ref=${p.id}`).send(stkSuccess(outside, [{ Name: 'MpesaReceiptNumber', Value: (await stkOf(outside)).receipt_number }]));
    expect(res.status).toBe(200);
    expect(await t.sql('SELECT status, provider_ref FROM payments WHERE id = $1', [p.id])).toEqual([{ status: 'pending', provider_ref: null }]);
    expect((await stkOf(outside)).query_count).toBe(0);

    // The pull lists the 1 KES charge under P's reference: not P's amount, so nothing settles P.
    await judgedByPull(p.id);
    expect(await t.sql('SELECT status FROM payments WHERE id = $1', [p.id])).toEqual([{ status: 'pending' }]);
    expect(await completedTransitions(p.id)).toEqual([]);
    expect(await t.sql(`SELECT type FROM events WHERE payment_id = $1 AND type = 'payment.completed'`, [p.id])).toEqual([]);
  });

  it("an unsigned callback at its address naming another payment's CheckoutRequestID changes neither and asks nothing", async () => {
    const live = await t.createMerchant('Lost Push Forgery Duka');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', live.apiKey).send({ provider: 'mobilemoney', mobilemoney: {
      env: 'live', consumer_key: 'lost-push-forgery-key', consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919',
      shortcode: '174379', initiator: 'testapi', security_credential: await securityCredential(),
    } }).expect(200);
    const push = (phone: string) => t.http.post('/v1/payments').set('X-API-Key', live.apiKey).set('Idempotency-Key', `lost-push-${++n}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone });
    // B completes normally (its unsigned callback confirmed by the STK query).
    const b = (await push('254722000556')).body.data as { id: string; provider_ref: string };
    await eventually(async () => (await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [b.id]))[0]!.status === 'completed', 15_000, 'B completed');
    // A's create answer is lost; its customer has not answered yet.
    const config = t.service.container.config;
    const saved = config.sandboxCallbackDelayMs;
    config.sandboxCallbackDelayMs = 60_000;
    proxy.trapPath = '/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest';
    let a;
    try {
      a = (await push('254722000557')).body.data as { id: string; provider_ref: string | null };
    } finally {
      config.sandboxCallbackDelayMs = saved;
      proxy.trapPath = null;
    }
    expect(a.provider_ref).toBeNull();
    const queries = async () => (await t.sql<{ n: number }>('SELECT query_count AS n FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1', [b.provider_ref]))[0]!.n;
    const before = await queries();
    const forged = await t.http.post(`/v1/webhooks/mobilemoney?ref=${a.id}`).send({ Body: { stkCallback: {
      MerchantRequestID: 'm-forged', CheckoutRequestID: b.provider_ref, ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
      CallbackMetadata: { Item: [{ Name: 'Amount', Value: 100 }, { Name: 'MpesaReceiptNumber', Value: 'FORGED0001' }, { Name: 'PhoneNumber', Value: 254722000557 }] },
    } } });
    expect(forged.status).toBe(200);
    expect(await queries()).toBe(before);
    expect(await t.sql('SELECT status, provider_ref FROM payments WHERE id = ANY($1) ORDER BY status', [[a.id, b.id]])).toEqual([
      { status: 'completed', provider_ref: b.provider_ref },
      { status: 'pending', provider_ref: null },
    ]);
  });
});

/**
 * The live operator signs a callback body with its one certificate, whoever's push or reversal it is
 * about; the address (`?ref=`, no token for a live push) is not signed. A signed body at our payment's (or
 * refund's) address that names a reference the payment (refund) has not recorded — its create (reversal)
 * answer lost — may be a stranger's: anyone with a shortcode can give our address as their push's
 * CallBackURL. It is confirmed with the merchant's own credentials, never applied as it says.
 */
describe('a signed live mobile-money callback for a payment or refund whose provider answer was lost', () => {
  const SILENT = '254700000003';
  const sign = (body: string) => rsaSign('sha256', Buffer.from(body), operatorKey.privateKey).toString('base64');
  const postSigned = (url: string, payload: unknown) => {
    const body = JSON.stringify(payload);
    return t.http.post(url).set('Content-Type', 'application/json').set('X-Mobilemoney-Signature', sign(body)).send(body);
  };
  const stkSuccess = (checkoutRequestId: string, receipt: string) => ({ Body: { stkCallback: {
    MerchantRequestID: 'm-signed', CheckoutRequestID: checkoutRequestId, ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
    CallbackMetadata: { Item: [{ Name: 'Amount', Value: 100 }, { Name: 'MpesaReceiptNumber', Value: receipt }, { Name: 'TransactionDate', Value: 20261128120000 }, { Name: 'PhoneNumber', Value: 254700000003 }] },
  } } });
  /** The customer answered the open prompt on `phone`: the operator completed that push (the silent phone: no callback). */
  const answerPrompt = (phone: string) => t.sql('UPDATE sandbox_mobilemoney_stk_requests SET completes_at = now() WHERE phone = $1 AND completes_at > now()', [phone]);
  const stkOf = async (where: string, value: string) =>
    (await t.sql<{ checkout_request_id: string; receipt_number: string; query_count: number }>(
      `SELECT checkout_request_id, receipt_number, query_count FROM sandbox_mobilemoney_stk_requests WHERE ${where} = $1`, [value]))[0]!;
  const eventsOf = async (paymentId: string) => (await t.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1 ORDER BY created_at', [paymentId])).map((e) => e.type);
  const liveMerchant = async (name: string) => {
    const m = await t.createMerchant(name);
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'mobilemoney', mobilemoney: {
      env: 'live', consumer_key: `signed-${randomUUID()}`, consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919',
      shortcode: '174379', initiator: 'testapi', security_credential: await securityCredential(),
    } }).expect(200);
    return m;
  };
  /** A push to the silent phone whose create answer is lost: pending, no provider_ref. */
  const lostPush = async (apiKey: string) => {
    await answerPrompt(SILENT);
    proxy.trapPath = '/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest';
    let created;
    try {
      created = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `signed-lost-${++n}`)
        .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: SILENT });
    } finally {
      proxy.trapPath = null;
    }
    expect(created.status).toBe(201);
    const p = created.body.data as { id: string; reference: string };
    expect(created.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    return p;
  };
  const row = async (paymentId: string) =>
    (await t.sql<{ status: string; provider_ref: string | null; receipt_number: string | null }>('SELECT status, provider_ref, receipt_number FROM payments WHERE id = $1', [paymentId]))[0]!;

  it("naming a stranger's push (another shortcode, same amount) at our payment's address: not applied; the payment stays pending, no payment.completed", async () => {
    const { apiKey } = await liveMerchant('Signed Stranger Duka');
    const victim = await lostPush(apiKey);
    await answerPrompt(SILENT);
    // A stranger's own shortcode pushes 100 KES with our payment's address as its CallBackURL; the operator completes it.
    const token = (await t.http.get('/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials').auth('stranger', 'stranger').expect(200)).body.access_token as string;
    const timestamp = new Intl.DateTimeFormat('sv-SE', { timeZone: 'Africa/Nairobi', dateStyle: 'short', timeStyle: 'medium' }).format(new Date()).replace(/\D/g, '');
    const push = await t.http.post('/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest').set('Authorization', `Bearer ${token}`).send({
      BusinessShortCode: '600999', Password: Buffer.from(`600999strangers-passkey${timestamp}`).toString('base64'), Timestamp: timestamp,
      TransactionType: 'CustomerPayBillOnline', Amount: 100, PartyA: SILENT, PartyB: '600999', PhoneNumber: SILENT,
      CallBackURL: `${t.baseUrl}/v1/webhooks/mobilemoney?ref=${victim.id}`, AccountReference: 'stranger', TransactionDesc: 'stranger',
    }).expect(200);
    const foreign = push.body.CheckoutRequestID as string;
    expect(foreign).toMatch(/^ws_CO_/);
    await answerPrompt(SILENT);
    const { receipt_number: receipt } = await stkOf('checkout_request_id', foreign);

    // The operator's signed result of the stranger's push, at our payment's address.
    const res = await postSigned(`/v1/webhooks/mobilemoney?ref=${victim.id}`, stkSuccess(foreign, receipt));
    expect(res.status).toBe(200);
    // Asked with our shortcode, the operator knows no such push of ours: nothing changes.
    expect(await row(victim.id)).toEqual({ status: 'pending', provider_ref: null, receipt_number: null });
    expect(await eventsOf(victim.id)).toEqual([]);
    expect(await t.sql('SELECT 1 FROM provider_events WHERE payment_id = $1', [victim.id])).toEqual([]);
    expect(await t.sql(`SELECT to_status FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed'`, [victim.id])).toEqual([]);
  });

  it("naming our own push, before the push's answer is recorded: confirmed by the STK query with our shortcode, the payment completes once (payment.completed) with the callback's receipt (a refund can be asked for at once)", async () => {
    const { apiKey, merchantId } = await liveMerchant('Signed Own Duka');
    await answerPrompt(SILENT);
    // The operator takes the push and the customer pays at once; the operator's signed callback outruns the push's answer.
    proxy.trapPath = '/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest';
    proxy.holdUntilReleased = true;
    const creating = t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `signed-own-${++n}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: SILENT }).then((r) => r);
    let p: { id: string; reference: string };
    let stk: Awaited<ReturnType<typeof stkOf>>;
    try {
      await eventually(() => proxy.trappedForwarded === 1, 10_000, 'the push reached the operator');
      await answerPrompt(SILENT);
      [p] = await t.sql<{ id: string; reference: string }>('SELECT id, reference FROM payments WHERE merchant_id = $1', [merchantId]) as [typeof p];
      stk = await stkOf('account_reference', p.reference.slice(0, 12));
      expect(await row(p.id)).toEqual({ status: 'pending', provider_ref: null, receipt_number: null });
      expect((await postSigned(`/v1/webhooks/mobilemoney?ref=${p.id}`, stkSuccess(stk.checkout_request_id, stk.receipt_number))).status).toBe(200);
    } finally {
      proxy.release();
      proxy.trapPath = null;
    }
    expect((await creating).status).toBe(201);

    // Confirmed as ours by the STK query (once), so the signed body is the payment's: its receipt is recorded.
    expect(await row(p.id)).toMatchObject({ status: 'completed', receipt_number: stk.receipt_number });
    expect((await stkOf('checkout_request_id', stk.checkout_request_id)).query_count).toBe(1);
    const [transition] = await t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed' AND accepted`, [p.id]);
    expect(transition!.trigger).toBe('confirmed:stk');
    expect(await eventsOf(p.id)).toEqual(['payment.completed']);
    // The operator's repeat of its callback changes nothing.
    expect((await postSigned(`/v1/webhooks/mobilemoney?ref=${p.id}`, stkSuccess(stk.checkout_request_id, stk.receipt_number))).status).toBe(200);
    expect(await row(p.id)).toMatchObject({ receipt_number: stk.receipt_number });
    expect((await stkOf('checkout_request_id', stk.checkout_request_id)).query_count).toBe(1);
    expect((await eventsOf(p.id)).filter((e) => e === 'payment.completed')).toHaveLength(1);
    // The merchant can refund it at once (a reversal needs the receipt; without it: 409).
    expect((await t.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: p.id })).status).toBe(201);
  });

  it("a signed reversal result without the refund's token, for a refund whose acknowledgement was lost: not applied (502, sent again); the refund sync completes it once", async () => {
    const { apiKey } = await liveMerchant('Signed Reversal Duka');
    await answerPrompt(SILENT);
    const paid = (await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `signed-paid-${++n}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: SILENT }).expect(201)).body.data as { id: string; provider_ref: string };
    await answerPrompt(SILENT);
    const stk = await stkOf('checkout_request_id', paid.provider_ref);
    // The operator's signed result for the push, naming its recorded CheckoutRequestID: applied with its receipt.
    expect((await postSigned(`/v1/webhooks/mobilemoney?ref=${paid.id}`, stkSuccess(stk.checkout_request_id, stk.receipt_number))).status).toBe(200);
    expect(await row(paid.id)).toMatchObject({ status: 'completed', receipt_number: stk.receipt_number });

    // The operator reverses it; the acknowledgement is held past the timeout and the result lost.
    await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count: 1 }).expect(200);
    proxy.trapPath = '/sandbox/mobilemoney/mpesa/reversal/v1/request';
    proxy.repeats = 'held';
    const refund = await refundWithTrappedReversal(apiKey, paid.id);
    proxy.trapPath = null;
    expect(refund.status).toBe(201);
    const refundId = refund.body.data.id as string;
    expect(refund.body.data).toMatchObject({ status: 'pending', provider_ref: null });

    // A signed success at the refund's result address without its token, naming a reversal request that is not ours.
    const forged = await postSigned(`/v1/webhooks/mobilemoney/reversal/result?ref=${refundId}`, { Result: {
      ResultType: 0, ResultCode: 0, ResultDesc: 'The service request is processed successfully.', OriginatorConversationID: `stranger-${randomUUID()}`,
      ConversationID: 'AG_stranger', TransactionID: 'STRANGERREV1',
      ResultParameters: { ResultParameter: [{ Key: 'Amount', Value: 100 }, { Key: 'OriginalTransactionID', Value: 'STRANGER01' }] },
    } });
    expect(forged.status).toBe(502);
    expect(await t.sql('SELECT status, provider_ref FROM refunds WHERE id = $1', [refundId])).toEqual([{ status: 'pending', provider_ref: null }]);
    expect(await row(paid.id)).toMatchObject({ status: 'completed' });
    expect(await eventsOf(paid.id)).toEqual(['payment.completed']);

    // The refund sync sends the request again; the operator answers "already reversed" at the refund's own address.
    await t.sql('UPDATE refunds SET next_sync_at = now() WHERE id = $1', [refundId]);
    await eventually(async () => (await row(paid.id)).status === 'reversed', 20_000, 'the reversal recorded');
    expect(await t.sql('SELECT status FROM refunds WHERE payment_id = $1', [paid.id])).toEqual([{ status: 'completed' }]);
    const events = await eventsOf(paid.id);
    expect(events).not.toContain('refund.failed');
    expect(events.filter((e) => e === 'payment.reversed')).toHaveLength(1);
  });
});

describe('a mobile-money push whose create answer was lost and whose customer paid (no callback ever comes)', () => {
  it("2 h after creation the status sync pulls the operator's settled transactions: the charge is listed, so the payment completes with its receipt (payment.completed), never failed", async () => {
    const SILENT = '254700000003';
    const answerPrompt = () => t.sql('UPDATE sandbox_mobilemoney_stk_requests SET completes_at = now() WHERE phone = $1 AND completes_at > now()', [SILENT]);
    await answerPrompt();
    proxy.trapPath = '/sandbox/mobilemoney/mpesa/stkpush/v1/processrequest';
    let created;
    try {
      created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `paid-lost-push-${++n}`)
        .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: SILENT });
    } finally {
      proxy.trapPath = null;
    }
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const p = created.body.data as { id: string; reference: string };
    // The customer pays; the operator sends no callback (the silent phone).
    await answerPrompt();
    const [stk] = await t.sql<{ receipt_number: string }>('SELECT receipt_number FROM sandbox_mobilemoney_stk_requests WHERE account_reference = $1', [p.reference.slice(0, 12)]);
    expect(stk!.receipt_number).toBeTruthy();

    await t.inContext(() => t.service.container.services.statusSync.syncOne(p.id, Date.now() + 2 * 3_600_000 + 2 * 60_000));
    expect(await t.sql('SELECT status, receipt_number FROM payments WHERE id = $1', [p.id])).toEqual([{ status: 'completed', receipt_number: stk!.receipt_number }]);
    const [transition] = await t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed' AND accepted`, [p.id]);
    expect(transition!.trigger).toBe('reconciliation');
    await eventually(async () => (await t.sql('SELECT 1 FROM events WHERE payment_id = $1', [p.id])).length > 0, 5_000, 'an event');
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.completed' }]);
  });
});
