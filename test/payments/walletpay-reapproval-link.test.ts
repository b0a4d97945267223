import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * After a capture refused INSTRUMENT_DECLINED the buyer must approve again at the order's approval link,
 * which the service puts on the payment as next_action. The simulator then puts the order back to
 * PAYER_ACTION_REQUIRED and lists the link again; PayPal may leave it APPROVED without listing any link.
 * This stub in front of the simulator answers as PayPal does, so that a status sync reads such an order.
 */
class PaypalLikeOrders extends ForwardingStub {
  /** Orders whose capture was refused INSTRUMENT_DECLINED. */
  private readonly refused = new Set<string>();

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const answer = await forward();
    const text = answer.body.toString('utf8');
    const capture = /\/v2\/checkout\/orders\/([^/?]+)\/capture$/.exec(req.url);
    if (capture && answer.status === 422 && text.includes('INSTRUMENT_DECLINED')) this.refused.add(capture[1]!);
    const read = /\/v2\/checkout\/orders\/([^/?]+)$/.exec(req.url);
    if (req.method === 'GET' && read && this.refused.has(read[1]!) && answer.status === 200) {
      const order = JSON.parse(text) as { status: string; links?: { rel: string }[] };
      if (order.status === 'PAYER_ACTION_REQUIRED' || order.status === 'CREATED') {
        order.status = 'APPROVED';
        order.links = (order.links ?? []).filter((l) => l.rel !== 'payer-action' && l.rel !== 'approve');
        return { ...answer, body: JSON.stringify(order) };
      }
    }
    return answer;
  }
}

let t: TestService;
let stub: PaypalLikeOrders;
let key: string;

beforeAll(async () => {
  stub = new PaypalLikeOrders();
  const stubUrl = await stub.start();
  t = await startTestService({ WALLETPAY_BASE_URL: `${stubUrl}/sandbox/walletpay`, STATUS_SYNC_SCHEDULE: '1h' });
  stub.target = t.baseUrl;
  ({ apiKey: key } = await t.createMerchant('Reapproval Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'reapproval-client', client_secret: 'reapproval-secret' } }).expect(200);
});
afterAll(async () => {
  await stub.stop();
  await t.stop();
});

const get = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;

describe('a walletpay capture refused INSTRUMENT_DECLINED, the order left APPROVED without a link (as PayPal)', () => {
  it('keeps next_action (the approval link) through a status sync; the buyer approves again there and the capture completes', async () => {
    const created = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
      .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    expect(created.status).toBe(201);
    const p = created.body.data as { id: string; provider_ref: string; next_action: { url: string } };
    const approval = p.next_action.url;
    await fetch(`${approval}${approval.includes('?') ? '&' : '?'}auto=approve-instrument-declined`, { redirect: 'manual' });

    const refused = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(refused.status).toBe(409);
    expect(await get(p.id)).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: approval } });

    // The status sync reads the order: APPROVED, no payer-action link. The buyer still has to approve again.
    await t.inContext(() => t.service.container.services.statusSync.syncOne(p.id));
    const [read] = await t.sql<{ status: string }>(`SELECT provider_response->>'status' AS status FROM payments WHERE id = $1`, [p.id]);
    expect(read!.status).toBe('APPROVED');
    expect(await get(p.id)).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: approval } });

    expect(await fetch(`${approval}&auto=approve`, { redirect: 'manual' }).then((r) => r.headers.get('location'))).toContain('https://shop.example.com/return');
    const done = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({}).expect(200);
    expect(done.body.data.status).toBe('completed');
    expect(done.body.data.next_action ?? null).toBeNull();
  });
});
