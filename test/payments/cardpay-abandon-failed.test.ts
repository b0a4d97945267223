import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { ABANDON_FAILED_JOB } from '../../server/jobs/abandon-failed.job.js';
import { signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { jobRunFinished, runJobOnce } from '../support/job-run.js';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A card payment we record `failed` leaves its Stripe intent in requires_payment_method, where a later
 * confirmation (with the intent's client secret) would still charge the customer while the merchant sees
 * `failed`. The worker cancels such intents at the provider (payments.abandon-due), outside any
 * transaction; an intent that was charged after all is recorded as a refused late success.
 */
let t: TestService;
let key: string;
let n = 0;
const SECRET_KEY = 'sk_test_abandon_failed_0001';

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('Abandon Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: SECRET_KEY } }).expect(200);
});
afterAll(async () => t.stop());

const pay = (k: string, paymentMethod: string) =>
  t.http.post('/v1/payments').set('X-API-Key', k).set('Idempotency-Key', `abandon-${Date.now()}-${++n}`)
    .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: paymentMethod, return_url: 'https://shop.example.com/return' });
const intentAt = async (secretKey: string, id: string) =>
  (await t.http.get(`/sandbox/cardpay/v1/payment_intents/${id}`).set('Authorization', `Bearer ${secretKey}`).expect(200)).body;
/** What a customer's browser could still do with the intent's client secret: confirm it with another card. */
const confirmAgain = (secretKey: string, id: string) =>
  t.http.post(`/sandbox/cardpay/v1/payment_intents/${id}/confirm`).set('Authorization', `Bearer ${secretKey}`).type('form').send({ payment_method: 'pm_card_visa' });
const abandonDue = () => t.inContext(() => t.service.container.services.abandonFailed.abandonDue());
const payment = async (k: string, id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', k).expect(200)).body.data;

describe('a failed card payment is cancelled at the provider', () => {
  it('when the credentials cannot be opened (sealed with a key this process lacks), the cancel is retried later, and given up (logged) a week after the failure', async () => {
    // Its own webhook secret: no endpoint is registered, so no provider event meets the unreadable credentials.
    const { apiKey, merchantId } = await t.createMerchant('Abandon Sealed Shop');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_abandon_sealed', webhook_secret: 'whsec_abandon_sealed' } }).expect(200);
    const res = await pay(apiKey, 'pm_card_chargeDeclined');
    const id = res.body.data.id as string;
    const mark = async () => (await t.sql<{ due: boolean }>('SELECT abandon_due_at IS NOT NULL AS due FROM payments WHERE id = $1', [id]))[0]!.due;
    // The worker's job (every 500 ms here) cancels the intent first, while the credentials are readable: a
    // cancel of its still under way when the mark is set again below would clear it (CI, on a loaded host).
    await eventually(async () => !(await mark()), 10_000, "the worker's own cancel");
    // Not a provider's answer at all: an error of this process (here, credentials it cannot decrypt).
    await t.sql(`UPDATE provider_credentials SET secrets_enc = 'v1.unknown-key.AAAA' WHERE merchant_id = $1`, [merchantId]);
    // The change reaches the process's credential cache by NOTIFY, within a second.
    const unreadable = () => t.inContext(() => t.service.container.services.credentials.find(merchantId, 'cardpay')).then(() => false, () => true);
    await eventually(unreadable, 5_000, 'the changed credentials to reach the cache');
    // Due again, but not before the worker's job could take it: this test asks itself.
    await t.sql(`UPDATE payments SET abandon_due_at = now() + interval '1 hour' WHERE id = $1`, [id]);
    await t.inContext(() => t.service.container.services.abandonFailed.abandonOne(id));
    expect(await mark()).toBe(true); // kept for a retry: the merchant may store credentials again
    await t.sql(`UPDATE payments SET updated_at = now() - interval '8 days' WHERE id = $1`, [id]);
    await t.inContext(() => t.service.container.services.abandonFailed.abandonOne(id));
    expect(await mark()).toBe(false); // before, retried every 5 minutes for ever
  });

  it('a decline: the intent is canceled there, so confirming it again charges nothing', async () => {
    const res = await pay(key, 'pm_card_chargeDeclined');
    expect(res.body.data).toMatchObject({ status: 'failed' });
    const intentId = res.body.data.provider_ref as string;
    await abandonDue();
    await eventually(async () => (await intentAt(SECRET_KEY, intentId)).status === 'canceled', 10_000, 'the intent to be canceled');
    expect(await intentAt(SECRET_KEY, intentId)).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned', amount_received: 0 });
    const retry = await confirmAgain(SECRET_KEY, intentId);
    expect(retry.status).toBe(400);
    expect(retry.body.error).toMatchObject({ code: 'payment_intent_unexpected_state' });
    expect(await payment(key, res.body.data.id)).toMatchObject({ status: 'failed' });
    expect(await t.sql('SELECT abandon_due_at FROM payments WHERE id = $1', [res.body.data.id])).toEqual([{ abandon_due_at: null }]);
  });

  it('a failed 3-D Secure authentication (known from the provider event): the intent is canceled too', async () => {
    const { apiKey } = await t.createMerchant('Abandon 3DS Shop');
    const secretKey = 'sk_test_abandon_failed_3ds';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
    const res = await pay(apiKey, 'pm_card_threeDSecureRequired');
    const url = res.body.data.next_action.url as string;
    await fetch(`${url}${url.includes('?') ? '&' : '?'}auto=fail`, { redirect: 'manual' });
    await eventually(async () => (await payment(apiKey, res.body.data.id)).status === 'failed', 10_000, 'the payment_intent.payment_failed event');
    await abandonDue();
    await eventually(async () => (await intentAt(secretKey, res.body.data.provider_ref)).status === 'canceled', 10_000, 'the intent to be canceled');
    expect((await confirmAgain(secretKey, res.body.data.provider_ref)).status).toBe(400);
  });

  it('an intent charged after all before the cancel arrived: a late success, refused and recorded; the payment stays failed', async () => {
    // Its own webhook secret and no endpoint: only the event posted below reaches the service.
    const { apiKey } = await t.createMerchant('Late Success Shop');
    const secretKey = 'sk_test_abandon_failed_late';
    const webhookSecret = 'whsec_abandon_failed_late';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: webhookSecret } }).expect(200);
    const res = await pay(apiKey, 'pm_card_threeDSecureRequired');
    const p = res.body.data as { id: string; provider_ref: string; next_action: { url: string } };
    const failedIntent = { ...(await intentAt(secretKey, p.provider_ref)), status: 'requires_payment_method', last_payment_error: { message: 'Authentication failed' } };
    // The cardholder completes 3-D Secure and is charged (the provider's success event never comes here)…
    await fetch(`${p.next_action.url}${p.next_action.url.includes('?') ? '&' : '?'}auto=complete`, { redirect: 'manual' });
    expect((await intentAt(secretKey, p.provider_ref)).status).toBe('succeeded');
    // …and the service then hears of an earlier failed attempt (events come in no guaranteed order). Charged
    // before the failure was recorded, so the cancel (the worker's job, whenever it runs) finds it succeeded.
    const body = JSON.stringify({ id: `evt_late_${Date.now()}`, object: 'event', type: 'payment_intent.payment_failed', created: Math.floor(Date.now() / 1000), data: { object: failedIntent } });
    await t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, webhookSecret)).send(body).expect(200);
    expect(await payment(apiKey, p.id)).toMatchObject({ status: 'failed' });

    await abandonDue();
    await eventually(async () => (await t.sql('SELECT abandon_due_at FROM payments WHERE id = $1', [p.id]))[0]!.abandon_due_at === null, 10_000, 'the abandonment to be done');
    expect(await payment(apiKey, p.id)).toMatchObject({ status: 'failed' });
    const late = await t.sql<{ to_status: string; accepted: boolean; trigger: string }>(
      `SELECT to_status, accepted, trigger FROM payment_transitions WHERE payment_id = $1 AND trigger = 'abandon'`, [p.id]);
    expect(late).toEqual([{ to_status: 'completed', accepted: false, trigger: 'abandon' }]);
    // Counted where an operator's alert looks (as reconciliation counts a charged failed payment).
    expect(total(await scrapeMetrics(t), 'payments_integrity_mismatches_total', { provider: 'cardpay', source: 'abandon:charged_but_failed' })).toBe(1);

    // The operator does what the error log asked: refunds the charge in the provider's dashboard. Its
    // event is recorded as giving the charge back, not as a refund our books cannot take (that raised the
    // critical integrity alert and showed the payment `mismatch` to the merchant).
    const refunded = await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${secretKey}`).type('form').send({ payment_intent: p.provider_ref }).expect(200);
    const refundEvent = JSON.stringify({ id: `evt_giveback_${Date.now()}`, object: 'event', type: 'refund.created', created: Math.floor(Date.now() / 1000), data: { object: refunded.body } });
    await t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(refundEvent, webhookSecret)).send(refundEvent).expect(200);
    expect(await payment(apiKey, p.id)).toMatchObject({ status: 'failed', amount_refunded: '0.00', integrity: { status: 'ok', mismatches: [] } });
    const givenBack = await t.sql<{ note: string }>(`SELECT note FROM payment_transitions WHERE payment_id = $1 AND to_status = 'refunded'`, [p.id]);
    expect(givenBack).toEqual([{ note: `provider refund ${refunded.body.id} not applicable: it gives back a charge of this failed payment (a payment recorded failed was charged at the provider)` }]);
    expect(total(await scrapeMetrics(t), 'payments_integrity_mismatches_total', { provider: 'cardpay', source: 'callback:refund.created' })).toBe(0);
  });
});

/**
 * In front of the simulator: the first cancel of an intent is answered 500 and, as Stripe keeps a started
 * request's answer (a 500 included) under its Idempotency-Key for 24 h, so is every later cancel with that
 * key. Records each cancel's key and the status answered.
 */
class CancelFailsOnce extends ForwardingStub {
  private readonly failedKeys = new Set<string>();
  private readonly failedIntents = new Set<string>();
  readonly cancels: { intentId: string; key: string; status: number }[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const cancel = req.method === 'POST' ? /\/v1\/payment_intents\/([^/]+)\/cancel$/.exec(req.url) : null;
    if (!cancel) return forward();
    const intentId = cancel[1]!;
    const key = String(req.headers['idempotency-key'] ?? '');
    if (!this.failedIntents.has(intentId)) {
      this.failedIntents.add(intentId);
      this.failedKeys.add(key);
    }
    const answer = this.failedKeys.has(key) ? jsonAnswer(500, { error: { type: 'api_error', message: 'An unknown error occurred' } }) : await forward();
    this.cancels.push({ intentId, key, status: answer.status });
    return answer;
  }
}

describe('a cancel the provider answered 500', () => {
  let s: TestService;
  let stub: CancelFailsOnce;
  const secretKey = 'sk_test_abandon_failed_500';
  let apiKey: string;

  beforeAll(async () => {
    stub = new CancelFailsOnce();
    const stubUrl = await stub.start();
    s = await startTestService({ CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay` });
    stub.target = s.baseUrl;
    ({ apiKey } = await s.createMerchant('Abandon Retry Shop'));
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
  });
  afterAll(async () => {
    await stub.stop();
    await s.stop();
  });

  it('is sent again under a new Idempotency-Key (not answered the stored 500 for a day): the intent is canceled', async () => {
    const res = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `abandon-500-${Date.now()}`)
      .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_chargeDeclined' });
    expect(res.body.data).toMatchObject({ status: 'failed' });
    const { id, provider_ref: intentId } = res.body.data as { id: string; provider_ref: string };
    const cancels = () => stub.cancels.filter((c) => c.intentId === intentId);
    const intent = async () => (await s.http.get(`/sandbox/cardpay/v1/payment_intents/${intentId}`).set('Authorization', `Bearer ${secretKey}`).expect(200)).body;
    const abandon = () => s.inContext(() => s.service.container.services.abandonFailed.abandonDue());

    await abandon(); // or the worker's job (every 500 ms here) got there first
    await eventually(() => cancels().length >= 1, 10_000, 'the first cancel');
    expect(cancels()[0]!.status).toBe(500);
    expect((await intent()).status).toBe('requires_payment_method');
    // Retried when the claim runs out (5 minutes): here at once.
    await s.sql('UPDATE payments SET abandon_due_at = now() WHERE id = $1', [id]);
    await abandon();
    await eventually(() => cancels().length >= 2, 10_000, 'the cancel sent again');
    expect(await intent()).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned' });
    expect(cancels()[1]!.key).not.toBe(cancels()[0]!.key);
    await eventually(async () => (await s.sql('SELECT abandon_due_at FROM payments WHERE id = $1', [id]))[0]!.abandon_due_at === null, 10_000, 'the mark cleared');
  });
});

describe('a backlog of failed payments', () => {
  it('one run of the job cancels every due intent, batch after batch: 60, not one claim of 25', async () => {
    // An hour between the job's runs (it runs once at boot): every cancel below is the one run the test asks
    // for. A run lasts at most half the jobs' lock lifetime: 30 s here (5 s by default in tests), room for
    // 60 cancels on a loaded machine.
    const s = await startTestService({ STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    try {
      await jobRunFinished(s, ABANDON_FAILED_JOB);
      const secretKey = 'sk_test_abandon_backlog';
      const { apiKey } = await s.createMerchant('Abandon Backlog Shop');
      await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
      const intents: string[] = [];
      for (let i = 0; i < 60; i++) {
        const res = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `abandon-backlog-${i}`)
          .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_chargeDeclined' });
        expect(res.body.data).toMatchObject({ status: 'failed' });
        intents.push(res.body.data.provider_ref);
      }
      expect(await s.sql('SELECT count(*)::int AS due FROM payments WHERE abandon_due_at IS NOT NULL')).toEqual([{ due: 60 }]);

      expect(await runJobOnce(s, ABANDON_FAILED_JOB)).toBe(1);
      expect(await s.sql('SELECT count(*)::int AS due FROM payments WHERE abandon_due_at IS NOT NULL')).toEqual([{ due: 0 }]); // was 35
      const canceled = await Promise.all(intents.map(async (id) =>
        (await s.http.get(`/sandbox/cardpay/v1/payment_intents/${id}`).set('Authorization', `Bearer ${secretKey}`).expect(200)).body.status));
      expect(canceled.filter((status) => status !== 'canceled')).toEqual([]);
    } finally {
      await s.stop();
    }
  }, 180_000);
});

describe('an intent still processing when its cancel is sent (a bank debit: days to settle)', () => {
  it('stays due for another check instead of counting as cancelled; when it then succeeds, the charge of the failed payment is recorded once', async () => {
    // An hour between the job's runs (it runs once at boot): every cancel below is a run the test asks for.
    const s = await startTestService({ STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    try {
      await jobRunFinished(s, ABANDON_FAILED_JOB);
      const secretKey = 'sk_test_abandon_processing';
      // Its own webhook secret and no endpoint: no provider event reaches the service, only the cancels' answers.
      const { apiKey } = await s.createMerchant('Abandon Processing Shop');
      await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
        .send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: 'whsec_abandon_processing' } }).expect(200);
      const declined = async (n: number) => {
        const res = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `abandon-processing-${n}`)
          .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_chargeDeclined' });
        expect(res.body.data).toMatchObject({ status: 'failed' });
        return res.body.data as { id: string; provider_ref: string };
      };
      const { id, provider_ref: intentId } = await declined(1);
      // Another, failed more than three weeks ago (a SEPA debit may take 14 business days): given up on, logged.
      const stale = await declined(2);
      await s.sql(`UPDATE payments SET updated_at = now() - interval '22 days' WHERE id = $1`, [stale.id]);
      const intent = async () => (await s.http.get(`/sandbox/cardpay/v1/payment_intents/${intentId}`).set('Authorization', `Bearer ${secretKey}`).expect(200)).body;
      const dueOf = async (payment: string) => (await s.sql<{ due: boolean }>('SELECT abandon_due_at IS NOT NULL AS due FROM payments WHERE id = $1', [payment]))[0]!.due;
      const due = () => dueOf(id);
      const lateSuccesses = () => s.sql(`SELECT to_status, accepted FROM payment_transitions WHERE payment_id = $1 AND trigger = 'abandon'`, [id]);
      const counted = async () => total(await scrapeMetrics(s), 'payments_integrity_mismatches_total', { provider: 'cardpay', source: 'abandon:charged_but_failed' });
      expect(await due()).toBe(true);

      // Before the cancel gets there, the customer confirms the declined intent again (its client secret) with a
      // bank debit: the intent is processing. No simulator test value debits a bank, so it is set here.
      await s.sql(`UPDATE sandbox_cardpay_intents SET status = 'processing', last_payment_error = NULL WHERE id = ANY($1)`, [[intentId, stale.provider_ref]]);
      expect(await runJobOnce(s, ABANDON_FAILED_JOB)).toBe(1);
      expect((await intent()).status).toBe('processing'); // the cancel refused, as Stripe does
      expect(await due()).toBe(true); // was cleared: counted as cancelled, never looked at again
      // Looked at again in an hour, not at the next claim's end (5 minutes): a refused cancel each time.
      const minutesToNextCheck = async () =>
        (await s.sql<{ minutes: number }>('SELECT round(extract(epoch FROM abandon_due_at - now()) / 60)::int AS minutes FROM payments WHERE id = $1', [id]))[0]!.minutes;
      expect(await minutesToNextCheck()).toBeGreaterThanOrEqual(59);
      expect(await lateSuccesses()).toEqual([]);
      expect(await dueOf(stale.id)).toBe(false);
      // Still processing at the next check (an hour later: here at once): still due.
      await s.sql('UPDATE payments SET abandon_due_at = now() WHERE id = $1', [id]);
      expect(await runJobOnce(s, ABANDON_FAILED_JOB)).toBe(1);
      expect(await due()).toBe(true);
      expect(await minutesToNextCheck()).toBeGreaterThanOrEqual(59); // again in an hour, not at the claim's end

      // The debit settles: the customer is charged for a payment the merchant sees failed.
      await s.sql(`UPDATE sandbox_cardpay_intents SET status = 'succeeded', amount_received = amount, latest_charge = 'ch_abandon_processing' WHERE id = $1`, [intentId]);
      // The next check.
      await s.sql('UPDATE payments SET abandon_due_at = now() WHERE id = $1', [id]);
      expect(await runJobOnce(s, ABANDON_FAILED_JOB)).toBe(1);
      expect(await due()).toBe(false);
      expect(await lateSuccesses()).toEqual([{ to_status: 'completed', accepted: false }]);
      expect(await counted()).toBe(1);
      expect((await s.http.get(`/v1/payments/${id}`).set('X-API-Key', apiKey).expect(200)).body.data).toMatchObject({ status: 'failed' });

      // Nothing due any more: another run records nothing twice.
      expect(await runJobOnce(s, ABANDON_FAILED_JOB)).toBe(1);
      expect(await lateSuccesses()).toHaveLength(1);
      expect(await counted()).toBe(1);
    } finally {
      await s.stop();
    }
  }, 120_000);
});

/**
 * In front of the simulator, a provider (or a proxy, a cache) answering about another intent than the one
 * asked: every cancel is refused payment_intent_unexpected_state, and every read of an intent answers the
 * intent `answerWith` — another payment's, succeeded.
 */
class AnswersAboutAnotherIntent extends ForwardingStub {
  answerWith: string | null = null;

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (!this.answerWith) return forward();
    if (req.method === 'POST' && /\/v1\/payment_intents\/[^/]+\/cancel$/.test(req.url)) {
      return jsonAnswer(400, { error: { type: 'invalid_request_error', code: 'payment_intent_unexpected_state', message: 'You cannot cancel this PaymentIntent because it has a status of succeeded.' } });
    }
    const read = req.method === 'GET' ? /^(.*\/v1\/payment_intents\/)([^/?]+)$/.exec(req.url) : null;
    if (read && read[2] !== this.answerWith) return forward(`${this.target}${read[1]}${this.answerWith}`);
    return forward();
  }
}

describe('a cancel whose answer is about another intent', () => {
  it('is no answer about the failed payment: nothing recorded as charged (no charged_but_failed, no metric, no error log); the cancel stays due and is retried', async () => {
    const stub = new AnswersAboutAnotherIntent();
    const stubUrl = await stub.start();
    // An hour between the job's runs (it runs once at boot): the abandon runs below are the ones the test asks for.
    const s = await startTestService({ CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay`, STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    stub.target = s.baseUrl;
    try {
      await jobRunFinished(s, ABANDON_FAILED_JOB);
      const secretKey = 'sk_test_abandon_other_intent';
      // Its own webhook secret and no endpoint: no provider event reaches the service.
      const { apiKey } = await s.createMerchant('Abandon Other Intent Shop');
      await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
        .send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: 'whsec_abandon_other_intent' } }).expect(200);
      const pay = async (n: number, pm: string) => (await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `abandon-other-${n}`)
        .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: pm })).body.data as { id: string; status: string; provider_ref: string };
      const paid = await pay(1, 'pm_card_visa');
      expect(paid.status).toBe('completed');
      stub.answerWith = paid.provider_ref;
      const declined = await pay(2, 'pm_card_chargeDeclined');
      expect(declined.status).toBe('failed');

      expect(await runJobOnce(s, ABANDON_FAILED_JOB)).toBe(1);
      const transitions = await s.sql(`SELECT to_status FROM payment_transitions WHERE payment_id = $1 AND trigger = 'abandon'`, [declined.id]);
      expect(transitions).toEqual([]);
      expect(total(await scrapeMetrics(s), 'payments_integrity_mismatches_total', { provider: 'cardpay', source: 'abandon:charged_but_failed' })).toBe(0);
      const lines = readFileSync(inProcessLogFile(s.databaseUrl), 'utf8').split('\n').filter((l) => l.includes(declined.id)).map((l) => JSON.parse(l) as { level: number; msg: string; reason?: string });
      expect(lines.filter((l) => l.level >= 50)).toEqual([]);
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'could not cancel a failed payment at the provider; retrying later', reason: expect.stringContaining(paid.provider_ref) }));
      expect((await s.http.get(`/v1/payments/${declined.id}`).set('X-API-Key', apiKey).expect(200)).body.data).toMatchObject({ status: 'failed', integrity: { status: 'ok' } });
      // Still due (retried after the claim, 5 minutes): once the provider answers about the right intent, it is canceled.
      expect(await s.sql('SELECT abandon_due_at IS NOT NULL AS due FROM payments WHERE id = $1', [declined.id])).toEqual([{ due: true }]);
      stub.answerWith = null;
      await s.sql('UPDATE payments SET abandon_due_at = now() WHERE id = $1', [declined.id]);
      expect(await runJobOnce(s, ABANDON_FAILED_JOB)).toBe(1);
      const intent = (await s.http.get(`/sandbox/cardpay/v1/payment_intents/${declined.provider_ref}`).set('Authorization', `Bearer ${secretKey}`).expect(200)).body;
      expect(intent).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned' });
      expect(await s.sql('SELECT abandon_due_at FROM payments WHERE id = $1', [declined.id])).toEqual([{ abandon_due_at: null }]);
    } finally {
      await stub.stop();
      await s.stop();
    }
  });
});
