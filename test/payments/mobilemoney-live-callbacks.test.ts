import { generateKeyPairSync, sign as rsaSign } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StatusWriter } from '../../server/domain/payments/status-writer.js';
import { scrapeMetrics, total } from '../support/prometheus.js';
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

/**
 * The customer has answered whatever prompt an earlier push left open on the phone: the operator (and its
 * simulator) locks a phone while its prompt is open, and these pushes come faster than OPERATOR_DELAY_MS.
 */
const answerOpenPrompt = (phone: string) =>
  t.sql('UPDATE sandbox_mobilemoney_stk_requests SET completes_at = now() WHERE phone = $1 AND completes_at > now()', [phone]);
const pay = async (phone: string) => {
  await answerOpenPrompt(phone);
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

/** The service records `paymentId` failed, as from an STK query answered 1037 (the customer unreachable), whatever the operator did. */
const recordFailed = (paymentId: string) => {
  const c = t.service.container;
  const writer = new StatusWriter(c.orm.em, c.deliveryQueue, c.metrics.integrityMismatches, c.logger);
  return t.inContext(() => writer.applyPayment(paymentId, { status: 'failed', failureReason: 'DS timeout user cannot be reached (ResultCode 1037)' }, 'status-sync'));
};
const pushCompleted = (checkoutRequestId: string) => eventually(() => t.sql<{ receipt_number: string }>(
  'SELECT receipt_number FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()', [checkoutRequestId])
  .then((r) => r[0] ?? null), 10_000, 'push completed at the operator');
const chargedMetric = async (source: string) => total(await scrapeMetrics(t), 'payments_integrity_mismatches_total', { provider: 'mobilemoney', source: `${source}:charged_but_failed` });
const refusedMoves = (paymentId: string) =>
  t.sql(`SELECT from_status, to_status, trigger, note FROM payment_transitions WHERE payment_id = $1 AND NOT accepted ORDER BY id`, [paymentId]);

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

  it("the operator's unsigned success for a payment recorded failed is confirmed by the STK query and recorded as charged_but_failed; the payment stays failed", async () => {
    const p = await pay(PHONES.silent);
    const { receipt_number: receipt } = await pushCompleted(p.provider_ref);
    await recordFailed(p.id);
    const before = await chargedMetric('confirmed:stk');
    const res = await t.http.post('/v1/webhooks/mobilemoney').send(successBody(p.provider_ref, receipt));
    expect(res.status).toBe(200);
    expect(await queriesOf(p.provider_ref)).toBe(1);
    expect(await get(p.id)).toMatchObject({ status: 'failed', provider_ref: p.provider_ref });
    expect(await refusedMoves(p.id)).toEqual([
      { from_status: 'failed', to_status: 'completed', trigger: 'confirmed:stk', note: expect.stringMatching(/^a payment recorded failed was charged at the provider/) },
    ]);
    expect(await chargedMetric('confirmed:stk')).toBe(before + 1);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.failed' }]);
  });

  it('an unsigned "success" for a failed payment the operator did not complete is recorded and ignored', async () => {
    // The customer cancels (1032): the operator's unsigned callback, confirmed by the query, fails the payment.
    const p = await pay('254700000001');
    await eventually(async () => ((await get(p.id)).status === 'failed' ? true : null), 15_000, 'payment failed');
    const asked = await queriesOf(p.provider_ref);
    const forged = await t.http.post('/v1/webhooks/mobilemoney').send(successBody(p.provider_ref, 'FORGED0002'));
    expect(forged.status).toBe(200);
    expect(await queriesOf(p.provider_ref)).toBe(asked + 1);
    expect(await get(p.id)).toMatchObject({ status: 'failed', provider_ref: p.provider_ref, integrity: { status: 'ok' } });
    expect(await refusedMoves(p.id)).toEqual([{
      from_status: 'failed', to_status: 'completed', trigger: 'unconfirmed:stk',
      note: 'an unverifiable report that the payment recorded failed was paid; the provider answered failed: not applied',
    }]);
    expect(await chargedMetric('unconfirmed:stk')).toBe(0);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.failed' }]);
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

  it("a validly signed callback for one payment posted at another payment's address (?ref=) changes neither", async () => {
    const [a, b] = [await pay(PHONES.silent), await pay(PHONES.silent)];
    // The operator's genuine, signed success for A; the signature covers the body, not the address.
    const body = JSON.stringify(successBody(a.provider_ref, 'LIVEA00001'));
    const signature = rsaSign('sha256', Buffer.from(body), operatorKey.privateKey).toString('base64');
    const post = (ref?: string) => t.http.post(`/v1/webhooks/mobilemoney${ref ? `?ref=${ref}` : ''}`)
      .set('Content-Type', 'application/json').set('X-Mobilemoney-Signature', signature).send(body);
    const redirected = await post(b.id);
    expect(redirected.status).toBe(401);
    expect(redirected.body.error.code).toBe('UNAUTHORIZED');
    expect(await get(b.id)).toMatchObject({ status: 'pending', provider_ref: b.provider_ref });
    expect(await get(a.id)).toMatchObject({ status: 'pending', provider_ref: a.provider_ref });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = ANY($1)', [[a.id, b.id]])).toEqual([]);
    expect(await t.sql('SELECT 1 FROM provider_events WHERE payment_id = ANY($1)', [[a.id, b.id]])).toEqual([]);
    // The same callback at A's own address is A's.
    expect((await post(a.id)).status).toBe(200);
    expect(await get(a.id)).toMatchObject({ status: 'completed', provider_ref: 'LIVEA00001' });
    expect(await get(b.id)).toMatchObject({ status: 'pending', provider_ref: b.provider_ref });
  });

  it('a validly signed success that states no amount is refused: the payment stays pending, the refusal recorded', async () => {
    const p = await pay(PHONES.silent);
    const signed = successBody(p.provider_ref, 'LIVENOAMT1');
    signed.Body.stkCallback.CallbackMetadata.Item = signed.Body.stkCallback.CallbackMetadata.Item.filter((i) => i.Name !== 'Amount');
    const body = JSON.stringify(signed);
    const signature = rsaSign('sha256', Buffer.from(body), operatorKey.privateKey).toString('base64');
    const res = await t.http.post('/v1/webhooks/mobilemoney').set('Content-Type', 'application/json').set('X-Mobilemoney-Signature', signature).send(body);
    // Acknowledged (the operator's own body, verified), and nothing moved: money moves only on our amount.
    expect(res.status).toBe(200);
    expect(await get(p.id)).toMatchObject({ status: 'pending', provider_ref: p.provider_ref, integrity: { status: 'mismatch' } });
    expect(await refusedMoves(p.id)).toEqual([
      { from_status: 'pending', to_status: 'completed', trigger: 'callback:stk', note: 'integrity: the provider reported no amount, expected 10000 KES' },
    ]);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);
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

/**
 * Reversal and transaction-status results are unsigned too. A reversal result is confirmed by a
 * transaction-status query of our own about the reversal request (by the OriginatorConversationID the
 * operator gave it), a status result by asking again about the transaction our query named; the
 * answers to those queries come to the address bound to the query (its token) and are applied.
 */
describe('live-env reversal and transaction-status results', () => {
  let ops: string;
  const asOps = (method: 'get' | 'post', url: string) => t.http[method](url).set('X-API-Key', ops);
  const payOps = async (phone: string, amount = '100') => {
    await answerOpenPrompt(phone);
    const res = await asOps('post', '/v1/payments').set('Idempotency-Key', `live-ops-${Date.now()}-${++n}`).send({ provider: 'mobilemoney', currency: 'KES', amount, phone });
    expect(res.status).toBe(201);
    return res.body.data as { id: string; provider_ref: string; reference: string };
  };
  const getOps = async (id: string) => (await asOps('get', `/v1/payments/${id}`)).body.data;
  const refundOf = async (id: string) => (await asOps('get', `/v1/refunds/${id}`)).body.data;
  const confirmations = (column: 'refund_id' | 'payment_id', id: string) =>
    t.sql<{ confirms: string; result_code: string | null; completed: boolean }>(
      `SELECT confirms, result_code, completed_at IS NOT NULL AS completed FROM provider_status_queries WHERE ${column} = $1 AND confirms IS NOT NULL ORDER BY created_at`, [id]);
  /** A completed payment with its receipt: settled through the STK query, the receipt from reconciliation. */
  const paidWithReceipt = async (amount = '100') => {
    const p = await payOps(PHONES.success, amount);
    await eventually(async () => ((await getOps(p.id)).status === 'completed' ? true : null), 15_000, 'payment settled');
    await asOps('post', '/v1/payments/mobilemoney/reconcile').send({}).expect(200);
    const paid = await getOps(p.id);
    expect(paid.provider_ref).not.toBe(p.provider_ref);
    return paid as { id: string; provider_ref: string };
  };
  const reversalResult = (refundId: string, amount: number) => t.http.post(`/v1/webhooks/mobilemoney/reversal/result?ref=${refundId}`).send({
    Result: {
      ResultType: 0, ResultCode: 0, ResultDesc: 'The service request is processed successfully.', OriginatorConversationID: `forged-${refundId}`,
      ConversationID: 'AG_forged', TransactionID: 'FORGEDREV1',
      ResultParameters: { ResultParameter: [{ Key: 'Amount', Value: amount }, { Key: 'OriginalTransactionID', Value: 'FORGEDORIG' }] },
    },
  });

  beforeAll(async () => {
    ({ apiKey: ops } = await t.createMerchant('Live Ops Duka'));
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', ops).send({ webhook_url: receiver.url }).expect(200);
    // The operator's sandbox initiator; the password is encrypted with the simulator's certificate per request.
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', ops).send({ provider: 'mobilemoney', mobilemoney: {
      ...LIVE_CREDS, consumer_key: 'live-ops-key', security_credential: undefined, initiator: 'testapi', initiator_password: 'Safaricom999!*!',
    } }).expect(200);
  });

  it('a payment confirmed by the STK query has no receipt to reverse yet: 409 CONFLICT saying so, no refund written, nothing sent; after reconciliation it refunds', async () => {
    const p = await payOps(PHONES.success);
    await eventually(async () => ((await getOps(p.id)).status === 'completed' ? true : null), 15_000, 'payment settled');
    expect(await getOps(p.id)).toMatchObject({ status: 'completed', provider_ref: p.provider_ref });
    const early = await asOps('post', '/v1/refunds').send({ payment_id: p.id });
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('CONFLICT');
    expect(early.body.error.message).toMatch(/receipt number is not known yet.*reconciliation/);
    expect(await t.sql('SELECT 1 FROM refunds WHERE payment_id = $1', [p.id])).toEqual([]);
    expect((await asOps('get', '/v1/refunds').query({ payment_id: p.id })).body.data).toEqual([]);
    expect(await t.sql(`SELECT 1 FROM sandbox_mobilemoney_reversals r JOIN sandbox_mobilemoney_stk_requests s ON s.receipt_number = r.transaction_id
      WHERE s.checkout_request_id = $1`, [p.provider_ref])).toEqual([]);
    expect(await t.sql(`SELECT type FROM events WHERE payment_id = $1 AND type LIKE 'refund.%'`, [p.id])).toEqual([]);
    expect(await getOps(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    // Reconciliation supplies the receipt; the same request is then taken.
    await asOps('post', '/v1/payments/mobilemoney/reconcile').send({}).expect(200);
    const later = await asOps('post', '/v1/refunds').send({ payment_id: p.id });
    expect(later.status).toBe(201);
    await eventually(async () => ((await refundOf(later.body.data.id)).status === 'completed' ? true : null), 20_000, 'refund completed');
    expect(await getOps(p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
  });

  it("the operator's reversal result, at the address bound to our reversal request (its token), completes the refund without a query", async () => {
    const paid = await paidWithReceipt();
    const refund = await asOps('post', '/v1/refunds').send({ payment_id: paid.id });
    expect(refund.status).toBe(201);
    expect(refund.body.data.status).toBe('pending');
    const refundId = refund.body.data.id as string;
    await eventually(async () => ((await refundOf(refundId)).status === 'completed' ? true : null), 20_000, 'refund completed');
    expect(await getOps(paid.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    // The ResultURL we gave carried the refund's token: the result is verified as it stands, nobody is asked.
    expect(await confirmations('refund_id', refundId)).toEqual([]);
    const transitions = await t.sql<{ subject: string; to_status: string; trigger: string }>(
      `SELECT subject, to_status, trigger FROM payment_transitions WHERE payment_id = $1 AND accepted
       AND ((subject = 'refund' AND to_status = 'completed') OR (subject = 'payment' AND to_status = 'reversed')) ORDER BY id`, [paid.id]);
    expect(transitions).toEqual([
      { subject: 'refund', to_status: 'completed', trigger: 'callback:reversal' },
      { subject: 'payment', to_status: 'reversed', trigger: 'callback:reversal' },
    ]);
    const event = await eventually(() => receiver.events('payment.reversed').find((e) => e.json.data.payment_id === paid.id));
    expect(event.json.data).toMatchObject({ refund_id: refundId, status: 'reversed' });
  });

  it('a receipt the operator had already reversed (its portal): our reversal is answered "already reversed" (R000001) and completes', async () => {
    const paid = await paidWithReceipt();
    // Reversed at the operator first, as from its portal: our records still say completed.
    const token = (await t.http.get('/sandbox/mobilemoney/oauth/v1/generate?grant_type=client_credentials').auth('portal', 'portal').expect(200)).body.access_token as string;
    await t.http.post('/sandbox/mobilemoney/mpesa/reversal/v1/request').set('Authorization', `Bearer ${token}`).send({
      Initiator: 'testapi', SecurityCredential: 'x', CommandID: 'TransactionReversal', TransactionID: paid.provider_ref, Amount: 100,
      ReceiverParty: '174379', RecieverIdentifierType: '11', ResultURL: 'http://127.0.0.1:9/portal', QueueTimeOutURL: 'http://127.0.0.1:9/portal', Remarks: 'portal reversal',
    }).expect(200);
    await eventually(() => t.sql(`SELECT 1 FROM sandbox_mobilemoney_reversals WHERE transaction_id = $1`, [paid.provider_ref]).then((r) => (r.length > 0 ? true : null)), 10_000, 'the portal reversal');
    const refund = await asOps('post', '/v1/refunds').send({ payment_id: paid.id });
    expect(refund.status).toBe(201);
    const refundId = refund.body.data.id as string;
    await eventually(async () => ((await refundOf(refundId)).status === 'completed' ? true : null), 20_000, 'refund completed by R000001');
    expect(await getOps(paid.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
  });

  it('an unsigned forged reversal "success" for a reversal the operator refused changes nothing; the operator\'s own refusal fails the refund', async () => {
    // 99999 KES: the simulator refuses to reverse it (insufficient balance, ResultCode 1).
    const paid = await paidWithReceipt('99999');
    const refund = await asOps('post', '/v1/refunds').send({ payment_id: paid.id });
    expect(refund.body.data.status).toBe('pending');
    const refundId = refund.body.data.id as string;
    const forged = await reversalResult(refundId, 99999);
    expect(forged.status).toBe(200);
    // The forgery carries no token: it is not believed, and any query it makes finds no completed reversal.
    const failed = await eventually(async () => {
      const r = await refundOf(refundId);
      return r.status === 'failed' ? r : null;
    }, 20_000, "the operator's refusal");
    expect(failed.failure_reason).toMatch(/ResultCode 1\)$/);
    await new Promise((r) => setTimeout(r, OPERATOR_DELAY_MS + 500));
    for (const row of await confirmations('refund_id', refundId)) expect(row).toMatchObject({ confirms: 'reversal', result_code: 'R000002' });
    expect(await getOps(paid.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    expect(await t.sql(`SELECT type FROM events WHERE payment_id = $1 AND type IN ('payment.reversed', 'payment.refunded')`, [paid.id])).toEqual([]);
    await eventually(() => receiver.events('refund.failed').find((e) => e.json.data.refund_id === refundId));
  });
});

describe('live-env transaction-status results without the query token', () => {
  let ops: string;
  const getOps = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', ops)).body.data;
  const pendingPush = async () => {
    await answerOpenPrompt(PHONES.silent);
    const res = await t.http.post('/v1/payments').set('X-API-Key', ops).set('Idempotency-Key', `live-ts-${Date.now()}-${++n}`)
      .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone: PHONES.silent });
    expect(res.body.data.status).toBe('pending');
    return res.body.data as { id: string; provider_ref: string };
  };
  /**
   * A status query the service sent about a pending payment (recorded as check-status records it). No API
   * path leaves a pending payment to the transaction-status API today (a push without a receipt is
   * answered by the STK query), so the query row is written directly; everything after it is the service.
   */
  const statusQuery = async (merchantPayment: string, code: string, providerQueryRef: string | null = 'earlier-query') => {
    const [row] = await t.sql<{ id: string }>(
      `INSERT INTO provider_status_queries (id, provider, merchant_id, payment_id, code, provider_query_ref)
       SELECT gen_random_uuid(), 'mobilemoney', merchant_id, id, $2, $3 FROM payments WHERE id = $1 RETURNING id`, [merchantPayment, code, providerQueryRef]);
    return row!.id;
  };
  const unsignedResult = (queryId: string, receipt: string) => t.http.post(`/v1/webhooks/mobilemoney/transactionstatus/result?ref=${queryId}`).send({
    Result: {
      ResultType: 0, ResultCode: 0, ResultDesc: 'The service request is processed successfully.', OriginatorConversationID: 'earlier-query', ConversationID: 'AG_earlier',
      TransactionID: 'STATUS0001',
      ResultParameters: { ResultParameter: [{ Key: 'TransactionStatus', Value: 'Completed' }, { Key: 'Amount', Value: 100 }, { Key: 'ReceiptNo', Value: receipt }] },
    },
  });
  const confirmationsOf = (paymentId: string) =>
    t.sql<{ confirms: string; code: string; result_code: string | null }>(`SELECT confirms, code, result_code FROM provider_status_queries WHERE payment_id = $1 AND confirms IS NOT NULL`, [paymentId]);

  beforeAll(async () => {
    ({ apiKey: ops } = await t.createMerchant('Live Status Duka'));
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', ops).send({ provider: 'mobilemoney', mobilemoney: {
      ...LIVE_CREDS, consumer_key: 'live-status-key', security_credential: undefined, initiator: 'testapi', initiator_password: 'Safaricom999!*!',
    } }).expect(200);
  });

  it('an unsigned result for a transaction the operator completed settles the payment through a query of our own', async () => {
    const p = await pendingPush();
    // The operator completed the push (no callback for this phone); the customer's SMS shows the receipt.
    const [stk] = await eventually(() => t.sql<{ receipt_number: string }>(
      `SELECT receipt_number FROM sandbox_mobilemoney_stk_requests WHERE checkout_request_id = $1 AND completes_at <= now()`, [p.provider_ref]).then((r) => (r.length ? r : null)), 10_000, 'push completed');
    const queryId = await statusQuery(p.id, stk!.receipt_number);
    expect((await unsignedResult(queryId, stk!.receipt_number)).status).toBe(200);
    // Not believed: still pending, the claim not recorded on the query.
    expect(await getOps(p.id)).toMatchObject({ status: 'pending' });
    expect(await t.sql('SELECT result_code FROM provider_status_queries WHERE id = $1', [queryId])).toEqual([{ result_code: null }]);
    const done = await eventually(async () => ((await getOps(p.id)).status === 'completed' ? getOps(p.id) : null), 15_000, 'payment settled');
    expect(done).toMatchObject({ status: 'completed', provider_ref: stk!.receipt_number, integrity: { status: 'ok' } });
    expect(await confirmationsOf(p.id)).toEqual([{ confirms: 'transaction-status', code: stk!.receipt_number, result_code: '0' }]);
    const [transition] = await t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed' AND accepted`, [p.id]);
    expect(transition!.trigger).toBe('confirmed:transaction-status');
  });

  it('an unsigned result for a payment recorded failed that the operator completed: confirmed by a query of our own, recorded as charged_but_failed', async () => {
    const p = await pendingPush();
    const { receipt_number: receipt } = await pushCompleted(p.provider_ref);
    await recordFailed(p.id);
    const before = await chargedMetric('confirmed:transaction-status');
    const queryId = await statusQuery(p.id, receipt);
    expect((await unsignedResult(queryId, receipt)).status).toBe(200);
    await eventually(() => refusedMoves(p.id).then((rows) => (rows.length ? true : null)), 15_000, 'the confirmation answered');
    expect(await refusedMoves(p.id)).toEqual([
      { from_status: 'failed', to_status: 'completed', trigger: 'confirmed:transaction-status', note: expect.stringMatching(/^a payment recorded failed was charged at the provider/) },
    ]);
    expect(await confirmationsOf(p.id)).toEqual([{ confirms: 'transaction-status', code: receipt, result_code: '0' }]);
    expect(await chargedMetric('confirmed:transaction-status')).toBe(before + 1);
    expect(await getOps(p.id)).toMatchObject({ status: 'failed', provider_ref: p.provider_ref });
  });

  it('a result at a query address with a token that is not the query\'s is refused (401) and asks nothing', async () => {
    const p = await pendingPush();
    const queryId = await statusQuery(p.id, 'QZZ0000009');
    const res = await t.http.post(`/v1/webhooks/mobilemoney/transactionstatus/result?ref=${queryId}&token=${'ab'.repeat(32)}`).send({
      Result: { ResultType: 0, ResultCode: 0, ResultDesc: 'ok', OriginatorConversationID: 'earlier-query', ConversationID: 'AG_x', TransactionID: 'QZZ0000009',
        ResultParameters: { ResultParameter: [{ Key: 'TransactionStatus', Value: 'Completed' }, { Key: 'Amount', Value: 100 }, { Key: 'ReceiptNo', Value: 'QZZ0000009' }] } },
    });
    expect(res.status).toBe(401);
    expect(await confirmationsOf(p.id)).toEqual([]);
    expect(await getOps(p.id)).toMatchObject({ status: 'pending' });
  });

  it("a signed \"completed\" result without the token, for a query whose acknowledgement was not recorded, naming another query: not applied; asked again about our query's transaction, which the operator does not have", async () => {
    const p = await pendingPush();
    // Our query about a receipt the operator never issued; its acknowledgement (the operator's id for it) was lost.
    const queryId = await statusQuery(p.id, 'QZZ0000005', null);
    // The operator's signed result of someone else's query (their own receipt, the same amount), at our query's address.
    const body = JSON.stringify({ Result: {
      ResultType: 0, ResultCode: 0, ResultDesc: 'The service request is processed successfully.', OriginatorConversationID: 'stranger-query', ConversationID: 'AG_stranger',
      TransactionID: 'STRANGER05',
      ResultParameters: { ResultParameter: [{ Key: 'TransactionStatus', Value: 'Completed' }, { Key: 'Amount', Value: 100 }, { Key: 'ReceiptNo', Value: 'STRANGER05' }] },
    } });
    const res = await t.http.post(`/v1/webhooks/mobilemoney/transactionstatus/result?ref=${queryId}`).set('Content-Type', 'application/json')
      .set('X-Mobilemoney-Signature', rsaSign('sha256', Buffer.from(body), operatorKey.privateKey).toString('base64')).send(body);
    expect(res.status).toBe(200);
    expect(await t.sql('SELECT result_code FROM provider_status_queries WHERE id = $1', [queryId])).toEqual([{ result_code: null }]);
    const [answered] = await eventually(() => t.sql<{ code: string; result_code: string }>(
      `SELECT code, result_code FROM provider_status_queries WHERE payment_id = $1 AND confirms IS NOT NULL AND completed_at IS NOT NULL`, [p.id]).then((r) => (r.length ? r : null)), 15_000, 'confirmation answered');
    expect(answered).toEqual({ code: 'QZZ0000005', result_code: 'R000002' });
    expect(await getOps(p.id)).toMatchObject({ status: 'pending', provider_ref: p.provider_ref, integrity: { status: 'ok' } });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);
  });

  it('an unsigned forged "completed" result for a transaction the operator does not have changes nothing', async () => {
    const p = await pendingPush();
    // The query was about a receipt the operator never issued; the forgery claims it completed.
    const queryId = await statusQuery(p.id, 'QZZ0000001');
    expect((await unsignedResult(queryId, 'QZZ0000001')).status).toBe(200);
    expect((await unsignedResult(queryId, 'QZZ0000001')).status).toBe(200);
    const [answered] = await eventually(() => t.sql<{ result_code: string }>(
      `SELECT result_code FROM provider_status_queries WHERE payment_id = $1 AND confirms IS NOT NULL AND completed_at IS NOT NULL`, [p.id]).then((r) => (r.length ? r : null)), 15_000, 'confirmation answered');
    expect(answered).toEqual({ result_code: 'R000002' });
    // Two forgeries, one question to the operator.
    expect(await confirmationsOf(p.id)).toHaveLength(1);
    expect(await getOps(p.id)).toMatchObject({ status: 'pending', provider_ref: p.provider_ref, integrity: { status: 'ok' } });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);
  });
});
