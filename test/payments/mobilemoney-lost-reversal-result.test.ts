import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { MAX_REVERSAL_RESENDS, RESEND_AFTER_REPORT_CHECKS } from '../../server/domain/refunds/refund-sync.service.js';
import { callbackToken } from '../../server/providers/mobilemoney/callback.js';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { behindOperatorStub } from '../support/operator-watch.js';
import { runCli } from '../support/processes.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { TEST_ENCRYPTION_KEY, startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

// Each case walks a reversal through several status checks and repeats: on a loaded 2-CPU CI run
// that takes over jest's default 30 s.
jest.setTimeout(120_000);

/**
 * A mobile-money reversal the operator acknowledged but whose result callback was lost. The refund sync
 * asks the operator's transaction-status API about the request, whose report can say that a reversal
 * completed but never that it was refused; after RESEND_AFTER_REPORT_CHECKS reports without an outcome
 * the sync sends the reversal again. From then on only a success settles the refund — "0" or R000001
 * "already reversed" from any of its requests: a refusal of one request says nothing about another,
 * which may have returned the money. The simulator loses results (lose-results) or holds them until
 * released (hold-results, release-results: a result that arrives late); the sync's checks are made by
 * the test, one at a time (the schedule's first check is an hour away).
 */
let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;

const CREDS = {
  env: 'sandbox', consumer_key: 'lost-reversal-key', consumer_secret: 'lost-reversal-secret',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
};
const setCredentials = (extra: Record<string, string> = {}) =>
  t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: { ...CREDS, ...extra } }).expect(200);

beforeAll(async () => {
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Lost Reversal Result Duka'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await setCredentials();
});
afterEach(async () => {
  // Nothing a test left held or to lose reaches the next one (a failed test must not make the next fail).
  await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count: 0 });
  await t.http.post('/sandbox/mobilemoney/_control/hold-results').send({ count: 0 });
  await t.http.post('/sandbox/mobilemoney/_control/lose-answers').send({ count: 0 });
  await t.http.post('/sandbox/mobilemoney/_control/stall-requests').send({ count: 0 });
  await t.http.post('/sandbox/mobilemoney/_control/refuse-stalled').send({});
  await t.sql('DELETE FROM sandbox_held_results');
  await setCredentials();
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const getRefund = async (id: string) => (await t.http.get(`/v1/refunds/${id}`).set('X-API-Key', key).expect(200)).body.data;
const refund = (paymentId: string) => t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: paymentId });

async function paid(amount: string): Promise<{ id: string; receipt: string }> {
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `lost-reversal-${++n}`)
    .send({ provider: 'mobilemoney', currency: 'KES', amount, phone: '254708374149' }).expect(201);
  const done = await eventually(async () => {
    const p = await getPayment(res.body.data.id);
    return p.status === 'completed' ? p : null;
  }, 15_000, 'the push completed');
  return { id: done.id, receipt: done.provider_ref };
}

const control = async () =>
  (await t.sql<{ lost_results: number; held_results: number }>(`SELECT lost_results, held_results FROM sandbox_controls WHERE provider = 'mobilemoney'`))[0]!;
const loseResults = async (count: number) => {
  await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count }).expect(200);
};
/** The operator carries out the next `count` reversal (or status) requests and their acknowledgements are lost: the connection drops. */
const loseAnswers = async (count: number) => {
  await t.http.post('/sandbox/mobilemoney/_control/lose-answers').send({ count }).expect(200);
};
const untilLost = (what: string) => eventually(async () => ((await control()).lost_results === 0 ? true : null), 20_000, what);
const holdResults = async (count: number) => {
  await t.http.post('/sandbox/mobilemoney/_control/hold-results').send({ count }).expect(200);
};
const heldResults = async () => (await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM sandbox_held_results WHERE provider = 'mobilemoney'`))[0]!.n;
const untilHeld = (count: number, what: string) => eventually(async () => ((await heldResults()) === count ? true : null), 20_000, what);
/** The operator sends the result it held longest now (it arrives late); answered once our endpoint answered it. */
const releaseOne = async () => (await t.http.post('/sandbox/mobilemoney/_control/release-results').send({ count: 1 }).expect(200)).body as { released: number; statuses: number[] };

/** One check of the refund sync, as the job makes it. */
const syncCheck = (refundId: string) => t.inContext(() => t.service.container.services.refundSync.syncOne(refundId));

/** The status reports the sync asked for about one request of the refund, oldest first. */
const reportsAsked = (refundId: string, request: string) =>
  t.sql<{ code: string; confirms: string; result_code: string | null }>(
    'SELECT code, confirms, result_code FROM provider_status_queries WHERE refund_id = $1 AND code = $2 ORDER BY created_at', [refundId, request]);

/** Every reversal request the operator (the simulator's own table) received for a receipt, oldest first. */
const reversalsAtOperator = (receipt: string) =>
  t.sql<{ originator_conversation_id: string; result_code: string }>(
    'SELECT originator_conversation_id, result_code FROM sandbox_mobilemoney_reversals WHERE transaction_id = $1 ORDER BY created_at', [receipt]);

const refundRow = async (refundId: string) =>
  (await t.sql<{ status: string; provider_ref: string | null; report_checks: number; reversal_resends: number; earlier_provider_refs: string[] }>(
    'SELECT status, provider_ref, report_checks, reversal_resends, earlier_provider_refs FROM refunds WHERE id = $1', [refundId]))[0]!;

/** The refusals recorded but not applied (a reversal sent again), oldest first. */
const refusalsKept = (refundId: string) =>
  t.sql<{ trigger: string; note: string }>(
    `SELECT trigger, note FROM payment_transitions WHERE refund_id = $1 AND subject = 'refund' AND from_status = 'pending' AND to_status = 'failed' AND NOT accepted ORDER BY id`, [refundId]);

/** The merchant events written for the payment (the outbox), oldest first. */
const eventsOf = async (paymentId: string) => (await t.sql<{ type: string }>('SELECT type FROM events WHERE payment_id = $1 ORDER BY created_at, id', [paymentId])).map((e) => e.type);

/** The accepted moves recorded after the payment completed (its refunds', its own), with what applied them. */
const movesAfterPayment = (paymentId: string) =>
  t.sql<{ subject: string; from_status: string; to_status: string; trigger: string }>(
    `SELECT subject, from_status, to_status, trigger FROM payment_transitions WHERE payment_id = $1 AND accepted
     AND from_status IS NOT NULL AND NOT (subject = 'payment' AND from_status = 'pending') ORDER BY id`, [paymentId]);

const refundSettled = (refundId: string, status: 'completed' | 'failed') =>
  eventually(async () => {
    const r = await getRefund(refundId);
    return r.status === status ? r : null;
  }, 30_000, `the refund ${status}`);

/**
 * RESEND_AFTER_REPORT_CHECKS checks about `request`, each one's report answered that no such reversal
 * exists (the operator keeps no transaction for a refused request). The refund stays pending, its
 * request not sent again yet.
 */
async function reportsFindNothing(refundId: string, request: string): Promise<void> {
  for (let check = 1; check <= RESEND_AFTER_REPORT_CHECKS; check++) {
    await syncCheck(refundId);
    await eventually(async () => ((await reportsAsked(refundId, request)).filter((r) => r.result_code !== null).length === check ? true : null), 20_000, `report ${check} answered`);
    expect(await refundRow(refundId)).toMatchObject({ status: 'pending', provider_ref: request, report_checks: check });
  }
  expect(await reportsAsked(refundId, request)).toEqual(
    Array.from({ length: RESEND_AFTER_REPORT_CHECKS }, () => ({ code: request, confirms: 'refund-sync', result_code: 'R000002' })));
}

/** A refund of a 99999 KES payment, which the simulator's shortcode cannot cover: result 1, insufficient balance. Its result is lost. */
async function refusedReversalResultLost(): Promise<{ payment: { id: string; receipt: string }; refundId: string; request: string }> {
  const payment = await paid('99999');
  await loseResults(1);
  const res = await refund(payment.id);
  expect(res.status).toBe(201);
  expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: expect.any(String) });
  await untilLost("the refusal's result lost");
  expect(await reversalsAtOperator(payment.receipt)).toEqual([{ originator_conversation_id: res.body.data.provider_ref, result_code: '1' }]);
  return { payment, refundId: res.body.data.id, request: res.body.data.provider_ref };
}

/** The check that sends the reversal again; returns the repeat's reference (now the refund's), once the operator received it. */
async function sendAgain(refundId: string, receipt: string, earlier: string[]): Promise<string> {
  const before = (await reversalsAtOperator(receipt)).length;
  await syncCheck(refundId);
  const atOperator = await reversalsAtOperator(receipt);
  expect(atOperator).toHaveLength(before + 1);
  const repeat = atOperator[before]!.originator_conversation_id;
  expect(await refundRow(refundId)).toMatchObject({ provider_ref: repeat, report_checks: 0, reversal_resends: earlier.length, earlier_provider_refs: earlier });
  return repeat;
}

/** A refund (201, pending) sent while the operator loses the next `lost` results: its id and its first request's OriginatorConversationID. */
async function refundWithResultsLost(paymentId: string, lost: number): Promise<{ refundId: string; first: string }> {
  await loseResults(lost);
  const res = await refund(paymentId);
  expect(res.status).toBe(201);
  return { refundId: res.body.data.id as string, first: res.body.data.provider_ref as string };
}

/**
 * The refund of all of `payment` completed by its repeat `repeat` (answered R000001 "already reversed"),
 * the payment reversed with payment.reversed sent, and one reversal moved money at the operator: `first`'s.
 */
async function expectReversedOnceByTheRepeat(refundId: string, payment: { id: string; receipt: string }, first: string, repeat: string): Promise<void> {
  const completed = await refundSettled(refundId, 'completed');
  expect(completed).toMatchObject({ amount: '100.00', provider_ref: repeat });
  expect(await getPayment(payment.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
  const event = await eventually(() => receiver.events('payment.reversed').find((e) => e.json.data.refund_id === refundId), 20_000, 'payment.reversed');
  expect(event.json.data).toMatchObject({ payment_id: payment.id, status: 'reversed', amount_refunded: '100.00' });
  expect(await reversalsAtOperator(payment.receipt)).toEqual([
    { originator_conversation_id: first, result_code: '0' },
    { originator_conversation_id: repeat, result_code: 'R000001' },
  ]);
}

describe('a reversal acknowledged by the operator whose result callback was lost', () => {
  it('done at the operator: the repeat is answered R000001 "already reversed", the refund completes (payment.reversed) and the receipt was reversed once', async () => {
    const p = await paid('100');
    // The reversal's result is lost, and so is the result of the first status report asked about it.
    const { refundId, first } = await refundWithResultsLost(p.id, 2);
    await eventually(async () => ((await control()).lost_results === 1 ? true : null), 20_000, "the reversal's result lost");
    expect(await reversalsAtOperator(p.receipt)).toEqual([{ originator_conversation_id: first, result_code: '0' }]);

    await syncCheck(refundId);
    await untilLost("the status report's result lost");
    // The later checks find that report still open (unanswered): nothing more is asked, and no outcome came.
    for (let check = 2; check <= RESEND_AFTER_REPORT_CHECKS; check++) await syncCheck(refundId);
    expect(await reportsAsked(refundId, first)).toEqual([{ code: first, confirms: 'refund-sync', result_code: null }]);
    expect(await refundRow(refundId)).toMatchObject({ status: 'pending', provider_ref: first, report_checks: RESEND_AFTER_REPORT_CHECKS, reversal_resends: 0 });

    // The next check sends the reversal again: "already reversed" completes the refund.
    const repeat = await sendAgain(refundId, p.receipt, [first]);
    await expectReversedOnceByTheRepeat(refundId, p, first, repeat);
    expect(await movesAfterPayment(p.id)).toEqual([
      { subject: 'refund', from_status: 'pending', to_status: 'completed', trigger: 'callback:reversal' },
      { subject: 'payment', from_status: 'completed', to_status: 'reversed', trigger: 'callback:reversal' },
    ]);
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
  });

  it('refused at the operator, and the repeats refused too: the refund stays pending (no refund.failed, a new refund still 409), each refusal recorded; after the last repeat it is left for an operator', async () => {
    const { payment: p, refundId, request: first } = await refusedReversalResultLost();
    await reportsFindNothing(refundId, first);

    const requests = [first];
    for (let resend = 1; resend <= MAX_REVERSAL_RESENDS; resend++) {
      const repeat = await sendAgain(refundId, p.receipt, requests);
      // The operator refuses the repeat too (insufficient balance), and that result arrives: recorded, not applied.
      await eventually(async () => ((await refusalsKept(refundId)).length === resend ? true : null), 20_000, `the refusal of repeat ${resend} recorded`);
      expect((await refusalsKept(refundId))[resend - 1]).toEqual({
        trigger: 'callback:reversal',
        note: `The balance is insufficient for the transaction. (ResultCode 1) (request ${repeat}): not applied; the reversal was sent again (${resend} repeat${resend === 1 ? '' : 's'}) and another of its requests may have reversed the payment, so only a success settles it`,
      });
      expect(await getRefund(refundId)).toMatchObject({ status: 'pending', failure_reason: null });
      expect(await eventsOf(p.id)).toEqual(['payment.completed']);
      // Still a pending reversal of the payment: no second one can be asked for (it could reverse twice).
      const again = await refund(p.id);
      expect(again.status).toBe(409);
      expect(again.body.error.message).toMatch(/a reversal of this payment is already pending/);
      requests.push(repeat);
      await reportsFindNothing(refundId, repeat);
    }

    // No more repeats: the checks only ask for reports, and say at warn that the refund is left for an operator.
    const last = requests.at(-1)!;
    await syncCheck(refundId);
    await eventually(async () => ((await reportsAsked(refundId, last)).every((r) => r.result_code !== null) ? true : null), 20_000, 'the last report answered');
    expect(await reportsAsked(refundId, last)).toHaveLength(RESEND_AFTER_REPORT_CHECKS + 1);
    const atOperator = await reversalsAtOperator(p.receipt);
    expect(atOperator.map((r) => r.originator_conversation_id)).toEqual(requests);
    expect(atOperator.every((r) => r.result_code === '1')).toBe(true);
    expect(await refundRow(refundId)).toMatchObject({ status: 'pending', reversal_resends: MAX_REVERSAL_RESENDS, earlier_provider_refs: requests.slice(0, -1) });
    const warned = readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.refundId === refundId && l.level === 40 && /the refund stays pending for an operator/.test(String(l.msg)));
    expect(warned.length).toBeGreaterThanOrEqual(1);
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    expect(receiver.events('refund.failed').filter((e) => e.json.data.refund_id === refundId)).toEqual([]);
  });

  it('refused at first (2001: a wrong initiator password, since corrected): its late refusal, arriving after the repeat was sent, changes nothing; the repeat\'s "0" completes the refund', async () => {
    const p = await paid('100');
    await setCredentials({ initiator_password: 'not-the-initiator-password' });
    await holdResults(1);
    const res = await refund(p.id);
    expect(res.status).toBe(201);
    const refundId = res.body.data.id as string;
    const first = res.body.data.provider_ref as string;
    await untilHeld(1, "the first request's refusal held");
    expect(await reversalsAtOperator(p.receipt)).toEqual([{ originator_conversation_id: first, result_code: '2001' }]);
    await setCredentials();

    await reportsFindNothing(refundId, first);
    // The repeat is carried out (the credentials are right now); its result is held too.
    await holdResults(1);
    const repeat = await sendAgain(refundId, p.receipt, [first]);
    await untilHeld(2, "the repeat's result held");
    expect(await reversalsAtOperator(p.receipt)).toEqual([
      { originator_conversation_id: first, result_code: '2001' },
      { originator_conversation_id: repeat, result_code: '0' },
    ]);

    // The first request's refusal arrives now: accepted (200) and recorded, but the refund stays pending.
    expect(await releaseOne()).toEqual({ provider: 'mobilemoney', released: 1, statuses: [200] });
    expect(await refusalsKept(refundId)).toEqual([{
      trigger: 'callback:reversal',
      note: `The initiator information is invalid. (ResultCode 2001) (request ${first}): not applied; the reversal was sent again (1 repeat) and another of its requests may have reversed the payment, so only a success settles it`,
    }]);
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending', failure_reason: null });
    expect(await eventsOf(p.id)).toEqual(['payment.completed']);

    // Then the repeat's success: the refund completes, and the payment is reversed.
    expect(await releaseOne()).toEqual({ provider: 'mobilemoney', released: 1, statuses: [200] });
    expect(await getRefund(refundId)).toMatchObject({ status: 'completed', amount: '100.00', provider_ref: repeat });
    expect(await getPayment(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
    expect(await movesAfterPayment(p.id)).toEqual([
      { subject: 'refund', from_status: 'pending', to_status: 'completed', trigger: 'callback:reversal' },
      { subject: 'payment', from_status: 'completed', to_status: 'reversed', trigger: 'callback:reversal' },
    ]);
  });

  it('done at first, its success arriving late, after the repeat was sent: it completes the refund (the first request is still the refund\'s); the repeat\'s R000001 then changes nothing', async () => {
    const p = await paid('100');
    await holdResults(1);
    const res = await refund(p.id);
    expect(res.status).toBe(201);
    const refundId = res.body.data.id as string;
    const first = res.body.data.provider_ref as string;
    await untilHeld(1, "the first request's success held");
    // The first report's result is lost; the later checks find it open.
    await loseResults(1);
    await syncCheck(refundId);
    await untilLost("the status report's result lost");
    for (let check = 2; check <= RESEND_AFTER_REPORT_CHECKS; check++) await syncCheck(refundId);

    await holdResults(1);
    const repeat = await sendAgain(refundId, p.receipt, [first]);
    await untilHeld(2, "the repeat's result held");

    expect(await releaseOne()).toEqual({ provider: 'mobilemoney', released: 1, statuses: [200] });
    expect(await getRefund(refundId)).toMatchObject({ status: 'completed', amount: '100.00' });
    expect(await getPayment(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });

    expect(await releaseOne()).toEqual({ provider: 'mobilemoney', released: 1, statuses: [200] });
    expect(await reversalsAtOperator(p.receipt)).toEqual([
      { originator_conversation_id: first, result_code: '0' },
      { originator_conversation_id: repeat, result_code: 'R000001' },
    ]);
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
    expect(await refusalsKept(refundId)).toEqual([]);
  });

  it('never sent again: the refusal of its only request fails the refund (refund.failed) and a new refund may be asked', async () => {
    const p = await paid('99999');
    const res = await refund(p.id);
    expect(res.status).toBe(201);
    const failed = await refundSettled(res.body.data.id, 'failed');
    expect(failed.failure_reason).toBe('The balance is insufficient for the transaction. (ResultCode 1)');
    expect(await refundRow(res.body.data.id)).toMatchObject({ reversal_resends: 0, earlier_provider_refs: [] });
    await eventually(() => receiver.events('refund.failed').find((e) => e.json.data.refund_id === res.body.data.id), 20_000, 'refund.failed');
    expect((await refund(p.id)).status).toBe(201);
  });

  it('the hold-results, release-results and lose-answers controls take a whole count', async () => {
    for (const count of [-1, 1.5, '2', null]) expect((await t.http.post('/sandbox/mobilemoney/_control/hold-results').send({ count })).status).toBe(400);
    for (const count of [-1, 1.5, '2', null]) expect((await t.http.post('/sandbox/mobilemoney/_control/lose-answers').send({ count })).status).toBe(400);
    expect((await t.http.post('/sandbox/mobilemoney/_control/lose-answers').send({ count: 0 }).expect(200)).body).toEqual({ provider: 'mobilemoney', lose_answers: 0 });
    for (const count of [0, -1, 1.5, '2', null]) expect((await t.http.post('/sandbox/mobilemoney/_control/release-results').send({ count })).status).toBe(400);
    expect((await t.http.post('/sandbox/mobilemoney/_control/hold-results').send({ count: 0 }).expect(200)).body).toEqual({ provider: 'mobilemoney', hold_results: 0 });
    expect((await t.http.post('/sandbox/mobilemoney/_control/release-results').send({ count: 1 }).expect(200)).body).toEqual({ provider: 'mobilemoney', released: 0, statuses: [] });
  });
});

describe('a reversal whose acknowledgement was lost, sent again by the refund sync', () => {
  it('the repeat refused (2001: the initiator password changed meanwhile): the refund stays pending, no refund.failed; the first request\'s success, arriving late at the refund\'s address, completes it', async () => {
    // Another payment's reversal, completed: its request's reference is that refund's.
    const other = await paid('100');
    const otherRefund = await refund(other.id);
    expect(otherRefund.status).toBe(201);
    const otherRequest = (await refundSettled(otherRefund.body.data.id, 'completed')).provider_ref as string;

    const p = await paid('100');
    // The operator carries out the reversal, but its acknowledgement is lost (the connection drops) and its result is held.
    await loseAnswers(1);
    await holdResults(1);
    const res = await refund(p.id);
    // Not answered: the refund is the answer, pending (no 502 that would read as "nothing happened").
    expect(res.status).toBe(201);
    expect(res.body.data.status).toBe('pending');
    const refundId = res.body.data.id as string;
    await untilHeld(1, "the first request's success held");
    const [first] = await reversalsAtOperator(p.receipt);
    expect(first).toEqual({ originator_conversation_id: expect.any(String), result_code: '0' });
    expect(await refundRow(refundId)).toMatchObject({ status: 'pending', provider_ref: null, reversal_resends: 0 });

    // The initiator password is changed meanwhile. The sync sends the unacknowledged reversal again: the
    // operator acknowledges the repeat and refuses it (2001), and that result arrives at once.
    await setCredentials({ initiator_password: 'not-the-initiator-password' });
    await syncCheck(refundId);
    const atOperator = await reversalsAtOperator(p.receipt);
    expect(atOperator).toEqual([first, { originator_conversation_id: expect.any(String), result_code: '2001' }]);
    const repeat = atOperator[1]!.originator_conversation_id;
    expect(await refundRow(refundId)).toMatchObject({ status: 'pending', provider_ref: repeat, reversal_resends: 1, earlier_provider_refs: [] });
    await eventually(async () => ((await refusalsKept(refundId)).length === 1 ? true : null), 20_000, "the repeat's refusal recorded");
    // Recorded, not applied: the first request may have returned the money (it did).
    expect(await refusalsKept(refundId)).toEqual([{
      trigger: 'callback:reversal',
      note: `The initiator information is invalid. (ResultCode 2001) (request ${repeat}): not applied; the reversal was sent again (1 repeat) and another of its requests may have reversed the payment, so only a success settles it`,
    }]);
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending', failure_reason: null });
    expect(await eventsOf(p.id)).toEqual(['payment.completed']);
    expect((await refund(p.id)).status).toBe(409);
    // A result at this refund's address naming another refund's request is not this refund's (401).
    const misrouted = await t.http.post(`/v1/webhooks/mobilemoney/reversal/result?ref=${refundId}&token=${callbackToken(CREDS.passkey, refundId)}`)
      .send({ Result: { ResultType: 0, ResultCode: 2001, ResultDesc: 'The initiator information is invalid.', OriginatorConversationID: otherRequest, ConversationID: 'AG_misrouted', TransactionID: 'MISROUTED01' } });
    expect(misrouted.status).toBe(401);
    expect(await refusalsKept(refundId)).toHaveLength(1);

    // The first request's success arrives now, at the refund's own address (its token), naming a request
    // whose reference was never recorded: it is one of the refund's, and completes it.
    expect(await releaseOne()).toEqual({ provider: 'mobilemoney', released: 1, statuses: [200] });
    expect(await getRefund(refundId)).toMatchObject({ status: 'completed', amount: '100.00', failure_reason: null });
    expect(await getPayment(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    const event = await eventually(() => receiver.events('payment.reversed').find((e) => e.json.data.refund_id === refundId), 20_000, 'payment.reversed');
    expect(event.json.data).toMatchObject({ payment_id: p.id, status: 'reversed', amount_refunded: '100.00' });
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
    expect(receiver.events('refund.failed').filter((e) => e.json.data.refund_id === refundId)).toEqual([]);
    expect(await movesAfterPayment(p.id)).toEqual([
      { subject: 'refund', from_status: 'pending', to_status: 'completed', trigger: 'callback:reversal' },
      { subject: 'payment', from_status: 'completed', to_status: 'reversed', trigger: 'callback:reversal' },
    ]);
    // One reversal at the operator moved money; the repeat was refused.
    expect(await reversalsAtOperator(p.receipt)).toEqual([first, { originator_conversation_id: repeat, result_code: '2001' }]);
  });
});

/**
 * In front of the mobilemoney simulator: refuses every transaction-status query as Daraja does when the
 * merchant's app lacks the Transaction Status product (401, no API product match); forwards the rest.
 */
class StatusQueriesRefused extends ForwardingStub {
  refused = 0;

  protected override intercept(req: StubRequest, forward: Forward): Promise<StubAnswer | 'hold' | 'cut'> {
    if (!req.url.endsWith('/mpesa/transactionstatus/v1/query')) return forward();
    this.refused++;
    return Promise.resolve(jsonAnswer(401, { requestId: `refused-${this.refused}`, errorCode: '401.003.01', errorMessage: 'Invalid API call as no apiproduct match found' }));
  }
}

describe('status reports the operator refuses', () => {
  it('every transaction-status query refused (401, no API product): each refusal counts as a check without an outcome, the reversal is sent again and its R000001 completes the refund (payment.reversed)', async () => {
    const p = await paid('100');
    const { refundId, first } = await refundWithResultsLost(p.id, 1);
    await untilLost("the reversal's result lost");
    expect(await reversalsAtOperator(p.receipt)).toEqual([{ originator_conversation_id: first, result_code: '0' }]);

    const operator = new StatusQueriesRefused();
    const repeat = await behindOperatorStub(t, operator, async () => {
      for (let check = 1; check <= RESEND_AFTER_REPORT_CHECKS; check++) {
        await syncCheck(refundId);
        expect(await refundRow(refundId)).toMatchObject({ status: 'pending', provider_ref: first, report_checks: check, reversal_resends: 0 });
      }
      // The next check sends the reversal again (the refused reports never reach the operator's queue).
      return sendAgain(refundId, p.receipt, [first]);
    });
    expect(operator.refused).toBe(RESEND_AFTER_REPORT_CHECKS);
    expect(await reportsAsked(refundId, first)).toEqual([]);

    await expectReversedOnceByTheRepeat(refundId, p, first, repeat);
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
  });
});

describe('after a repeat, the status reports ask about every request of the refund', () => {
  it('the first request done, its result and its report lost; the repeat answered R000001, its result lost too: a later check\'s report on the first request completes the refund', async () => {
    const p = await paid('100');
    // The first reversal's result is lost, and so is the result of the first status report about it.
    const { refundId, first } = await refundWithResultsLost(p.id, 2);
    await syncCheck(refundId);
    await untilLost("the reversal's result and its report's lost");
    for (let check = 2; check <= RESEND_AFTER_REPORT_CHECKS; check++) await syncCheck(refundId);
    expect(await reportsAsked(refundId, first)).toEqual([{ code: first, confirms: 'refund-sync', result_code: null }]);

    // The repeat is answered "already reversed", and that result is lost as well.
    await loseResults(1);
    const repeat = await sendAgain(refundId, p.receipt, [first]);
    await untilLost("the repeat's result lost");
    expect(await reversalsAtOperator(p.receipt)).toEqual([
      { originator_conversation_id: first, result_code: '0' },
      { originator_conversation_id: repeat, result_code: 'R000001' },
    ]);
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending' });

    // Later (the report about the first request no longer open), a check asks about the repeat — the
    // operator keeps no transaction for it — and about the first request, whose report finds the reversal.
    await t.sql(`UPDATE provider_status_queries SET created_at = created_at - interval '11 minutes' WHERE refund_id = $1`, [refundId]);
    await syncCheck(refundId);
    const completed = await refundSettled(refundId, 'completed');
    expect(completed).toMatchObject({ amount: '100.00', failure_reason: null });
    expect(await getPayment(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    expect(await reportsAsked(refundId, first)).toEqual([
      { code: first, confirms: 'refund-sync', result_code: null },
      { code: first, confirms: 'refund-sync', result_code: '0' },
    ]);
    expect(await movesAfterPayment(p.id)).toEqual([
      { subject: 'refund', from_status: 'pending', to_status: 'completed', trigger: 'confirmed:refund-sync' },
      { subject: 'payment', from_status: 'completed', to_status: 'reversed', trigger: 'confirmed:refund-sync' },
    ]);
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
  });
});

/** The refund sync's status query about `request` (our id and the operator's), once one was sent. */
async function reportQuery(refundId: string, request: string): Promise<{ id: string; ref: string }> {
  const [query] = await t.sql<{ id: string; ref: string }>(
    'SELECT id, provider_query_ref AS ref FROM provider_status_queries WHERE refund_id = $1 AND code = $2 AND provider_query_ref IS NOT NULL', [refundId, request]);
  expect(query).toBeDefined();
  return query!;
}

/** The operator posts to the status query's own address (its `ref` and token), as Daraja posts to the URLs it was given. */
const toQueryAddress = (query: { id: string }, route: 'result' | 'timeout', body: object) =>
  t.http.post(`/v1/webhooks/mobilemoney/transactionstatus/${route}?ref=${query.id}&token=${callbackToken(CREDS.passkey, query.id)}`).send(body);

describe("a status report's queue timeout", () => {
  it('the refund sync\'s report times out in the operator\'s queue, then its result comes: the notice leaves the query open, and the reported reversal completes the refund', async () => {
    const p = await paid('100');
    const { refundId, first } = await refundWithResultsLost(p.id, 1);
    await untilLost("the reversal's result lost");

    // The sync asks for a report; the operator first sends a queue-timeout notice, its result later.
    await holdResults(1);
    await syncCheck(refundId);
    await untilHeld(1, "the report's result held");
    const query = await reportQuery(refundId, first);
    const notice = await toQueryAddress(query, 'timeout', {
      Result: {
        ResultType: 1, ResultCode: '1037', ResultDesc: 'The request timed out in the queue before it was processed.',
        OriginatorConversationID: query.ref, ConversationID: 'AG_20261128_timeout', TransactionID: '',
      },
    });
    expect(notice.status).toBe(200);
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending' });
    expect(await t.sql('SELECT result_code, completed_at FROM provider_status_queries WHERE id = $1', [query.id])).toEqual([{ result_code: '1037', completed_at: null }]);

    expect(await releaseOne()).toEqual({ provider: 'mobilemoney', released: 1, statuses: [200] });
    expect(await getRefund(refundId)).toMatchObject({ status: 'completed', amount: '100.00' });
    expect(await getPayment(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    expect(await movesAfterPayment(p.id)).toEqual([
      { subject: 'refund', from_status: 'pending', to_status: 'completed', trigger: 'confirmed:refund-sync' },
      { subject: 'payment', from_status: 'completed', to_status: 'reversed', trigger: 'confirmed:refund-sync' },
    ]);
    await eventually(() => receiver.events('payment.reversed').find((e) => e.json.data.refund_id === refundId), 20_000, 'payment.reversed');
    // The first result wins: the same notice again (the operator retries) changes nothing.
    expect((await toQueryAddress(query, 'timeout', { Result: { ResultType: 1, ResultCode: '1037', ResultDesc: 'timed out', OriginatorConversationID: query.ref, ConversationID: 'AG_x', TransactionID: '' } })).status).toBe(200);
    expect(await t.sql('SELECT result_code FROM provider_status_queries WHERE id = $1 AND completed_at IS NOT NULL', [query.id])).toEqual([{ result_code: '0' }]);
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
  });
});

describe("a status report that describes the payment's own charge", () => {
  it("a Completed report at the refund's query address naming the payment's receipt (the original charge, of the same amount) does not complete the refund; a report of the reversal later does", async () => {
    const p = await paid('100');
    // The reversal is done at the operator; its result is lost, and so is the result of the first report about it.
    const { refundId, first } = await refundWithResultsLost(p.id, 2);
    await syncCheck(refundId);
    await untilLost("the reversal's result and its report's lost");
    const query = await reportQuery(refundId, first);

    // The operator answers that report with the payment itself: Completed, 100 KES, the payment's receipt.
    const charge = await toQueryAddress(query, 'result', {
      Result: {
        ResultType: 0, ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
        OriginatorConversationID: query.ref, ConversationID: 'AG_20261128_charge', TransactionID: 'MBN0000000',
        ResultParameters: { ResultParameter: [
          { Key: 'ReasonType', Value: 'Pay Bill Online' }, { Key: 'TransactionStatus', Value: 'Completed' },
          { Key: 'Amount', Value: 100 }, { Key: 'ReceiptNo', Value: p.receipt },
        ] },
      },
    });
    expect(charge.status).toBe(200);
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending', failure_reason: null });
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    expect(await eventsOf(p.id)).toEqual(['payment.completed']);
    expect(await t.sql(
      `SELECT trigger, note FROM payment_transitions WHERE refund_id = $1 AND subject = 'refund' AND from_status = 'pending' AND to_status = 'completed' AND NOT accepted`, [refundId],
    )).toEqual([{ trigger: 'confirmed:refund-sync', note: `the report describes transaction ${p.receipt}, the payment's own charge, not its reversal: not applied; the refund stays pending` }]);
    const warned = readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.refundId === refundId && l.level === 40 && /describes the payment's own charge/.test(String(l.msg)));
    expect(warned).toEqual([expect.objectContaining({ receipt: p.receipt, paymentId: p.id })]);

    // A later check's report (the first one answered) finds the reversal itself: the refund completes.
    await syncCheck(refundId);
    expect(await refundSettled(refundId, 'completed')).toMatchObject({ amount: '100.00' });
    expect(await getPayment(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
  });
});

describe('a first reversal request refused synchronously after the refund sync sent it again', () => {
  it('slow, then turned away (spike arrest) after the repeat was acknowledged: the refusal is recorded, not applied; the POST answers 201 pending, no refund.failed; the repeat\'s "0" completes it', async () => {
    const p = await paid('100');
    // The operator leaves the first reversal request unanswered (not carried out) for now.
    await t.http.post('/sandbox/mobilemoney/_control/stall-requests').send({ count: 1 }).expect(200);
    const posted = refund(p.id).then((r) => r);
    await eventually(async () => ((await t.sql<{ n: number }>('SELECT stalled_requests AS n FROM sandbox_controls WHERE provider = $1', ['mobilemoney']))[0]!.n === 0 ? true : null), 20_000, 'the first request stalled');
    const [reserved] = await t.sql<{ id: string }>('SELECT id FROM refunds WHERE payment_id = $1', [p.id]);
    const refundId = reserved!.id;
    expect(await refundRow(refundId)).toMatchObject({ status: 'pending', provider_ref: null, reversal_resends: 0 });

    // Meanwhile the refund sync finds no acknowledged request and sends the reversal again: acknowledged,
    // carried out ("0"), its result held.
    await holdResults(1);
    await syncCheck(refundId);
    await untilHeld(1, "the repeat's result held");
    const [repeat] = await reversalsAtOperator(p.receipt);
    expect(repeat).toEqual({ originator_conversation_id: expect.any(String), result_code: '0' });
    expect(await refundRow(refundId)).toMatchObject({ status: 'pending', provider_ref: repeat!.originator_conversation_id, reversal_resends: 1 });

    // Now the operator turns the first request away: the repeat may reverse the payment, so the refund stays pending.
    expect((await t.http.post('/sandbox/mobilemoney/_control/refuse-stalled').send({}).expect(200)).body).toEqual({ provider: 'mobilemoney', refused: 1 });
    const res = await posted;
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ id: refundId, status: 'pending', failure_reason: null });
    const kept = await refusalsKept(refundId);
    expect(kept).toHaveLength(1);
    expect(kept[0]!.note).toMatch(/spike arrest.*: not applied; the reversal was sent again \(1 repeat\)/i);
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending', failure_reason: null });
    expect(await eventsOf(p.id)).toEqual(['payment.completed']);

    // The repeat's success arrives: the refund completes, the payment is reversed, never refund.failed.
    expect(await releaseOne()).toEqual({ provider: 'mobilemoney', released: 1, statuses: [200] });
    expect(await getRefund(refundId)).toMatchObject({ status: 'completed', amount: '100.00', provider_ref: repeat!.originator_conversation_id });
    expect(await getPayment(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    expect(await eventsOf(p.id)).toEqual(['payment.completed', 'payment.reversed']);
    expect(receiver.events('refund.failed').filter((e) => e.json.data.refund_id === refundId)).toEqual([]);
  });

  it('the stall-requests control takes a whole count; refuse-stalled with none stalled refuses none', async () => {
    for (const count of [-1, 1.5, '2', null]) expect((await t.http.post('/sandbox/mobilemoney/_control/stall-requests').send({ count })).status).toBe(400);
    expect((await t.http.post('/sandbox/mobilemoney/_control/stall-requests').send({ count: 0 }).expect(200)).body).toEqual({ provider: 'mobilemoney', stall_requests: 0 });
    expect((await t.http.post('/sandbox/mobilemoney/_control/refuse-stalled').send({}).expect(200)).body).toEqual({ provider: 'mobilemoney', refused: 0 });
  });
});

describe('admin refund settle: a refund left pending for an operator', () => {
  /** `admin refund settle …` run as an operator runs it (its own process). */
  const settle = (args: string[]) =>
    runCli('server/admin/cli.ts', ['refund', 'settle', ...args], { DATABASE_URL: t.databaseUrl, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NODE_ENV: 'test' });

  it('refused after it was sent again, checked at the operator\'s portal: --status failed fails it (refund.failed, audited as operator) and a new refund may be asked; a refund not pending is refused', async () => {
    const { payment: p, refundId, request: first } = await refusedReversalResultLost();
    await reportsFindNothing(refundId, first);
    await sendAgain(refundId, p.receipt, [first]);
    await eventually(async () => ((await refusalsKept(refundId)).length === 1 ? true : null), 20_000, "the repeat's refusal recorded");
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending' });

    // What cannot be checked here is refused before anything changes.
    const completed = await settle(['--id', refundId, '--status', 'completed', '--reason', 'reversed at the portal']);
    expect(completed.code).toBe(64);
    expect(completed.stderr).toContain('--status must be failed');
    const noReason = await settle(['--id', refundId, '--status', 'failed']);
    expect(noReason.code).toBe(64);
    expect(noReason.stderr).toContain('--reason is required');
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending' });

    const reason = 'no reversal of this receipt at the operator portal (insufficient balance)';
    const done = await settle(['--id', refundId, '--status', 'failed', '--reason', reason]);
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toEqual({ refund_id: refundId, status: 'failed', failure_reason: reason });
    expect(await getRefund(refundId)).toMatchObject({ status: 'failed', failure_reason: reason });
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    expect(await movesAfterPayment(p.id)).toEqual([{ subject: 'refund', from_status: 'pending', to_status: 'failed', trigger: 'operator' }]);
    const event = await eventually(() => receiver.events('refund.failed').find((e) => e.json.data.refund_id === refundId), 15_000, 'refund.failed');
    expect(event.json.data).toMatchObject({ payment_id: p.id, refund_id: refundId, failure_reason: reason, status: 'completed' });
    // The payment may be refunded again.
    expect((await refund(p.id)).status).toBe(201);

    const again = await settle(['--id', refundId, '--status', 'failed', '--reason', reason]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`refund ${refundId} is failed, not pending: only a pending refund can be settled`);
    const unknown = await settle(['--id', '00000000-0000-4000-8000-000000000000', '--status', 'failed', '--reason', reason]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/refund not found/i);
  });

  it('a pending refund never sent again is refused (exit 1, unchanged): its provider, its result or the refund sync settles it, and failing it would free the amount it may still refund', async () => {
    const { refundId } = await refusedReversalResultLost();
    expect(await refundRow(refundId)).toMatchObject({ status: 'pending', reversal_resends: 0 });
    const refused = await settle(['--id', refundId, '--status', 'failed', '--reason', 'no reversal seen at the portal']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`refund ${refundId} was never sent again`);
    expect(await getRefund(refundId)).toMatchObject({ status: 'pending', failure_reason: null });
  });
});
