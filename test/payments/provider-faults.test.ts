import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

const PROVIDER_TIMEOUT_MS = 3000;

/**
 * Cardpay behind a slow network while `late` is set: every request reaches the simulator, which acts on
 * it (creates the intent), but its answer comes back only after PROVIDER_TIMEOUT_MS.
 */
class LateAnswers extends ForwardingStub {
  late = false;
  protected override async intercept(_req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const late = this.late;
    const answer = await forward();
    if (late) await new Promise((resolve) => setTimeout(resolve, PROVIDER_TIMEOUT_MS + 1000));
    return answer;
  }
}

let t: TestService;
let stub: LateAnswers;
let key: string;
let n = 0;

const outage = (mode: 'ok' | 'error' | 'hang') =>
  t.http.post('/sandbox/cardpay/_control/outage').send({ mode }).expect(200);
const pay = (idem = `fault-${Date.now()}-${++n}`, apiKey = key) =>
  t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', idem).send({ provider: 'cardpay', amount: '9.99', currency: 'USD', payment_method: 'pm_card_visa' });
const statusOf = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;
const intentsFor = async (paymentId: string) =>
  (await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [paymentId]))[0]!.n;

beforeAll(async () => {
  // Status sync every few hundred ms so recovery is observable within the test.
  // 3 s: a hang is cut short, but a slow answer of the in-process simulator on a loaded host is not (800 ms
  // was: CI at a4148c9 had a mobile-money reversal answered 502 'did not answer' under load).
  // Cardpay is reached through the stub, which forwards every request unchanged unless a test asks otherwise.
  stub = new LateAnswers();
  const stubUrl = await stub.start();
  t = await startTestService({
    CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay`,
    PROVIDER_TIMEOUT_MS: String(PROVIDER_TIMEOUT_MS),
    STATUS_SYNC_SCHEDULE: '300ms,300ms,300ms,300ms,300ms,300ms,300ms,300ms',
    STATUS_SYNC_POLL_INTERVAL: '200ms',
  });
  stub.target = t.baseUrl;
  ({ apiKey: key } = await t.createMerchant('Fault Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_faults_0001' } }).expect(200);
});
afterAll(async () => {
  await outage('ok');
  await t.stop();
  await stub.stop();
});

describe('cardpay outages on creation', () => {
  it('keeps the payment pending when the provider errors, replays it to a retry, and settles it once the provider is back', async () => {
    await outage('error');
    const idem = `fault-error-${Date.now()}`;
    const res = await pay(idem);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const retry = await pay(idem);
    expect(retry.status).toBe(200);
    expect(retry.body.data.id).toBe(res.body.data.id);
    await outage('ok');
    const settled = await eventually(async () => {
      const p = await statusOf(res.body.data.id);
      return p.status === 'completed' ? p : null;
    }, 15_000, 'status sync to settle the payment');
    expect(settled.provider_ref).toMatch(/^pi_/);
    expect(await intentsFor(res.body.data.id)).toBe(1);
  });

  it('keeps the payment pending when the provider hangs past the timeout, and settles it once the provider is back', async () => {
    await outage('hang');
    const res = await pay();
    expect(res.status).toBe(201);
    expect(res.body.data.status).toBe('pending');
    await outage('ok');
    await eventually(async () => (await statusOf(res.body.data.id)).status === 'completed', 15_000, 'settlement after the hang');
    expect(await intentsFor(res.body.data.id)).toBe(1);
  });

  it('keeps the payment pending when the provider charged but answered after the timeout, and the status sync settles it on that charge, without a double charge', async () => {
    // A merchant holding its own signing secret: the provider sends the service no event, so only the
    // status sync can learn what became of the creation.
    const m = await t.createMerchant('Late Answer Shop');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_faults_late_0001', webhook_secret: 'whsec_faults_late_answer' } }).expect(200);
    // Late for as long as the merchant's request lasts: the status sync (every 300 ms here) cannot learn of
    // the intent meanwhile either, so the answer is what the service knows without the provider.
    stub.late = true;
    let res;
    try {
      res = await pay(undefined, m.apiKey);
    } finally {
      stub.late = false;
    }
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    // The provider did create (and charge) the intent: only its answer was lost.
    const [intent] = await t.sql<{ id: string }>(`SELECT id FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [res.body.data.id]);
    expect(await intentsFor(res.body.data.id)).toBe(1);
    const settled = await eventually(async () => {
      const p = (await t.http.get(`/v1/payments/${res.body.data.id}`).set('X-API-Key', m.apiKey)).body.data;
      return p.status === 'completed' ? p : null;
    }, 15_000, 'the status sync to settle the payment');
    expect(settled.provider_ref).toBe(intent!.id);
    expect(await intentsFor(res.body.data.id)).toBe(1);
  }, 30_000);
});

describe('a provider that refuses the request', () => {
  it('answers 502 PROVIDER_ERROR and records the payment as failed with the reason', async () => {
    const m = await t.createMerchant('Bad Key Shop');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_invalid_0001', webhook_secret: 'whsec_given_0001' } }).expect(200);
    const idem = `bad-key-${Date.now()}`;
    const res = await pay(idem, m.apiKey);
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('PROVIDER_ERROR');
    expect(res.body.error.message).toContain('cardpay');
    expect(res.body.error.message).not.toContain('sk_test_invalid_0001');
    // The operator's log says the same, with the request id (the request log line alone names no reason).
    const logFile = inProcessLogFile(t.databaseUrl);
    const logged = readFileSync(logFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.requestId === res.headers['x-request-id'] && l.msg === 'answered with a server-side error');
    expect(logged).toEqual([expect.objectContaining({ level: 40, code: 'PROVIDER_ERROR', reason: res.body.error.message, route: '/v1/payments' })]);
    const [row] = await t.sql<{ status: string; failure_reason: string }>('SELECT status, failure_reason FROM payments WHERE idempotency_key = $1', [idem]);
    expect(row!.status).toBe('failed');
    expect(row!.failure_reason).toEqual(expect.any(String));
    const replay = await pay(idem, m.apiKey);
    expect(replay.status).toBe(200);
    expect(replay.body.data.status).toBe('failed');
  });

  it('refuses to store cardpay credentials the provider rejects when registering our callback (502)', async () => {
    const m = await t.createMerchant('Rejected Shop');
    const res = await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_invalid_0002' } });
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('PROVIDER_ERROR');
    expect(await t.sql('SELECT 1 FROM provider_credentials WHERE merchant_id = $1', [m.merchantId])).toHaveLength(0);
  });
});

describe('cardpay outage on refund', () => {
  const refund = (body: Record<string, unknown>, idem: string) => t.http.post('/v1/refunds').set('X-API-Key', key).set('Idempotency-Key', idem).send(body);
  const listed = async (paymentId: string) => (await t.http.get('/v1/refunds').query({ payment_id: paymentId }).set('X-API-Key', key).expect(200)).body.data as { id: string; status: string; amount: string }[];
  const logged = (refundId: string) => readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.refundId === refundId);

  it('answers 201 with the refund pending, not 502: the refund is listed, its key replays it (no second refund), a new key is counted against it; the sync completes it once', async () => {
    const p = (await pay()).body.data;
    expect(p.status).toBe('completed');
    const idem = `refund-fault-${++n}`;
    let id: string;
    await outage('error');
    try {
      const first = await refund({ payment_id: p.id, amount: '5.00' }, idem);
      expect(first.status).toBe(201);
      expect(first.body.data).toMatchObject({ payment_id: p.id, status: 'pending', amount: '5.00', provider_ref: null, failure_reason: null });
      id = first.body.data.id;
      expect(await listed(p.id)).toEqual([expect.objectContaining({ id, status: 'pending', amount: '5.00' })]);
      // What the provider said is logged, with the refund.
      expect(logged(id)).toEqual(expect.arrayContaining([expect.objectContaining({ level: 40, msg: expect.stringContaining('did not answer'), err: expect.objectContaining({ message: expect.stringContaining('HTTP 500') }) })]));

      // The merchant asks again with the same key: the same refund, not a second one.
      const again = await refund({ payment_id: p.id, amount: '5.00' }, idem);
      expect([again.status, again.headers['idempotent-replayed']]).toEqual([201, 'true']);
      expect(again.body.data).toMatchObject({ id, status: 'pending' });
      // With a new key, the pending refund holds its 5.00: more than the 4.99 left is refused.
      const over = await refund({ payment_id: p.id, amount: '5.00' }, `refund-fault-${++n}`);
      expect(over.status).toBe(422);
      expect(over.body.error.details).toEqual([{ field: 'amount', issue: 'must be at most 4.99' }]);
      expect(await listed(p.id)).toEqual([expect.objectContaining({ id })]);
      expect((await statusOf(p.id)).amount_refunded).toBe('0.00');
    } finally {
      await outage('ok');
    }

    // The refund sync finds no trace of it at the provider and sends it again (the same idempotency key): it completes, once.
    await t.inContext(() => t.service.container.services.refundSync.syncOne(id));
    await eventually(async () => ((await statusOf(p.id)).amount_refunded === '5.00' ? true : null), 10_000, 'the refund completed');
    expect(await listed(p.id)).toEqual([expect.objectContaining({ id, status: 'completed' })]);
    expect(await t.sql(`SELECT 1 FROM sandbox_cardpay_refunds WHERE payment_intent = $1`, [p.provider_ref])).toHaveLength(1);
    // The key answers the refund as it is now.
    const replay = await refund({ payment_id: p.id, amount: '5.00' }, idem);
    expect([replay.status, replay.body.data]).toEqual([201, expect.objectContaining({ id, status: 'completed' })]);
  });

  it('a key an earlier release bound to its 502 (answer `undecided`) answers the refund as it is now: 201 pending', async () => {
    const p = (await pay()).body.data;
    const idem = `refund-fault-old-${++n}`;
    await outage('error');
    try {
      const first = await refund({ payment_id: p.id, amount: '2.00' }, idem);
      expect(first.status).toBe(201);
      // As the earlier release stored it: finished, its answer the 502 kept until the refund settled.
      const undecided = { status: 201, undecided: { code: 'PROVIDER_ERROR', message: `cardpay did not answer the refund request (cardpay answered HTTP 500); refund ${first.body.data.id} stays pending` } };
      await t.sql(`UPDATE idempotency_keys SET answer = $1::jsonb WHERE scope = 'refund.create' AND key = $2`, [JSON.stringify(undecided), idem]);
      const replay = await refund({ payment_id: p.id, amount: '2.00' }, idem);
      expect([replay.status, replay.headers['idempotent-replayed']]).toEqual([201, 'true']);
      expect(replay.body.data).toMatchObject({ id: first.body.data.id, status: 'pending' });
      expect(await listed(p.id)).toHaveLength(1);
    } finally {
      await outage('ok');
    }
  });
});
