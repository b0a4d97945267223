import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { behindOperatorStub } from '../support/operator-watch.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * Daraja's Reversal page lists `500.001.1001 | Internal Server Error` (HTTP 500): a server error, after
 * which the operator may have carried the reversal out. It is no refusal (the STK push page's
 * "Merchant does not exist" / "Wrong credentials" under the same code are about the push's Password):
 * the refund stays pending and the reversal's result settles it.
 */
const CREDS = {
  env: 'sandbox', consumer_key: 'reversal-500-key', consumer_secret: 'reversal-500-secret',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
};

let t: TestService;
let key: string;

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h' });
  ({ apiKey: key } = await t.createMerchant('Reversal 500 Duka'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: CREDS }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

/** In front of the operator: a reversal (or status query) request reaches it (and is carried out), but the answer is Daraja's 500.001.1001 "Internal Server Error". */
class ReversalServerError extends ForwardingStub {
  forwarded = 0;
  constructor(private readonly path = '/mpesa/reversal/v1/request') {
    super();
  }

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (!req.url.endsWith(this.path)) return forward();
    await forward();
    this.forwarded++;
    return jsonAnswer(500, { requestId: '16763-113574418-1', errorCode: '500.001.1001', errorMessage: 'Internal Server Error' });
  }
}

describe('a reversal answered 500.001.1001 "Internal Server Error"', () => {
  it('leaves the refund pending (201), and the operator\'s result completes it and reverses the payment (was 502, refund failed)', async () => {
    const paid = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', 'reversal-500-1')
      .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone: '254708374149' }).expect(201);
    await eventually(async () => (await t.http.get(`/v1/payments/${paid.body.data.id}`).set('X-API-Key', key)).body.data.status === 'completed', 15_000, 'the push completed');

    const stub = new ReversalServerError();
    const res = await behindOperatorStub(t, stub, () => t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: paid.body.data.id }));
    expect(stub.forwarded).toBe(1);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', amount: '100.00' });

    const refund = await eventually(async () => {
      const r = (await t.http.get(`/v1/refunds/${res.body.data.id}`).set('X-API-Key', key).expect(200)).body.data;
      return r.status === 'pending' ? null : r;
    }, 15_000, 'the reversal result applied');
    expect(refund).toMatchObject({ status: 'completed', amount: '100.00' });
    expect((await t.http.get(`/v1/payments/${paid.body.data.id}`).set('X-API-Key', key)).body.data).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    // The merchant hears of the reversal, never of a failed refund.
    expect(await t.sql(`SELECT type FROM events WHERE payment_id = $1 AND type IN ('refund.failed', 'payment.reversed') ORDER BY created_at`, [paid.body.data.id]))
      .toEqual([{ type: 'payment.reversed' }]);
  });

  it('on a transaction-status query (check-status by receipt): 502, the query is kept, and the operator\'s result is recorded on it (was dropped)', async () => {
    const paid = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', 'reversal-500-2')
      .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone: '254708374149' }).expect(201);
    const payment = await eventually(async () => {
      const p = (await t.http.get(`/v1/payments/${paid.body.data.id}`).set('X-API-Key', key)).body.data;
      return p.status === 'completed' ? p : null;
    }, 15_000, 'the push completed');

    const stub = new ReversalServerError('/mpesa/transactionstatus/v1/query');
    const res = await behindOperatorStub(t, stub, () => t.http.post(`/v1/payments/mobilemoney/check-status/${payment.provider_ref}`).set('X-API-Key', key));
    expect(stub.forwarded).toBe(1);
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('PROVIDER_ERROR');
    const [query] = await eventually(() =>
      t.sql<{ payment_id: string; result_code: string }>('SELECT payment_id, result_code FROM provider_status_queries WHERE code = $1 AND completed_at IS NOT NULL', [payment.provider_ref])
        .then((rows) => (rows.length ? rows : null)), 15_000, 'the status result recorded');
    expect(query).toEqual({ payment_id: payment.id, result_code: '0' });
  });
});
