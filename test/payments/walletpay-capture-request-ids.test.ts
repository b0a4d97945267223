import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * PayPal answers a repeated PayPal-Request-Id with "the latest status of the previous request"
 * (developer.paypal.com, Idempotency), and does not say a refusal is excepted. The simulator replays only
 * an INSTRUMENT_DECLINED refusal; this stub in front of it replays every 4xx answer of a POST for its
 * repeated request id, the strictest reading, so a capture refused before the buyer approved could
 * never succeed with the same id.
 */
class ReplayingPaypal extends ForwardingStub {
  readonly captureRequestIds: string[] = [];
  private readonly refusals = new Map<string, StubAnswer>();

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const requestId = req.headers['paypal-request-id'];
    if (req.method !== 'POST' || typeof requestId !== 'string') return forward();
    if (req.url.endsWith('/capture')) this.captureRequestIds.push(requestId);
    const key = `${req.url}|${requestId}`;
    const replay = this.refusals.get(key);
    if (replay) return replay;
    const answer = await forward();
    if (answer.status >= 400 && answer.status < 500) this.refusals.set(key, answer);
    return answer;
  }
}

let t: TestService;
let stub: ReplayingPaypal;
let key: string;

beforeAll(async () => {
  stub = new ReplayingPaypal();
  const stubUrl = await stub.start();
  t = await startTestService({ WALLETPAY_BASE_URL: `${stubUrl}/sandbox/walletpay`, STATUS_SYNC_SCHEDULE: '1h' });
  stub.target = t.baseUrl;
  ({ apiKey: key } = await t.createMerchant('Request Id Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'request-id-client', client_secret: 'request-id-secret' } }).expect(200);
});
afterAll(async () => {
  await stub.stop();
  await t.stop();
});

describe('a walletpay capture refused because the buyer has not approved yet, against a PayPal that replays refusals', () => {
  it('captures once the buyer approved: the next capture goes with a new PayPal-Request-Id', async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
      .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    expect(created.status).toBe(201);
    const p = created.body.data as { id: string; next_action: { url: string } };

    const early = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(early.status).toBe(409);
    expect(early.body.error.message).toMatch(/not approved/);

    const approval = p.next_action.url;
    expect(await fetch(`${approval}&auto=approve`, { redirect: 'manual' }).then((r) => r.headers.get('location'))).toContain('https://shop.example.com/return');
    const done = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(done.status).toBe(200);
    expect(done.body.data.status).toBe('completed');
    expect(stub.captureRequestIds).toEqual([`capture-${p.id}`, `capture-${p.id}-1`]);
  });
});
