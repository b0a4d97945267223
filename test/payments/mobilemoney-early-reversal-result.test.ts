import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { behindOperatorStub } from '../support/operator-watch.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A mobilemoney reversal's result that arrives before its acknowledgement is recorded: the operator
 * carried the request out and posted the result while its answer to the request (the acknowledgement,
 * naming the request's OriginatorConversationID) was still on its way. The result completes the refund;
 * the refund keeps the reference of the request it answers (interface.md: provider_ref, "Provider's
 * refund or reversal reference"), which was left null for good. So does it when the acknowledgement
 * never comes at all (the connection dropped after the operator acted).
 */
const CREDS = {
  env: 'sandbox', consumer_key: 'early-result-key', consumer_secret: 'early-result-secret',
  passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379',
};

let t: TestService;
let key: string;

beforeAll(async () => {
  t = await startTestService({ MOBILEMONEY_RECONCILE_INTERVAL: '1h' });
  ({ apiKey: key } = await t.createMerchant('Early Result Duka'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'mobilemoney', mobilemoney: CREDS }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

/** In front of the operator: the acknowledgement of a reversal request is passed back only once `release` is called (the operator has acted). */
class HeldReversalAck extends ForwardingStub {
  ack: { OriginatorConversationID: string } | null = null;
  private released!: () => void;
  private readonly releasedAt = new Promise<void>((resolve) => (this.released = resolve));

  release(): void {
    this.released();
  }

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (!req.url.endsWith('/mpesa/reversal/v1/request')) return forward();
    const answer = await forward();
    this.ack = JSON.parse(answer.body.toString('utf8')) as { OriginatorConversationID: string };
    await this.releasedAt;
    return answer;
  }
}

describe('a reversal result before its acknowledgement', () => {
  it('completes the refund, and the refund keeps the reversal request\'s reference (was provider_ref null for good)', async () => {
    const paid = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', 'early-result-1')
      .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone: '254708374149' }).expect(201);
    await eventually(async () => (await t.http.get(`/v1/payments/${paid.body.data.id}`).set('X-API-Key', key)).body.data.status === 'completed', 15_000, 'the push completed');

    const stub = new HeldReversalAck();
    const answered = await behindOperatorStub(t, stub, async () => {
      const request = t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: paid.body.data.id }).then((res) => res);
      try {
        // The operator acknowledged and carried the request out; its result reaches the service first and completes the refund.
        await eventually(() => stub.ack, 15_000, 'the reversal acknowledged by the operator');
        await eventually(async () => (await t.sql<{ status: string }>('SELECT status FROM refunds WHERE payment_id = $1', [paid.body.data.id]))[0]?.status === 'completed', 15_000, 'the result applied');
      } finally {
        stub.release();
      }
      return request;
    });
    expect(answered.status).toBe(201);
    const reference = stub.ack!.OriginatorConversationID;
    expect(answered.body.data).toMatchObject({ status: 'completed', provider_ref: reference });
    const refund = (await t.http.get(`/v1/refunds/${answered.body.data.id}`).set('X-API-Key', key).expect(200)).body.data;
    expect(refund).toMatchObject({ status: 'completed', provider_ref: reference });
    expect((await t.http.get(`/v1/payments/${paid.body.data.id}`).set('X-API-Key', key)).body.data).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
  });

  it('with the acknowledgement lost (the connection dropped after the operator acted): the result completes the refund with its request\'s reference', async () => {
    const paid = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', 'early-result-2')
      .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone: '254708374149' }).expect(201);
    const payment = await eventually(async () => {
      const p = (await t.http.get(`/v1/payments/${paid.body.data.id}`).set('X-API-Key', key)).body.data;
      return p.status === 'completed' ? p : null;
    }, 15_000, 'the push completed');

    await t.http.post('/sandbox/mobilemoney/_control/lose-answers').send({ count: 1 }).expect(200);
    const res = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: payment.id });
    expect(res.status).toBe(201); // pending, unless the result was quicker
    const refund = await eventually(async () => {
      const r = (await t.http.get(`/v1/refunds/${res.body.data.id}`).set('X-API-Key', key).expect(200)).body.data;
      return r.status === 'completed' ? r : null;
    }, 15_000, 'the result applied');
    const [reversal] = await t.sql<{ originator_conversation_id: string }>('SELECT originator_conversation_id FROM sandbox_mobilemoney_reversals WHERE transaction_id = $1', [payment.provider_ref]);
    expect(refund.provider_ref).toBe(reversal!.originator_conversation_id); // was null
  });
});
