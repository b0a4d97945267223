import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/** GET /v1/payments/{id}/transitions: the audit the dashboard's payment page shows. */

let t: TestService;
let a: { merchantId: string; apiKey: string };
let b: { merchantId: string; apiKey: string };
let paymentId: string;

beforeAll(async () => {
  t = await startTestService();
  a = await t.createMerchant('Transitions A');
  b = await t.createMerchant('Transitions B');
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', a.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_transitions_0001' } }).expect(200);
  const created = await t.http.post('/v1/payments').set('X-API-Key', a.apiKey).set('Idempotency-Key', `tr-${randomUUID()}`)
    .send({ provider: 'cardpay', amount: '10.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
  paymentId = created.body.data.id;
  // The simulator's payment_intent.succeeded callback comes ~50 ms after the create: let it land first, or
  // it arrives after the refund and is audited as a refused refunded → completed report.
  await eventually(
    async () => (await t.sql('SELECT 1 FROM provider_events WHERE provider = $1 AND payment_id = $2', ['cardpay', paymentId])).length > 0,
    10_000,
    'the creation callback',
  );
  await t.http.post('/v1/refunds').set('X-API-Key', a.apiKey).send({ payment_id: paymentId }).expect(201);
});
afterAll(async () => {
  await t.stop();
});

const transitions = (key: string, id: string) => t.http.get(`/v1/payments/${id}/transitions`).set('X-API-Key', key);

describe('GET /v1/payments/{id}/transitions', () => {
  it("lists every status change oldest first, the payment's and its refunds', with its trigger", async () => {
    const res = await transitions(a.apiKey, paymentId);
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    const rows = res.body.data as { subject: string; refund_id: string | null; from_status: string | null; to_status: string; accepted: boolean }[];
    const [refund] = (await t.http.get(`/v1/refunds?payment_id=${paymentId}`).set('X-API-Key', a.apiKey)).body.data;
    expect(rows.map((x) => [x.subject, x.refund_id, x.from_status, x.to_status, x.accepted])).toEqual([
      ['payment', null, null, 'pending', true],
      ['payment', null, 'pending', 'completed', true],
      ['refund', refund.id, 'pending', 'completed', true],
      ['payment', refund.id, 'completed', 'refunded', true],
    ]);
    expect(res.body.data[0]).toEqual({ subject: 'payment', refund_id: null, from_status: null, to_status: 'pending', trigger: 'create', accepted: true, note: null, created_at: expect.stringMatching(/Z$/) });
    // A list: the envelope's meta, every transition on one page.
    expect(res.body.meta).toEqual({ page: 1, page_size: 4, total: 4 });
  });

  it("answers 404 for another merchant's payment, an unknown id and a malformed one", async () => {
    for (const [key, id] of [[b.apiKey, paymentId], [a.apiKey, randomUUID()], [a.apiKey, 'nope']] as const) {
      const res = await transitions(key, id);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
    }
  });

  it('needs the payments:read scope', async () => {
    const { apiKey } = await t.issueKey(a.merchantId, ['webhooks:read']);
    const res = await transitions(apiKey, paymentId);
    expect(res.status).toBe(403);
    expect(res.body.error.message).toContain('payments:read');
  });
});
