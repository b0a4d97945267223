import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { hashRequest } from '../../server/domain/payments/idempotency-keys.js';
import { openApiDocument } from '../../server/http/openapi.js';
import { startTestService, type TestService } from '../support/service.js';

// POST /v1/refunds, /v1/payments/{id}/capture and /v1/payments/cards take an optional Idempotency-Key:
// a retry with it replays the first answer and never acts twice at the provider.

let t: TestService;
let key: string;
let otherKey: string;
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now()}-${++n}`;

const visa = async (amount = '50.00') =>
  (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', unique('pay'))
    .send({ provider: 'cardpay', amount, currency: 'USD', payment_method: 'pm_card_visa' }).expect(201)).body.data;
const refund = (body: Record<string, unknown>, idem?: string, apiKey = key) => {
  const req = t.http.post('/v1/refunds').set('X-API-Key', apiKey);
  return (idem === undefined ? req : req.set('Idempotency-Key', idem)).send(body);
};
const capture = (id: string, idem: string) => t.http.post(`/v1/payments/${id}/capture`).set('X-API-Key', key).set('Idempotency-Key', idem).send({});
const saveCard = (body: Record<string, unknown>, idem: string) => t.http.post('/v1/payments/cards').set('X-API-Key', key).set('Idempotency-Key', idem).send(body);

async function buyerApproves(approvalUrl: string) {
  await fetch(`${approvalUrl}${approvalUrl.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
}

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('Idempotent Writes Shop'));
  ({ apiKey: otherKey } = await t.createMerchant('Other Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_idem_writes_0001' } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'idem-writes-client', client_secret: 'idem-writes-secret' } }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

describe('refunds with an Idempotency-Key', () => {
  it('a retry returns the first refund (201, Idempotent-Replayed) and the provider refunds once', async () => {
    const p = await visa('50.00');
    const idem = unique('refund');
    const first = await refund({ payment_id: p.id, amount: '20.00' }, idem);
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await refund({ payment_id: p.id, amount: '20.00' }, idem);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toEqual(first.body.data);

    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(1);
    const [intent] = await t.sql<{ id: string }>(`SELECT id FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [p.id]);
    expect(await t.sql('SELECT 1 FROM sandbox_cardpay_refunds WHERE payment_intent = $1', [intent!.id])).toHaveLength(1);
    expect((await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', key)).body.data.amount_refunded).toBe('20.00');
  });

  it('20 concurrent requests with one key make one refund; every answer is that refund', async () => {
    const p = await visa('50.00');
    const idem = unique('refund-race');
    const answers = await Promise.all(Array.from({ length: 20 }, () => refund({ payment_id: p.id, amount: '5.00' }, idem)));
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(201));
    expect(new Set(answers.map((a) => a.body.data.id)).size).toBe(1);
    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(1);
    expect((await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', key)).body.data.amount_refunded).toBe('5.00');
  });

  it('the same key with another body, or from another merchant, is 409 and refunds nothing', async () => {
    const p = await visa('50.00');
    const idem = unique('refund-body');
    await refund({ payment_id: p.id, amount: '10.00' }, idem).expect(201);
    const otherBody = await refund({ payment_id: p.id, amount: '11.00' }, idem);
    expect(otherBody.status).toBe(409);
    expect(otherBody.body.error.code).toBe('CONFLICT');
    const otherMerchant = await refund({ payment_id: p.id, amount: '10.00' }, idem, otherKey);
    expect(otherMerchant.status).toBe(409);
    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(1);
  });

  it('the same refund written another way ("5.00", then 5) is the same request: replayed; another amount is 409', async () => {
    const p = await visa('50.00');
    const idem = unique('refund-written');
    const first = await refund({ payment_id: p.id, amount: '5.00' }, idem);
    expect(first.status).toBe(201);
    // Stored as the release before hashed this request (the amount as sent): a retry across the upgrade still matches.
    expect(await t.sql('SELECT request_hash FROM idempotency_keys WHERE key = $1', [idem])).toEqual([{ request_hash: hashRequest({ payment_id: p.id, amount: '5.00' }) }]);
    const asNumber = await refund({ payment_id: p.id, amount: 5 }, idem);
    expect(asNumber.status).toBe(201);
    expect(asNumber.headers['idempotent-replayed']).toBe('true');
    expect(asNumber.body.data.id).toBe(first.body.data.id);
    expect((await refund({ payment_id: p.id, amount: '5.0' }, idem)).body.data.id).toBe(first.body.data.id);
    const other = await refund({ payment_id: p.id, amount: '6.00' }, idem);
    expect(other.status).toBe(409);
    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(1);
    expect((await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', key)).body.data.amount_refunded).toBe('5.00');
  });

  it('a key an earlier release stored for a refund sent as 5 (it hashed the amount as sent) still replays that refund', async () => {
    const p = await visa('50.00');
    const idem = unique('refund-legacy');
    const first = await refund({ payment_id: p.id, amount: 5 }, idem);
    expect(first.status).toBe(201);
    // What the release before stored: the hash of the amount as sent, '5', not the formatted '5.00'.
    await t.sql('UPDATE idempotency_keys SET request_hash = $1 WHERE key = $2', [hashRequest({ payment_id: p.id, amount: '5' }), idem]);
    const retried = await refund({ payment_id: p.id, amount: 5 }, idem);
    expect([retried.status, retried.headers['idempotent-replayed'], retried.body.data?.id]).toEqual([201, 'true', first.body.data.id]);
    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(1);
  });

  it('the payment id in upper case, then lower case, is the same request: replayed, one refund', async () => {
    const p = await visa('50.00');
    const idem = unique('refund-case');
    const first = await refund({ payment_id: p.id.toUpperCase(), amount: '5.00' }, idem);
    expect(first.status).toBe(201);
    expect(first.body.data.payment_id).toBe(p.id);
    const lower = await refund({ payment_id: p.id, amount: '5.00' }, idem);
    expect([lower.status, lower.headers['idempotent-replayed'], lower.body.data?.id]).toEqual([201, 'true', first.body.data.id]);
    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(1);
    expect((await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', key)).body.data.amount_refunded).toBe('5.00');
  });

  it('a key an earlier release stored for an upper-case payment id (hashed as sent) still replays that refund', async () => {
    const p = await visa('50.00');
    const idem = unique('refund-case-legacy');
    const first = await refund({ payment_id: p.id.toUpperCase(), amount: 5 }, idem);
    expect(first.status).toBe(201);
    await t.sql('UPDATE idempotency_keys SET request_hash = $1 WHERE key = $2', [hashRequest({ payment_id: p.id.toUpperCase(), amount: '5' }), idem]);
    const retried = await refund({ payment_id: p.id.toUpperCase(), amount: 5 }, idem);
    expect([retried.status, retried.headers['idempotent-replayed'], retried.body.data?.id]).toEqual([201, 'true', first.body.data.id]);
    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(1);
  });

  it('a request refused before anything happened claims nothing: the key stays free', async () => {
    const p = await visa('10.00');
    const idem = unique('refund-over');
    const over = await refund({ payment_id: p.id, amount: '10.01' }, idem);
    expect(over.status).toBe(422);
    expect(await t.sql('SELECT 1 FROM idempotency_keys WHERE key = $1', [idem])).toEqual([]);
    await refund({ payment_id: p.id, amount: '10.01' }, idem).expect(422);
  });

  it('without a key, each request is a new refund (as before)', async () => {
    const p = await visa('50.00');
    await refund({ payment_id: p.id, amount: '1.00' }).expect(201);
    await refund({ payment_id: p.id, amount: '1.00' }).expect(201);
    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(2);
  });

  it('an empty or over-long key is 422 naming the header', async () => {
    const p = await visa('5.00');
    for (const bad of ['', 'k'.repeat(256)]) {
      const res = await refund({ payment_id: p.id }, bad);
      expect(res.status).toBe(422);
      expect(res.body.error.details[0].field).toBe('idempotency-key');
    }
    expect(await t.sql('SELECT 1 FROM refunds WHERE payment_id = $1', [p.id])).toEqual([]);
  });
});

describe('capture after the buyer cancelled at PayPal', () => {
  it('is 409 not approved and the payment stays pending with its link (PayPal keeps the order); approved later, the same key captures', async () => {
    const p = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', unique('wallet'))
      .send({ provider: 'walletpay', amount: '46.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201)).body.data;
    await fetch(`${p.next_action.url}&auto=cancel`, { redirect: 'manual' });

    const idem = unique('capture');
    const refused = await capture(p.id, idem);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'CONFLICT', message: 'the buyer has not approved this payment yet' });
    const now = (await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', key).expect(200)).body.data;
    expect(now).toMatchObject({ status: 'pending', failure_reason: null, next_action: p.next_action });
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([]);

    await buyerApproves(p.next_action.url);
    const done = await capture(p.id, idem);
    expect(done.status).toBe(200);
    expect(done.body.data.status).toBe('completed');
  });
});

describe('capture of an order PayPal voided', () => {
  it('is 409 saying the payment is now failed, and the payment is failed at once (payment.failed), not left pending', async () => {
    const p = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', unique('wallet'))
      .send({ provider: 'walletpay', amount: '46.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201)).body.data;
    // PayPal's own decision (no buyer action voids an order): set on the simulator's row.
    await t.sql(`UPDATE sandbox_walletpay_orders SET status = 'VOIDED' WHERE id = $1`, [p.provider_ref]);

    const idem = unique('capture');
    const refused = await capture(p.id, idem);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'CONFLICT', message: expect.stringMatching(/voided/) });
    expect(refused.body.error.message).toMatch(/failed/);
    const now = (await t.http.get(`/v1/payments/${p.id}`).set('X-API-Key', key).expect(200)).body.data;
    expect(now).toMatchObject({ status: 'failed', failure_reason: expect.stringMatching(/voided/), next_action: null });
    // Through the status writer: a transition made by the capture, and the merchant's event.
    expect(await t.sql('SELECT from_status, to_status, trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = $2', [p.id, 'failed']))
      .toEqual([{ from_status: 'pending', to_status: 'failed', trigger: 'capture' }]);
    expect(await t.sql('SELECT type FROM events WHERE payment_id = $1', [p.id])).toEqual([{ type: 'payment.failed' }]);
    // A retry (with the key or without) is the usual 409 for a payment that is no longer pending.
    const retried = await capture(p.id, idem);
    expect(retried.status).toBe(409);
    expect(retried.body.error.message).toMatch(/payment is failed/);
  });
});

describe('capture with an Idempotency-Key', () => {
  it('a capture before approval is 409 and frees the key; after approval it captures once and replays', async () => {
    const p = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', unique('wallet'))
      .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201)).body.data;
    const idem = unique('capture');
    const early = await capture(p.id, idem);
    expect(early.status).toBe(409);

    await buyerApproves(p.next_action.url);
    const first = await capture(p.id, idem);
    expect(first.status).toBe(200);
    expect(first.body.data.status).toBe('completed');
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await capture(p.id, idem);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toEqual(first.body.data);
    // Without the key, a second capture is the usual 409.
    expect((await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({})).status).toBe(409);

    const [row] = await t.sql<{ provider_ref: string }>('SELECT provider_ref FROM payments WHERE id = $1', [p.id]);
    expect(await t.sql('SELECT 1 FROM sandbox_walletpay_captures WHERE order_id = $1', [row!.provider_ref])).toHaveLength(1);
  });

  it('the payment id in upper case, then lower case, is the same capture: replayed, captured once', async () => {
    const p = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', unique('wallet'))
      .send({ provider: 'walletpay', amount: '15.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201)).body.data;
    await buyerApproves(p.next_action.url);
    const idem = unique('capture-case');
    const first = await capture(p.id.toUpperCase(), idem);
    expect([first.status, first.body.data?.status]).toEqual([200, 'completed']);
    const lower = await capture(p.id, idem);
    expect([lower.status, lower.headers['idempotent-replayed'], lower.body.data?.id]).toEqual([200, 'true', p.id]);
    const [row] = await t.sql<{ provider_ref: string }>('SELECT provider_ref FROM payments WHERE id = $1', [p.id]);
    expect(await t.sql('SELECT 1 FROM sandbox_walletpay_captures WHERE order_id = $1', [row!.provider_ref])).toHaveLength(1);
  });
});

describe('saved cards with an Idempotency-Key', () => {
  it('a retry returns the first card (201, Idempotent-Replayed); the provider has one customer; another body is 409', async () => {
    const idem = unique('card');
    const body = { payment_method_id: 'pm_card_visa', customer_email: 'idem@example.com' };
    const first = await saveCard(body, idem);
    expect(first.status).toBe(201);
    const again = await saveCard(body, idem);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toEqual(first.body.data);
    expect(await t.sql(`SELECT 1 FROM sandbox_cardpay_customers WHERE email = 'idem@example.com'`)).toHaveLength(1);
    expect(await t.sql('SELECT 1 FROM saved_cards WHERE id = $1', [first.body.data.id])).toHaveLength(1);

    const other = await saveCard({ ...body, payment_method_id: 'pm_card_mastercard' }, idem);
    expect(other.status).toBe(409);
  });

  it('a payment charging a saved card whose id is sent in upper case, then lower case, is the same payment: replayed', async () => {
    const card = (await saveCard({ payment_method_id: 'pm_card_visa', customer_email: 'idem-case@example.com' }, unique('card-case'))).body.data;
    const idem = unique('pay-saved-case');
    const pay = (savedCardId: string) => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem)
      .send({ provider: 'cardpay', amount: '7.00', currency: 'USD', saved_card_id: savedCardId });
    const first = await pay(card.id.toUpperCase());
    expect(first.status).toBe(201);
    const lower = await pay(card.id);
    expect([lower.status, lower.headers['idempotent-replayed'], lower.body.data?.id]).toEqual([200, 'true', first.body.data.id]);
    expect(await t.sql('SELECT 1 FROM payments WHERE idempotency_key = $1', [idem])).toHaveLength(1);
  });

  it('a card the provider refuses is refused again on a retry, without asking the provider twice', async () => {
    const idem = unique('card-bad');
    const first = await saveCard({ payment_method_id: 'pm_card_does_not_exist', customer_email: 'refused@example.com' }, idem);
    expect(first.status).toBe(422);
    const again = await saveCard({ payment_method_id: 'pm_card_does_not_exist', customer_email: 'refused@example.com' }, idem);
    expect(again.status).toBe(422);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.error).toMatchObject({ code: first.body.error.code, message: first.body.error.message, details: first.body.error.details });
    // The payment method is read before anything is made: the refusal leaves no customer at the provider.
    expect(await t.sql(`SELECT 1 FROM sandbox_cardpay_customers WHERE email = 'refused@example.com'`)).toHaveLength(0);
  });
});

describe('openapi.json describes what these routes answer', () => {
  type Documented = { description: string; headers?: Record<string, { required?: boolean }> };
  const doc = JSON.parse(JSON.stringify(openApiDocument())) as { paths: Record<string, Record<string, { responses: Record<string, Documented> }>> };
  const documented = (path: string, status: number) => doc.paths[path]!.post!.responses[String(status)];

  /** The first answer and its replay, each with the status the document gives it and the header where it says so. */
  async function answersAsDocumented(path: string, send: () => Promise<{ status: number; headers: Record<string, string> }>, expected: { first: number; replay: number }) {
    const first = await send();
    const replay = await send();
    expect([path, first.status, replay.status]).toEqual([path, expected.first, expected.replay]);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const firstDoc = documented(path, first.status);
    const replayDoc = documented(path, replay.status);
    expect([path, firstDoc, replayDoc]).toEqual([path, expect.anything(), expect.anything()]);
    // The replay's status documents the header; a status only first requests get never claims it.
    expect(replayDoc!.headers?.['Idempotent-Replayed']).toBeDefined();
    if (first.status !== replay.status) expect(firstDoc!.headers?.['Idempotent-Replayed']).toBeUndefined();
    else expect(firstDoc!.headers!['Idempotent-Replayed']!.required).toBe(false);
    expect(replayDoc!.description).toMatch(/replay/);
    // A first answer is not described as a replay.
    expect(firstDoc!.description).not.toMatch(/^The original result, replayed/);
  }

  it('payments: 201 then 200; refunds and cards: 201 both times; capture: 200 both times; each replay with its header', async () => {
    const payIdem = unique('doc-pay');
    const body = { provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' };
    const pay = () => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', payIdem).send(body);
    await answersAsDocumented('/v1/payments', pay, { first: 201, replay: 200 });

    const paid = (await pay()).body.data;
    const refundIdem = unique('doc-refund');
    await answersAsDocumented('/v1/refunds', () => refund({ payment_id: paid.id, amount: '2.00' }, refundIdem), { first: 201, replay: 201 });

    const cardIdem = unique('doc-card');
    await answersAsDocumented('/v1/payments/cards', () => saveCard({ payment_method_id: 'pm_card_visa' }, cardIdem), { first: 201, replay: 201 });
    // The 409 a card save can answer (the same key, another body) is documented too.
    expect((await saveCard({ payment_method_id: 'pm_card_mastercard' }, cardIdem)).status).toBe(409);
    expect(documented('/v1/payments/cards', 409)).toBeDefined();

    const wallet = (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', unique('doc-wallet'))
      .send({ provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' })
      .expect(201)).body.data;
    await buyerApproves(wallet.next_action.url);
    const captureIdem = unique('doc-capture');
    const captureAt = doc.paths['/v1/payments/{id}/capture']!.post!.responses;
    const first = await capture(wallet.id, captureIdem);
    const again = await capture(wallet.id, captureIdem);
    expect([first.status, first.headers['idempotent-replayed'], again.status, again.headers['idempotent-replayed']]).toEqual([200, undefined, 200, 'true']);
    expect(captureAt['200']!.description).toMatch(/^OK\. Also the answer to a replay/);
    expect(captureAt['200']!.headers!['Idempotent-Replayed']!.required).toBe(false);
  });

  it('an error a retry replays (a card the provider refused: 422) is documented with the header, as optional', async () => {
    const idem = unique('doc-card-refused');
    const body = { payment_method_id: 'pm_card_does_not_exist' };
    const first = await saveCard(body, idem);
    const again = await saveCard(body, idem);
    expect([first.status, first.headers['idempotent-replayed'], again.status, again.headers['idempotent-replayed']]).toEqual([422, undefined, 422, 'true']);
    expect(documented('/v1/payments/cards', 422)!.headers?.['Idempotent-Replayed']).toMatchObject({ required: false });
    // A 400 (the body is checked before the key is claimed) is never a replay, and says nothing of one.
    expect(documented('/v1/payments/cards', 400)!.headers?.['Idempotent-Replayed']).toBeUndefined();
  });
});
