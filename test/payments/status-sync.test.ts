import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ABANDON_FAILED_JOB } from '../../server/jobs/abandon-failed.job.js';
import { SYNC_PAYMENTS_JOB } from '../../server/jobs/sync-payments.job.js';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { jobRunFinished, runJobOnce } from '../support/job-run.js';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// The status sync re-checks pending payments with their provider on a backoff. Here the schedule is
// milliseconds and the simulator's push completes after 2 s, so the first re-checks see the push
// "being processed" and leave the payment pending; a later one settles it.

let t: TestService;
let receiver: WebhookReceiver;
let key: string;

beforeAll(async () => {
  t = await startTestService({
    SANDBOX_CALLBACK_DELAY_MS: '2000',
    STATUS_SYNC_SCHEDULE: '200ms,300ms,400ms,500ms,600ms,700ms,800ms,900ms,1s,1s,1s',
    STATUS_SYNC_POLL_INTERVAL: '100ms',
  });
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Sync Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({
    provider: 'mobilemoney',
    mobilemoney: { env: 'sandbox', consumer_key: 'sync-key', consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' },
  }).expect(200);
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

/**
 * A cardpay shop (through `s`) with 60 payments waiting for 3-D Secure — each re-check leaves them pending
 * with one more attempt — every one due now, as after a provider outage, once the job's run at boot is over.
 * Give `s` an hour between the job's runs and between a payment's re-checks: every re-check is then the one
 * run a test asks for. Returns the payments' ids.
 */
async function dueCardBacklog(s: TestService, secretKey: string, count = 60): Promise<string[]> {
  const m = await s.createMerchant(`Backlog Shop ${secretKey}`);
  await s.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await s.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `backlog-${secretKey}-${i}`)
      .send({ provider: 'cardpay', amount: '10.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired' }).expect(201);
    expect(res.body.data.status).toBe('pending');
    ids.push(res.body.data.id);
  }
  await jobRunFinished(s, SYNC_PAYMENTS_JOB);
  await s.sql('UPDATE payments SET next_sync_at = now() WHERE id = ANY($1)', [ids]);
  return ids;
}

/** How many of the payments `ids` were re-checked (one attempt spent). */
const recheckedOf = async (s: TestService, ids: string[]) =>
  (await s.sql<{ n: number }>('SELECT count(*)::int AS n FROM payments WHERE id = ANY($1) AND sync_attempts > 0', [ids]))[0]!.n;

describe('status sync of stuck payments', () => {
  it('mobile money: "being processed" keeps it pending; a later STK query settles it once, with its event', async () => {
    // The silent phone never gets a callback: only the sync (or reconciliation) can settle it.
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `sync-${Date.now()}`)
      .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254700000003' });
    expect(res.body.data.status).toBe('pending');
    const id = res.body.data.id;

    const stillPending = await eventually(async () => {
      const [row] = await t.sql<{ status: string; sync_attempts: number }>('SELECT status, sync_attempts FROM payments WHERE id = $1', [id]);
      return row!.sync_attempts >= 1 ? row : null;
    }, 10_000, 'a first re-check');
    expect(stillPending.status).toBe('pending');

    await eventually(async () => (await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [id]))[0]!.status === 'completed', 15_000, 'settlement by the sync');
    const transitions = await t.sql('SELECT from_status, to_status, trigger FROM payment_transitions WHERE payment_id = $1 AND accepted ORDER BY id', [id]);
    expect(transitions).toEqual([
      { from_status: null, to_status: 'pending', trigger: 'create' },
      { from_status: 'pending', to_status: 'completed', trigger: 'status-sync' },
    ]);
    const [after] = await t.sql<{ next_sync_at: Date | null }>('SELECT next_sync_at FROM payments WHERE id = $1', [id]);
    expect(after!.next_sync_at).toBeNull();
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === id));
  });

  it('mobile money: a query answered 200 ResultCode 4999 "still under processing" keeps it pending; the success callback completes it', async () => {
    // 254700000007: while its prompt is open the simulator answers the STK query in a 200 with ResultCode
    // 4999, as Daraja does; the customer pays when the prompt closes (8 s here) and the callback comes.
    const config = t.service.container.config;
    const saved = config.sandboxCallbackDelayMs;
    config.sandboxCallbackDelayMs = 8000;
    let res;
    try {
      res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `sync-4999-${Date.now()}`)
        .send({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254700000007' });
    } finally {
      config.sandboxCallbackDelayMs = saved;
    }
    expect(res.body.data.status).toBe('pending');
    const { id } = res.body.data;

    // A second query (the re-checks of a payment are one after another: the first answer has been applied), or the payment moved.
    const checked = await eventually(async () => {
      const [row] = await t.sql<{ status: string; queries: number; open: boolean }>(
        `SELECT p.status, s.query_count AS queries, s.completes_at > now() AS open
         FROM payments p JOIN sandbox_mobilemoney_stk_requests s ON s.checkout_request_id = p.provider_data->>'checkoutRequestId' WHERE p.id = $1`, [id]);
      return row!.status !== 'pending' || row!.queries >= 2 ? row : null;
    }, 10_000, 'a first re-check answered');
    expect(checked).toMatchObject({ status: 'pending', open: true }); // asked while the prompt was open: every answer so far was 4999

    await eventually(async () => (await t.sql<{ status: string }>('SELECT status FROM payments WHERE id = $1', [id]))[0]!.status === 'completed', 20_000, 'settlement');
    const transitions = await t.sql<{ to_status: string }>('SELECT to_status FROM payment_transitions WHERE payment_id = $1 AND accepted ORDER BY id', [id]);
    expect(transitions.map((r) => r.to_status)).toEqual(['pending', 'completed']);
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === id));
    expect(receiver.events('payment.failed').filter((e) => e.json.data.payment_id === id)).toEqual([]);
  });

  it('stops re-checking after the last interval of the schedule; /metrics counts no payment that waits for the customer or for its judging pull', async () => {
    // A provider call that gets no answer on a loaded CI host gives up in 3 s (and counts its check), not the
    // tests' 10 s: a CI run once saw no STK query of the push answered within the 10 s this waits.
    const shortSchedule = await startTestService({ SANDBOX_CALLBACK_DELAY_MS: '120000', STATUS_SYNC_SCHEDULE: '100ms,100ms', STATUS_SYNC_POLL_INTERVAL: '100ms', PROVIDER_TIMEOUT_MS: '3000' });
    try {
      const unresolved = async (provider: string) => total(await scrapeMetrics(shortSchedule), 'payments_unresolved', { provider });
      expect([await unresolved('mobilemoney'), await unresolved('cardpay')]).toEqual([0, 0]);
      const m = await shortSchedule.createMerchant('Patient Shop');
      await shortSchedule.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({
        provider: 'mobilemoney',
        mobilemoney: { env: 'sandbox', consumer_key: 'patient-key', consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' },
      }).expect(200);
      await shortSchedule.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_patient_0001' } }).expect(200);
      const pay = (body: object) => shortSchedule.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `patient-${Date.now()}-${Math.random()}`).send(body);
      // The operator never answers this push; this card payment waits for its holder's 3-D Secure.
      const silent = await pay({ provider: 'mobilemoney', amount: '10', currency: 'KES', phone: '254700000003' });
      const authenticating = await pay({ provider: 'cardpay', amount: '10.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired' });
      expect(authenticating.body.data).toMatchObject({ status: 'pending', next_action: { type: 'redirect' } });
      // The push's status query never gives the outcome: once the schedule has run out it keeps one more
      // check, its judging pull 2 h (and a minute) after its creation, as a push whose answer was lost does.
      // The card payment keeps one too, a minute after the 24 h that end a checkout left at 3-D Secure
      // (before: none, and nothing ever read the intent again).
      const rows = await eventually(async () => {
        const r = await shortSchedule.sql<{ status: string; sync_attempts: number; next_sync_at: Date | null; judged_at: Date }>(
          `SELECT status, sync_attempts, next_sync_at,
                  created_at + CASE provider WHEN 'cardpay' THEN interval '24 hours 1 minute' ELSE interval '2 hours 1 minute' END AS judged_at
             FROM payments WHERE id = ANY($1) ORDER BY provider DESC`,
          [[silent.body.data.id, authenticating.body.data.id]]);
        return r.every((p) => p.sync_attempts === 2 && p.next_sync_at?.getTime() === p.judged_at.getTime()) ? r : null;
      }, 20_000, 'the schedule to run out');
      expect(rows.map(({ judged_at: _, ...p }) => p)).toEqual([
        { status: 'pending', sync_attempts: 2, next_sync_at: rows[0]!.judged_at },
        { status: 'pending', sync_attempts: 2, next_sync_at: rows[1]!.judged_at },
      ]);
      // payments_unresolved is the operator's signal that nothing of the service will settle a payment (the
      // gauge is read at most every 5 s): neither a push awaiting its judging pull nor a checkout awaiting its customer.
      await new Promise((r) => setTimeout(r, 5_500));
      expect([await unresolved('mobilemoney'), await unresolved('cardpay')]).toEqual([0, 0]);
    } finally {
      await shortSchedule.stop();
    }
  }, 60_000);

  it('one run of the job re-checks every due payment, batch after batch: a backlog of 60 is not cut to one claim of 25', async () => {
    // An hour between the job's runs (it runs once at boot) and between a payment's re-checks: every
    // re-check below is the one run the test asks for. These card payments wait for 3-D Secure, so each
    // re-check leaves them pending with one more attempt. A run lasts at most half the jobs' lock lifetime:
    // 30 s here (5 s by default in tests), room for 60 re-checks on a loaded machine.
    const s = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    try {
      const ids = await dueCardBacklog(s, 'sk_test_backlog_0001');

      expect(await runJobOnce(s, SYNC_PAYMENTS_JOB)).toBe(1);
      const attempts = await s.sql('SELECT sync_attempts, count(*)::int AS payments FROM payments WHERE id = ANY($1) GROUP BY sync_attempts', [ids]);
      expect(attempts).toEqual([{ sync_attempts: 1, payments: 60 }]); // was 25 re-checked, 35 left for the next runs
    } finally {
      await s.stop();
    }
  }, 120_000);
});

describe('a checkout the customer abandons', () => {
  // Checks the tests run themselves (the worker's poll is an hour away: its run at boot is over before
  // anything is made here), on a schedule that runs out after two of them. cardpay is reached through a
  // stub that counts the cancels each intent is sent.
  let s: TestService;
  let m: { apiKey: string };
  let cardpay: CountedCancels;
  const SECRET_KEY = 'sk_test_abandoned_checkout';
  beforeAll(async () => {
    cardpay = new CountedCancels();
    const cardpayUrl = await cardpay.start();
    s = await startTestService({ CARDPAY_BASE_URL: `${cardpayUrl}/sandbox/cardpay`, STATUS_SYNC_SCHEDULE: '100ms,100ms', STATUS_SYNC_POLL_INTERVAL: '1h' });
    cardpay.target = s.baseUrl;
    await jobRunFinished(s, SYNC_PAYMENTS_JOB);
    await jobRunFinished(s, ABANDON_FAILED_JOB);
    m = await s.createMerchant('Abandoned Checkout Shop');
    await s.http.put('/v1/merchant/webhook').set('X-API-Key', m.apiKey).send({ webhook_url: receiver.url }).expect(200);
    // Its own webhook secret and no endpoint registered: no provider event reaches the service, only its checks.
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: SECRET_KEY, webhook_secret: 'whsec_abandoned_checkout' } }).expect(200);
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey)
      .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'abandoned-wallet-client', client_secret: 'abandoned-wallet-secret' } }).expect(200);
  }, 60_000);
  afterAll(async () => {
    await s.stop();
    await cardpay.stop();
  });

  let n = 0;
  const pay = async (body: object) => {
    const res = await s.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `abandoned-${Date.now()}-${++n}`).send(body).expect(201);
    expect(res.body.data).toMatchObject({ status: 'pending', next_action: { type: 'redirect' } });
    return res.body.data as { id: string; provider_ref: string; next_action: { url: string } };
  };
  const awaitingThreeDs = () => pay({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/return' });
  /** As if created `hours` ago (the status sync reads the clock): created_at never changes, so its guard is lifted for this one update. */
  const ageBy = (id: string, hours: number) => s.sql(`ALTER TABLE payments DISABLE TRIGGER payments_keep_merchant_and_created_at;
    UPDATE payments SET created_at = created_at - interval '${Number(hours)} hours' WHERE id = '${id}';
    ALTER TABLE payments ENABLE TRIGGER payments_keep_merchant_and_created_at;`);
  const syncOne = (id: string) => s.inContext(() => s.service.container.services.statusSync.syncOne(id));
  const paymentOf = async (id: string) => (await s.http.get(`/v1/payments/${id}`).set('X-API-Key', m.apiKey).expect(200)).body.data;
  const intentAt = async (id: string) => (await s.http.get(`/sandbox/cardpay/v1/payment_intents/${id}`).set('Authorization', `Bearer ${SECRET_KEY}`).expect(200)).body;
  const events = (type: string, id: string) => receiver.events(type).filter((e) => e.json.data.payment_id === id);
  /** The customer at the 3-D Secure page the payment answered, settling it without a browser. */
  const authenticate = (url: string, outcome: 'complete' | 'fail') => fetch(`${url}${url.includes('?') ? '&' : '?'}auto=${outcome}`, { redirect: 'manual' });

  it('cardpay: 3-D Secure still unfinished 24 h after creation: the check then cancels the intent; failed, one payment.failed, and the 3-D Secure page charges nothing', async () => {
    const p = await awaitingThreeDs();
    await ageBy(p.id, 25);
    await syncOne(p.id);
    expect(await paymentOf(p.id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('did not complete authentication within 24 h') });
    await eventually(() => events('payment.failed', p.id)[0], 10_000, 'payment.failed');
    expect(await intentAt(p.provider_ref)).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned', amount_received: 0 });
    // The customer comes back to the page later: the intent can no longer be charged.
    await authenticate(p.next_action.url, 'complete');
    expect(await intentAt(p.provider_ref)).toMatchObject({ status: 'canceled', amount_received: 0, latest_charge: null });
    expect(await paymentOf(p.id)).toMatchObject({ status: 'failed' });
    expect(events('payment.failed', p.id)).toHaveLength(1);
    expect(events('payment.completed', p.id)).toEqual([]);
  });

  it('cardpay: that cancel is the only one: the payment it fails is not left to the cancel of failed payments, whose run sends none', async () => {
    const p = await awaitingThreeDs();
    await ageBy(p.id, 25);
    await syncOne(p.id);
    expect(await paymentOf(p.id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('within 24 h') });
    expect(cardpay.cancelsOf(p.provider_ref)).toBe(1);
    const [row] = await s.sql<{ abandon_due_at: Date | null }>('SELECT abandon_due_at FROM payments WHERE id = $1', [p.id]);
    await runJobOnce(s, ABANDON_FAILED_JOB);
    // Was marked, and the job sent a second cancel (refused payment_intent_unexpected_state, then a read).
    expect({ markedForTheJob: row!.abandon_due_at, cancels: cardpay.cancelsOf(p.provider_ref) }).toEqual({ markedForTheJob: null, cancels: 1 });
  });

  it("cardpay: an intent the merchant cancelled in the dashboard meanwhile (no event reached us) fails with the provider's reason, not as abandoned", async () => {
    const p = await awaitingThreeDs();
    await s.http.post(`/sandbox/cardpay/v1/payment_intents/${p.provider_ref}/cancel`).set('Authorization', `Bearer ${SECRET_KEY}`)
      .type('form').send({ cancellation_reason: 'requested_by_customer' }).expect(200);
    await ageBy(p.id, 25);
    await syncOne(p.id);
    expect(await paymentOf(p.id)).toMatchObject({ status: 'failed', failure_reason: 'Payment canceled (requested_by_customer)' });
    expect(await intentAt(p.provider_ref)).toMatchObject({ status: 'canceled', cancellation_reason: 'requested_by_customer' });
  });

  it('cardpay: 3-D Secure failed (no event reached us): the cancel ends the intent, and the payment fails with the decline, not as abandoned', async () => {
    const p = await awaitingThreeDs();
    await authenticate(p.next_action.url, 'fail');
    const declined = await intentAt(p.provider_ref);
    expect(declined).toMatchObject({ status: 'requires_payment_method', last_payment_error: { message: expect.any(String) } });
    await ageBy(p.id, 25);
    await syncOne(p.id);
    expect(await intentAt(p.provider_ref)).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned' });
    expect(await paymentOf(p.id)).toMatchObject({ status: 'failed', failure_reason: declined.last_payment_error.message });
  });

  it('cardpay: the customer finished 3-D Secure just before that check (its event not here): the payment completes as any success, once', async () => {
    const p = await awaitingThreeDs();
    await authenticate(p.next_action.url, 'complete');
    expect(await intentAt(p.provider_ref)).toMatchObject({ status: 'succeeded' });
    await ageBy(p.id, 25);
    await syncOne(p.id);
    expect(await paymentOf(p.id)).toMatchObject({ status: 'completed', amount: '25.00', currency: 'USD', failure_reason: null });
    await eventually(() => events('payment.completed', p.id)[0], 10_000, 'payment.completed');
    expect(await intentAt(p.provider_ref)).toMatchObject({ status: 'succeeded', amount_received: 2500 });
    expect(events('payment.completed', p.id)).toHaveLength(1);
    expect(events('payment.failed', p.id)).toEqual([]);
  });

  it('cardpay: a cancel that gets no answer (the provider down) leaves the payment pending; the next check cancels it', async () => {
    const p = await awaitingThreeDs();
    await ageBy(p.id, 25);
    await s.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      await syncOne(p.id);
    } finally {
      await s.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    expect(await paymentOf(p.id)).toMatchObject({ status: 'pending', next_action: { type: 'redirect' } });
    expect(await intentAt(p.provider_ref)).toMatchObject({ status: 'requires_action' });
    await syncOne(p.id);
    expect(await paymentOf(p.id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('within 24 h') });
    expect(await intentAt(p.provider_ref)).toMatchObject({ status: 'canceled' });
  });

  it("walletpay: an order still awaiting the buyer 75 h after its creation, its checks over, is counted in payments_unresolved (README: the operator's)", async () => {
    const unresolved = async () => total(await scrapeMetrics(s), 'payments_unresolved', { provider: 'walletpay' });
    const before = await unresolved();
    const p = await pay({ provider: 'walletpay', amount: '18.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    await ageBy(p.id, 76);
    // The order is still at PayPal (the simulator's is not aged): both checks of the schedule leave it pending,
    // and none is due after them (past the longest an order lives, 75 h).
    await syncOne(p.id);
    await syncOne(p.id);
    const [row] = await s.sql<{ status: string; next_sync_at: Date | null; next_action: unknown }>('SELECT status, next_sync_at, next_action FROM payments WHERE id = $1', [p.id]);
    expect(row).toMatchObject({ status: 'pending', next_sync_at: null, next_action: { type: 'redirect' } });
    // The gauge is read at most every 5 s.
    await new Promise((r) => setTimeout(r, 5_500));
    expect(await unresolved()).toBe(before + 1); // was not counted: it carries a next_action
  }, 30_000);
});

describe('a backlog while the provider fails', () => {
  it('cardpay answering 500: after a batch whose every check met the outage, cardpay is not asked again in the run, instead of going through the whole backlog', async () => {
    // A run would otherwise claim batch after batch for its whole interval, 5 calls at a time, on a provider
    // that is down, and spend a schedule step of every due payment on the outage.
    const s = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    try {
      const ids = await dueCardBacklog(s, 'sk_test_backlog_outage');
      await s.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);

      expect(await runJobOnce(s, SYNC_PAYMENTS_JOB)).toBe(1);
      const rechecked = await recheckedOf(s, ids);
      expect(rechecked).toBeGreaterThan(0);
      expect(rechecked).toBeLessThanOrEqual(25); // one batch; was 60
    } finally {
      await s.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' });
      await s.stop();
    }
  }, 120_000);

  it("cardpay answering 500: the run goes on with the other providers' due payments (walletpay's, due after a cardpay backlog)", async () => {
    const s = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    try {
      const cardIds = await dueCardBacklog(s, 'sk_test_backlog_outage_others');
      const { apiKey } = await s.createMerchant('Backlog Wallet Shop');
      await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
        .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'backlog-wallet-client', client_secret: 'backlog-wallet-secret' } }).expect(200);
      const walletIds: string[] = [];
      for (let i = 0; i < 10; i++) {
        const res = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `backlog-wallet-${i}`)
          .send({ provider: 'walletpay', amount: '10.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' }).expect(201);
        expect(res.body.data.status).toBe('pending'); // awaiting the buyer's approval: each re-check leaves it pending
        walletIds.push(res.body.data.id);
      }
      // The card backlog is due first (claims go by next_sync_at across providers), the wallet payments after it.
      await s.sql("UPDATE payments SET next_sync_at = now() - interval '1 minute' WHERE id = ANY($1)", [cardIds]);
      await s.sql('UPDATE payments SET next_sync_at = now() WHERE id = ANY($1)', [walletIds]);
      await s.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);

      expect(await runJobOnce(s, SYNC_PAYMENTS_JOB)).toBe(1);
      expect(await recheckedOf(s, walletIds)).toBe(10); // was 0: the run ended after the first batch of card checks
      const cardRechecked = await recheckedOf(s, cardIds);
      expect(cardRechecked).toBeGreaterThan(0);
      expect(cardRechecked).toBeLessThanOrEqual(25); // cardpay: one batch, then skipped for the rest of the run
    } finally {
      await s.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' });
      await s.stop();
    }
  }, 120_000);

  it("cardpay answering 429: that account is not asked again in the run (only the calls already under way); another merchant's backlog is still re-checked", async () => {
    const stub = new RateLimitedReads();
    const stubUrl = await stub.start();
    const s = await startTestService({ CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay`, STATUS_SYNC_SCHEDULE: '1h', STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    stub.target = s.baseUrl;
    try {
      const limitedIds = await dueCardBacklog(s, 'sk_test_backlog_429_limited', 30);
      const otherIds = await dueCardBacklog(s, 'sk_test_backlog_429_other', 30);
      // The limited merchant's rows first, as the oldest due.
      await s.sql("UPDATE payments SET next_sync_at = now() - interval '1 minute' WHERE id = ANY($1)", [limitedIds]);
      stub.limiting = true;
      stub.onlyKey = 'sk_test_backlog_429_limited';

      expect(await runJobOnce(s, SYNC_PAYMENTS_JOB)).toBe(1);
      expect(stub.limited).toBeGreaterThan(0);
      expect(stub.limited).toBeLessThanOrEqual(5);
      expect(await recheckedOf(s, limitedIds)).toBe(stub.limited);
      expect(await recheckedOf(s, otherIds)).toBe(30); // was 0: the first 429 stopped every merchant's checks
    } finally {
      await s.stop();
      await stub.stop();
    }
  }, 180_000);

  it('cardpay answering 429: no further call to that account is started in the run', async () => {
    const stub = new RateLimitedReads();
    const stubUrl = await stub.start();
    const s = await startTestService({ CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay`, STATUS_SYNC_SCHEDULE: '1h', STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    stub.target = s.baseUrl;
    try {
      const ids = await dueCardBacklog(s, 'sk_test_backlog_429');
      stub.limiting = true;

      expect(await runJobOnce(s, SYNC_PAYMENTS_JOB)).toBe(1);
      // Only the calls already under way when the first 429 came (5 at a time); was 60 (25 with the run stopped after the batch).
      expect(stub.limited).toBeGreaterThan(0);
      expect(stub.limited).toBeLessThanOrEqual(5);
      expect(await recheckedOf(s, ids)).toBe(stub.limited);
    } finally {
      await s.stop();
      await stub.stop();
    }
  }, 120_000);
});

/** In front of the cardpay simulator: counts the cancels sent to each intent (POST /v1/payment_intents/:id/cancel). */
class CountedCancels extends ForwardingStub {
  private readonly cancels = new Map<string, number>();

  cancelsOf(intentId: string): number {
    return this.cancels.get(intentId) ?? 0;
  }

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const intent = req.method === 'POST' ? /\/v1\/payment_intents\/([^/?]+)\/cancel/.exec(req.url)?.[1] : undefined;
    if (intent) this.cancels.set(intent, this.cancelsOf(intent) + 1);
    return forward();
  }
}

/** In front of the cardpay simulator: while `limiting`, every read of a payment intent is answered 429 as Stripe's rate limiter does, and counted. */
class RateLimitedReads extends ForwardingStub {
  limiting = false;
  limited = 0;
  /** Only the account of this secret key is limited (Stripe limits per account); every account when unset. */
  onlyKey: string | undefined;

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (!this.limiting || req.method !== 'GET' || !/\/v1\/payment_intents\/[^/?]+/.test(req.url)) return forward();
    if (this.onlyKey && !String(req.headers.authorization ?? '').includes(this.onlyKey)) return forward();
    this.limited++;
    return jsonAnswer(429, { error: { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests hit the API too quickly.' } });
  }
}

describe('a worker stopping during a run', () => {
  it('starts no further check once the stop begins (cardpay hanging): only the checks under way finish, and the run ends inside the stop\'s budget', async () => {
    // Against a provider that hangs, each check waits PROVIDER_TIMEOUT_MS: carrying on with the batch (5 lanes
    // x 5 rows) would take the stop past the jobs' share of its budget (SHUTDOWN_TIMEOUT_MS - 3 s). The
    // simulator's held answers end with the stop (its process goes away), so here what shows is how many
    // checks start after it began: none.
    const shutdownTimeoutMs = 40_000;
    const s = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', STATUS_SYNC_POLL_INTERVAL: '1h', SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs) }, { agendaLockLifetimeMs: 60_000 });
    let stopped = false;
    try {
      const ids = await dueCardBacklog(s, 'sk_test_backlog_stop');
      await s.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'hang' }).expect(200);
      const { agenda, sandboxDeps } = s.service.container;
      await agenda.now(SYNC_PAYMENTS_JOB, {});
      // The run's first checks are under way: 5 calls the simulator holds unanswered.
      await eventually(() => sandboxDeps.heldAnswers.size === 5, 20_000, 'five checks waiting on cardpay');

      const began = Date.now();
      await s.service.stop();
      stopped = true;
      // The jobs' share of the budget: a run still going then is cut off, not finished.
      expect(Date.now() - began).toBeLessThan(shutdownTimeoutMs - 3_000);
      // Only the 5 checks under way when the stop began were made (each counts an attempt); was 25, the whole batch.
      expect(await recheckedOf(s, ids)).toBe(5);
    } finally {
      if (!stopped) await s.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' });
      await s.stop();
    }
  }, 180_000);
});