import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RESEND_AFTER_REPORT_CHECKS } from '../../server/domain/refunds/refund-sync.service.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * A mobile-money reversal the operator acknowledged but whose result callback was lost. The refund sync
 * asks the operator's transaction-status API about the request, whose report can say that a reversal
 * completed but never that it was refused; after RESEND_AFTER_REPORT_CHECKS reports without an outcome
 * the sync sends the reversal again, and the repeat's result settles the refund: the operator refuses it
 * again (the refund fails, the merchant may ask again) or answers R000001 "already reversed" (the refund
 * completes, nothing is reversed twice). The simulator loses results on request (lose-results control);
 * the sync's checks are made by the test, one at a time (the schedule's first check is an hour away).
 */
let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;

beforeAll(async () => {
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Lost Reversal Result Duka'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({
    provider: 'mobilemoney',
    mobilemoney: {
      env: 'sandbox', consumer_key: 'lost-reversal-key', consumer_secret: 'lost-reversal-secret',
      passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
    },
  }).expect(200);
});
afterAll(async () => {
  await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count: 0 });
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

const loseResults = (count: number) => t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count }).expect(200);
const resultsLeftToLose = async () =>
  (await t.sql<{ lost_results: number }>(`SELECT lost_results FROM sandbox_controls WHERE provider = 'mobilemoney'`))[0]!.lost_results;
const untilResultsLeftToLose = (count: number, what: string) =>
  eventually(async () => ((await resultsLeftToLose()) === count ? true : null), 10_000, what);

/** One check of the refund sync, as the job makes it. */
const syncCheck = (refundId: string) => t.inContext(() => t.service.container.services.refundSync.syncOne(refundId));

/** The status reports the sync asked for about the refund, oldest first. */
const reportsAsked = (refundId: string) =>
  t.sql<{ code: string; confirms: string; result_code: string | null }>(
    'SELECT code, confirms, result_code FROM provider_status_queries WHERE refund_id = $1 ORDER BY created_at', [refundId]);

/** Every reversal request the operator (the simulator's own table) received for a receipt, oldest first. */
const reversalsAtOperator = (receipt: string) =>
  t.sql<{ originator_conversation_id: string; result_code: string }>(
    'SELECT originator_conversation_id, result_code FROM sandbox_mobilemoney_reversals WHERE transaction_id = $1 ORDER BY created_at', [receipt]);

const refundRow = async (refundId: string) =>
  (await t.sql<{ status: string; provider_ref: string | null; report_checks: number }>('SELECT status, provider_ref, report_checks FROM refunds WHERE id = $1', [refundId]))[0]!;

/**
 * A refused reversal whose result was lost: RESEND_AFTER_REPORT_CHECKS checks, each one's report answered
 * that the reversal does not exist (the operator keeps no transaction for a refused request). The refund
 * stays pending, its request not yet sent again.
 */
async function reportsFindNothing(refundId: string, request: string, receipt: string): Promise<void> {
  for (let check = 1; check <= RESEND_AFTER_REPORT_CHECKS; check++) {
    await syncCheck(refundId);
    await eventually(async () => ((await reportsAsked(refundId)).filter((r) => r.result_code !== null).length === check ? true : null), 10_000, `report ${check} answered`);
    expect(await refundRow(refundId)).toEqual({ status: 'pending', provider_ref: request, report_checks: check });
  }
  expect(await reportsAsked(refundId)).toEqual(
    Array.from({ length: RESEND_AFTER_REPORT_CHECKS }, () => ({ code: request, confirms: 'refund-sync', result_code: 'R000002' })));
  expect(await reversalsAtOperator(receipt)).toHaveLength(1);
}

/** A refund of a 99999 KES payment, which the simulator's shortcode cannot cover: result 1, insufficient balance. Its result is lost. */
async function refusedReversalResultLost(): Promise<{ payment: { id: string; receipt: string }; refundId: string; request: string }> {
  const payment = await paid('99999');
  await loseResults(1);
  const res = await refund(payment.id);
  expect(res.status).toBe(201);
  expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: expect.any(String) });
  await untilResultsLeftToLose(0, "the refusal's result lost");
  expect(await reversalsAtOperator(payment.receipt)).toEqual([{ originator_conversation_id: res.body.data.provider_ref, result_code: '1' }]);
  return { payment, refundId: res.body.data.id, request: res.body.data.provider_ref };
}

const refundFailed = (refundId: string) =>
  eventually(async () => {
    const r = await getRefund(refundId);
    return r.status === 'failed' ? r : null;
  }, 15_000, 'the refund failed');

/** The accepted moves recorded after the payment completed (its refunds', its own), with what applied them. */
const movesAfterPayment = (paymentId: string) =>
  t.sql<{ subject: string; from_status: string; to_status: string; trigger: string }>(
    `SELECT subject, from_status, to_status, trigger FROM payment_transitions WHERE payment_id = $1 AND accepted
     AND from_status IS NOT NULL AND NOT (subject = 'payment' AND from_status = 'pending') ORDER BY id`, [paymentId]);

describe('a reversal acknowledged by the operator whose result callback was lost', () => {
  it('refused at the operator: after the status reports found nothing the sync sends it again, the refusal fails the refund (refund.failed), and a new refund can be asked', async () => {
    const { payment: p, refundId, request: firstRequest } = await refusedReversalResultLost();
    await reportsFindNothing(refundId, firstRequest, p.receipt);

    // The next check sends the reversal again; the operator refuses it again, and that result arrives.
    await syncCheck(refundId);
    const failed = await refundFailed(refundId);
    expect(failed.failure_reason).toBe('The balance is insufficient for the transaction. (ResultCode 1)');
    const atOperator = await reversalsAtOperator(p.receipt);
    expect(atOperator).toEqual([
      { originator_conversation_id: firstRequest, result_code: '1' },
      { originator_conversation_id: expect.any(String), result_code: '1' },
    ]);
    // The repeat's reference became the refund's, so its result was matched to it (not refused as another's).
    expect(failed.provider_ref).toBe(atOperator[1]!.originator_conversation_id);
    expect(failed.provider_ref).not.toBe(firstRequest);
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    const event = await eventually(() => receiver.events('refund.failed').find((e) => e.json.data.refund_id === refundId), 10_000, 'refund.failed');
    expect(event.json.data).toMatchObject({ payment_id: p.id, status: 'completed', failure_reason: failed.failure_reason });
    expect(await movesAfterPayment(p.id)).toEqual([{ subject: 'refund', from_status: 'pending', to_status: 'failed', trigger: 'callback:reversal' }]);

    // No longer blocked by a pending reversal (it was 409 for ever).
    const again = await refund(p.id);
    expect(again.status).toBe(201);
    await refundFailed(again.body.data.id);
  });

  it('a repeat the operator does not acknowledge (HTTP 500) leaves the refund pending with its count; the next check sends it again', async () => {
    const { payment: p, refundId, request: firstRequest } = await refusedReversalResultLost();
    await reportsFindNothing(refundId, firstRequest, p.receipt);

    await t.http.post('/sandbox/mobilemoney/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      await syncCheck(refundId);
    } finally {
      await t.http.post('/sandbox/mobilemoney/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    // Nothing known of the repeat: still the first request's refund, its reports still counted, no new report asked.
    expect(await refundRow(refundId)).toEqual({ status: 'pending', provider_ref: firstRequest, report_checks: RESEND_AFTER_REPORT_CHECKS });
    expect(await reportsAsked(refundId)).toHaveLength(RESEND_AFTER_REPORT_CHECKS);
    expect(await reversalsAtOperator(p.receipt)).toHaveLength(1);

    await syncCheck(refundId);
    const failed = await refundFailed(refundId);
    expect(failed.failure_reason).toBe('The balance is insufficient for the transaction. (ResultCode 1)');
    expect(await reversalsAtOperator(p.receipt)).toEqual([
      { originator_conversation_id: firstRequest, result_code: '1' },
      { originator_conversation_id: failed.provider_ref, result_code: '1' },
    ]);
  });

  it('done at the operator: the repeat is answered R000001 "already reversed", the refund completes and the payment is reversed, reversed once', async () => {
    const p = await paid('100');
    // The reversal's result is lost, and so is the result of the first status report asked about it.
    await loseResults(2);
    const res = await refund(p.id);
    expect(res.status).toBe(201);
    const refundId = res.body.data.id as string;
    const firstRequest = res.body.data.provider_ref as string;
    await untilResultsLeftToLose(1, "the reversal's result lost");
    expect(await reversalsAtOperator(p.receipt)).toEqual([{ originator_conversation_id: firstRequest, result_code: '0' }]);

    await syncCheck(refundId);
    await untilResultsLeftToLose(0, "the status report's result lost");
    // The later checks find that report still open (unanswered): nothing more is asked, and no outcome came.
    for (let check = 2; check <= RESEND_AFTER_REPORT_CHECKS; check++) await syncCheck(refundId);
    expect(await reportsAsked(refundId)).toEqual([{ code: firstRequest, confirms: 'refund-sync', result_code: null }]);
    expect(await refundRow(refundId)).toEqual({ status: 'pending', provider_ref: firstRequest, report_checks: RESEND_AFTER_REPORT_CHECKS });

    // The next check sends the reversal again: "already reversed" completes the refund.
    await syncCheck(refundId);
    const completed = await eventually(async () => {
      const r = await getRefund(refundId);
      return r.status === 'completed' ? r : null;
    }, 15_000, 'the refund completed');
    expect(completed).toMatchObject({ amount: '100.00' });
    expect(await getPayment(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    const event = await eventually(() => receiver.events('payment.reversed').find((e) => e.json.data.refund_id === refundId), 10_000, 'payment.reversed');
    expect(event.json.data).toMatchObject({ payment_id: p.id, status: 'reversed', amount_refunded: '100.00' });

    // One reversal at the operator: the repeat was answered "already reversed" and moved nothing.
    const atOperator = await reversalsAtOperator(p.receipt);
    expect(atOperator).toEqual([
      { originator_conversation_id: firstRequest, result_code: '0' },
      { originator_conversation_id: completed.provider_ref, result_code: 'R000001' },
    ]);
    expect(atOperator.filter((r) => r.result_code === '0')).toHaveLength(1);
    expect(await movesAfterPayment(p.id)).toEqual([
      { subject: 'refund', from_status: 'pending', to_status: 'completed', trigger: 'callback:reversal' },
      { subject: 'payment', from_status: 'completed', to_status: 'reversed', trigger: 'callback:reversal' },
    ]);
  });
});
