import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;

async function payment(body: Record<string, unknown>) {
  return t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `rc-${Date.now()}-${++n}`).send(body);
}
const visa = (amount = '100.00') => payment({ provider: 'cardpay', amount, currency: 'USD', payment_method: 'pm_card_visa' });
const refund = (body: Record<string, unknown>, apiKey = key) => t.http.post('/v1/refunds').set('X-API-Key', apiKey).send(body);
const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;

beforeAll(async () => {
  t = await startTestService();
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Refund Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_refunds_0001' } }).expect(200);
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('refunds', () => {
  it('refunds in part, then the remainder: amount_refunded grows, the payment ends refunded, each emits payment.refunded', async () => {
    const p = (await visa('100.00')).body.data;
    const first = await refund({ payment_id: p.id, amount: '30.00' });
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({ payment_id: p.id, status: 'completed', amount: '30.00', currency: 'USD', failure_reason: null });
    expect(first.body.data.provider_ref).toMatch(/^re_/);
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '30.00' });

    const rest = await refund({ payment_id: p.id });
    expect(rest.body.data.amount).toBe('70.00');
    expect(await getPayment(p.id)).toMatchObject({ status: 'refunded', amount_refunded: '100.00' });

    const events = await eventually(() => {
      const mine = receiver.events('payment.refunded').filter((e) => e.json.data.payment_id === p.id);
      return mine.length === 2 ? mine : null;
    });
    const byRefund = Object.fromEntries(events.map((e) => [e.json.data.refund_id, e.json.data]));
    expect(byRefund[first.body.data.id]).toMatchObject({ status: 'completed', previous_status: 'completed', amount_refunded: '30.00', amount: '100.00' });
    expect(byRefund[rest.body.data.id]).toMatchObject({ status: 'refunded', previous_status: 'completed', amount_refunded: '100.00' });

    const got = await t.http.get(`/v1/refunds/${first.body.data.id}`).set('X-API-Key', key);
    expect(got.body.data).toEqual(first.body.data);
    const list = await t.http.get('/v1/refunds').query({ payment_id: p.id }).set('X-API-Key', key);
    expect(list.body.data.map((r: { id: string }) => r.id)).toEqual([first.body.data.id, rest.body.data.id]);
    expect(list.body.meta).toEqual({ page: 1, page_size: 50, total: 2 });
  });

  it('refuses an over-refund with 422 and a refund of a refunded payment with 409', async () => {
    const p = (await visa('10.00')).body.data;
    const over = await refund({ payment_id: p.id, amount: '10.01' });
    expect(over.status).toBe(422);
    expect(over.body.error.details[0].field).toBe('amount');
    await refund({ payment_id: p.id }).expect(201);
    const again = await refund({ payment_id: p.id, amount: '1.00' });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('CONFLICT');
  });

  it('refuses zero, negative and over-precise amounts with 422', async () => {
    const p = (await visa('10.00')).body.data;
    for (const amount of ['0', '-1', '0.001', 'abc']) {
      const res = await refund({ payment_id: p.id, amount });
      expect(res.status).toBe(422);
    }
    expect((await getPayment(p.id)).amount_refunded).toBe('0.00');
  });

  it('refuses to refund a failed payment (409) and an unknown or foreign one (404)', async () => {
    const failed = (await payment({ provider: 'cardpay', amount: '5.00', currency: 'USD', payment_method: 'pm_card_chargeDeclined' })).body.data;
    expect((await refund({ payment_id: failed.id })).status).toBe(409);
    expect((await refund({ payment_id: '00000000-0000-4000-8000-000000000000' })).status).toBe(404);
    const other = await t.createMerchant('Stranger');
    const mine = (await visa('5.00')).body.data;
    expect((await refund({ payment_id: mine.id }, other.apiKey)).status).toBe(404);
    expect((await t.http.get(`/v1/refunds?payment_id=${mine.id}`).set('X-API-Key', other.apiKey)).status).toBe(404);
  });

  it('two concurrent partial refunds can never exceed the amount', async () => {
    const p = (await visa('10.00')).body.data;
    const results = await Promise.all([refund({ payment_id: p.id, amount: '6.00' }), refund({ payment_id: p.id, amount: '6.00' })]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 422]);
    expect((await getPayment(p.id)).amount_refunded).toBe('6.00');
  });
});

describe('refund metadata', () => {
  const refundsOf = async (paymentId: string) => (await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM refunds WHERE payment_id = $1', [paymentId]))[0]!.n;

  it('is stored with the refund and returned on every read; {} when none', async () => {
    const p = (await visa('40.00')).body.data;
    const res = await refund({ payment_id: p.id, amount: '4.00', metadata: { return_id: 'RMA-2291', reason: 'damaged in transit' } });
    expect(res.status).toBe(201);
    expect(res.body.data.metadata).toEqual({ return_id: 'RMA-2291', reason: 'damaged in transit' });
    expect((await t.http.get(`/v1/refunds/${res.body.data.id}`).set('X-API-Key', key).expect(200)).body.data.metadata).toEqual(res.body.data.metadata);
    const listed = (await t.http.get('/v1/refunds').query({ payment_id: p.id }).set('X-API-Key', key).expect(200)).body.data;
    expect(listed[0].metadata).toEqual(res.body.data.metadata);
    expect((await refund({ payment_id: p.id, amount: '1.00' })).body.data.metadata).toEqual({});
  });

  it('is part of what an Idempotency-Key stands for: the same pairs in any order replay, other pairs are 409', async () => {
    const p = (await visa('40.00')).body.data;
    const idem = `refund-meta-${++n}`;
    const send = (metadata?: Record<string, string>) =>
      t.http.post('/v1/refunds').set('X-API-Key', key).set('Idempotency-Key', idem).send({ payment_id: p.id, amount: '5.00', ...(metadata ? { metadata } : {}) });
    const first = await send({ a: '1', b: '2' });
    expect(first.status).toBe(201);
    const again = await send({ b: '2', a: '1' });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data.id).toBe(first.body.data.id);
    expect((await send({ a: '1', b: '3' })).status).toBe(409);
    expect((await send()).status).toBe(409);
    expect(await refundsOf(p.id)).toBe(1);
  });

  it('a bad one is refused (422) with the field named, and no refund is written', async () => {
    const p = (await visa('40.00')).body.data;
    const tooMany = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
    for (const metadata of [tooMany, { 'has space': 'v' }, { return_id: 'x'.repeat(501) }, { return_id: 7 }, ['return_id']]) {
      const res = await refund({ payment_id: p.id, metadata });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect((res.body.error.details as { field: string }[]).some((d) => d.field.startsWith('metadata'))).toBe(true);
    }
    expect(await refundsOf(p.id)).toBe(0);
  });
});

describe("listing the merchant's refunds", () => {
  it('without payment_id: every payment\'s refunds newest first, filtered by status and creation time, paged with an exact total', async () => {
    const shop = await t.createMerchant('Refund Ledger Shop');
    const SECRET = 'sk_test_refund_list_0001';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: SECRET } }).expect(200);
    const pay = async () => (await t.http.post('/v1/payments').set('X-API-Key', shop.apiKey).set('Idempotency-Key', `list-${++n}`)
      .send({ provider: 'cardpay', amount: '20.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201)).body.data as { id: string };
    const first = (await refund({ payment_id: (await pay()).id, amount: '1.00' }, shop.apiKey).expect(201)).body.data;
    const second = (await refund({ payment_id: (await pay()).id, amount: '2.00' }, shop.apiKey).expect(201)).body.data;
    // A third the provider does not answer: it stays pending (the refund sync's first re-check is a minute away).
    const unanswered = await pay();
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      expect((await refund({ payment_id: unanswered.id, amount: '3.00' }, shop.apiKey)).body.data).toMatchObject({ status: 'pending', amount: '3.00' });
    } finally {
      await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    const list = async (query: Record<string, string | number> = {}, apiKey = shop.apiKey) => {
      const res = await t.http.get('/v1/refunds').query(query).set('X-API-Key', apiKey);
      expect(res.status).toBe(200);
      return { amounts: (res.body.data as { amount: string }[]).map((r) => r.amount), total: res.body.meta.total as number };
    };

    expect(await list()).toEqual({ amounts: ['3.00', '2.00', '1.00'], total: 3 });
    expect(await list({ status: 'pending' })).toEqual({ amounts: ['3.00'], total: 1 });
    expect(await list({ status: 'completed' })).toEqual({ amounts: ['2.00', '1.00'], total: 2 });
    // Created after since and before until; created_at is shown to the millisecond, the rows are stamped to the microsecond.
    const stamp = async (id: string, minus = '0') => (await t.sql<{ at: string }>(
      `SELECT to_char((created_at - $2::int * interval '1 microsecond') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at FROM refunds WHERE id = $1`, [id, minus],
    ))[0]!.at;
    expect(await list({ since: await stamp(second.id) })).toEqual({ amounts: ['3.00'], total: 1 });
    expect(await list({ since: await stamp(second.id, '1') })).toEqual({ amounts: ['3.00', '2.00'], total: 2 });
    expect(await list({ until: second.created_at })).toEqual({ amounts: ['1.00'], total: 1 });
    expect(await list({ status: 'completed', since: await stamp(first.id, '1'), until: second.created_at })).toEqual({ amounts: ['1.00'], total: 1 });
    expect(await list({ page_size: 2 })).toEqual({ amounts: ['3.00', '2.00'], total: 3 });
    expect(await list({ page_size: 2, page: 2 })).toEqual({ amounts: ['1.00'], total: 3 });
    // Another merchant's refunds are not in the list.
    expect((await list({}, key)).amounts).not.toContain('3.00');
    expect(await list({}, (await t.createMerchant('Empty Shop')).apiKey)).toEqual({ amounts: [], total: 0 });

    // since after until is refused as on the payment list, not answered "no refunds in this window".
    for (const query of [{ status: 'refunded' }, { since: 'yesterday' }, { payment_id: 'not-a-uuid' }, { since: '2026-11-22T00:00:00Z', until: '2026-11-21T00:00:00Z' }]) {
      const bad = await t.http.get('/v1/refunds').query(query).set('X-API-Key', shop.apiKey);
      expect(bad.status).toBe(422);
      expect(bad.body.error.details[0].field).toBe(Object.keys(query)[0]);
    }
  });
});

describe('saved cards', () => {
  it('saves a card (token, brand, last4, expiry only), lists it, charges it off-session, deletes it', async () => {
    const saved = await t.http.post('/v1/payments/cards').set('X-API-Key', key).send({ payment_method_id: 'pm_card_visa', customer_email: 'buyer@example.com', customer_name: 'Ada Buyer' });
    expect(saved.status).toBe(201);
    expect(saved.body.data).toEqual({
      id: expect.any(String), provider: 'cardpay', brand: 'visa', last4: '4242', exp_month: expect.any(Number), exp_year: expect.any(Number),
      is_default: true, created_at: expect.any(String),
    });
    const row = (await t.sql('SELECT * FROM saved_cards WHERE id = $1', [saved.body.data.id]))[0]!;
    expect(Object.keys(row).sort()).toEqual(['active', 'brand', 'created_at', 'customer_ref', 'deleted_at', 'detach_due_at', 'exp_month', 'exp_year', 'id', 'is_default', 'last4', 'merchant_id', 'payment_method_token', 'provider', 'provider_account']);

    const second = await t.http.post('/v1/payments/cards').set('X-API-Key', key).send({ payment_method_id: 'pm_card_mastercard' });
    expect(second.body.data.is_default).toBe(false);
    const list = await t.http.get('/v1/payments/cards').set('X-API-Key', key);
    expect(list.body.data.map((c: { id: string }) => c.id)).toEqual([saved.body.data.id, second.body.data.id]);
    expect(list.body.meta.total).toBe(2);

    const charge = await payment({ provider: 'cardpay', amount: '12.00', currency: 'USD', saved_card_id: saved.body.data.id });
    expect(charge.status).toBe(201);
    expect(charge.body.data.status).toBe('completed');
    expect(charge.body.data.next_action).toBeNull();

    const deleted = await t.http.delete(`/v1/payments/cards/${saved.body.data.id}`).set('X-API-Key', key);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true, data: { id: saved.body.data.id, deleted: true } });
    const after = await t.http.get('/v1/payments/cards').set('X-API-Key', key);
    expect(after.body.data.map((c: { id: string }) => c.id)).toEqual([second.body.data.id]);

    const refused = await payment({ provider: 'cardpay', amount: '12.00', currency: 'USD', saved_card_id: saved.body.data.id });
    expect(refused.status).toBe(422);
    expect(refused.body.error.details[0].field).toBe('saved_card_id');
    expect((await t.http.delete(`/v1/payments/cards/${saved.body.data.id}`).set('X-API-Key', key)).status).toBe(404);
  });

  it("a save whose provider answer was lost is 502 with Payments-Outcome: unknown; the retry with its key resumes to 201, one customer and card at the provider", async () => {
    const email = `lost-answer-${Date.now()}@example.com`;
    const idem = `card-lost-${Date.now()}`;
    const save = () => t.http.post('/v1/payments/cards').set('X-API-Key', key).set('Idempotency-Key', idem).send({ payment_method_id: 'pm_card_visa', customer_email: email });
    // The provider makes the customer; its answer never comes back (the connection drops).
    await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 1 }).expect(200);
    let first;
    try {
      first = await save();
    } finally {
      await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 0 }).expect(200);
    }
    expect(first.status).toBe(502);
    expect(first.headers['payments-outcome']).toBe('unknown');
    expect(first.body.error.code).toBe('PROVIDER_ERROR');
    expect(await t.sql('SELECT 1 FROM sandbox_cardpay_customers WHERE email = $1', [email])).toHaveLength(1);

    const retried = await save();
    expect(retried.status).toBe(201);
    const [customer] = await t.sql<{ id: string }>('SELECT id FROM sandbox_cardpay_customers WHERE email = $1', [email]);
    expect(await t.sql('SELECT 1 FROM sandbox_cardpay_customers WHERE email = $1', [email])).toHaveLength(1);
    expect(await t.sql('SELECT 1 FROM sandbox_cardpay_payment_methods WHERE customer = $1', [customer!.id])).toHaveLength(1);
    expect((await t.sql('SELECT customer_ref FROM saved_cards WHERE id = $1', [retried.body.data.id]))[0]).toEqual({ customer_ref: customer!.id });
    // From then on the key replays the card.
    const replayed = await save();
    expect(replayed.status).toBe(201);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body.data.id).toBe(retried.body.data.id);
  });

  it("an attach whose answer was lost (the card attached): 502 with Payments-Outcome: unknown; the retry with the key gets that card back, not a second", async () => {
    const email = `lost-attach-${Date.now()}@example.com`;
    const idem = `card-lost-attach-${Date.now()}`;
    const save = () => t.http.post('/v1/payments/cards').set('X-API-Key', key).set('Idempotency-Key', idem).send({ payment_method_id: 'pm_card_visa', customer_email: email });
    await t.http.post('/sandbox/cardpay/_control/lose-attach-answers').send({ count: 1 }).expect(200);
    let first;
    try {
      first = await save();
    } finally {
      await t.http.post('/sandbox/cardpay/_control/lose-attach-answers').send({ count: 0 }).expect(200);
    }
    expect(first.status).toBe(502);
    expect(first.headers['payments-outcome']).toBe('unknown');
    const [customer] = await t.sql<{ id: string }>('SELECT id FROM sandbox_cardpay_customers WHERE email = $1', [email]);
    const attached = await t.sql<{ id: string }>('SELECT id FROM sandbox_cardpay_payment_methods WHERE customer = $1', [customer!.id]);
    expect(attached).toHaveLength(1);
    expect(await t.sql('SELECT 1 FROM saved_cards WHERE customer_ref = $1', [customer!.id])).toHaveLength(0);

    const retried = await save();
    expect(retried.status).toBe(201);
    expect(await t.sql('SELECT 1 FROM sandbox_cardpay_customers WHERE email = $1', [email])).toHaveLength(1);
    expect(await t.sql('SELECT id FROM sandbox_cardpay_payment_methods WHERE customer = $1', [customer!.id])).toEqual(attached);
    expect((await t.sql('SELECT payment_method_token, customer_ref FROM saved_cards WHERE id = $1', [retried.body.data.id]))[0])
      .toEqual({ payment_method_token: attached[0]!.id, customer_ref: customer!.id });
  });

  it('a saved card that declines later fails its off-session charge', async () => {
    const saved = await t.http.post('/v1/payments/cards').set('X-API-Key', key).send({ payment_method_id: 'pm_card_chargeCustomerFail' });
    expect(saved.status).toBe(201);
    const charge = await payment({ provider: 'cardpay', amount: '3.00', currency: 'USD', saved_card_id: saved.body.data.id });
    expect(charge.body.data.status).toBe('failed');
  });

  it("rejects a bad email with 422, and hides another merchant's card (404)", async () => {
    const bad = await t.http.post('/v1/payments/cards').set('X-API-Key', key).send({ payment_method_id: 'pm_card_visa', customer_email: 'not-an-email' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details[0].field).toBe('customer_email');
    const saved = await t.http.post('/v1/payments/cards').set('X-API-Key', key).send({ payment_method_id: 'pm_card_visa' });
    const other = await t.createMerchant('Card Thief');
    expect((await t.http.delete(`/v1/payments/cards/${saved.body.data.id}`).set('X-API-Key', other.apiKey)).status).toBe(404);
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_thief_0001' } }).expect(200);
    const charge = await t.http.post('/v1/payments').set('X-API-Key', other.apiKey).set('Idempotency-Key', `thief-${Date.now()}`)
      .send({ provider: 'cardpay', amount: '1.00', currency: 'USD', saved_card_id: saved.body.data.id });
    expect(charge.status).toBe(422);
  });

  type Card = { id: string; is_default: boolean };
  const shopWithCards = async (name: string, secretKey: string) => {
    const shop = await t.createMerchant(name);
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
    const save = async (pm = 'pm_card_visa') => (await t.http.post('/v1/payments/cards').set('X-API-Key', shop.apiKey).send({ payment_method_id: pm }).expect(201)).body.data as Card;
    const cards = async () => (await t.http.get('/v1/payments/cards').set('X-API-Key', shop.apiKey).expect(200)).body.data as Card[];
    const remove = (id: string) => t.http.delete(`/v1/payments/cards/${id}`).set('X-API-Key', shop.apiKey);
    const defaults = async () => (await cards()).filter((c) => c.is_default).map((c) => c.id);
    return { shop, save, cards, remove, defaults };
  };

  it('deleting the default card makes the most recently saved remaining card the default; a merchant with cards always has exactly one', async () => {
    const { save, remove, defaults } = await shopWithCards('Default Card Shop', 'sk_test_default_cards_01');
    const first = await save();
    const second = await save('pm_card_mastercard');
    const third = await save('pm_card_amex');
    expect([first.is_default, second.is_default, third.is_default]).toEqual([true, false, false]);

    await remove(first.id).expect(200);
    expect(await defaults()).toEqual([third.id]);
    // Deleting a card that is not the default leaves the default alone.
    await remove(second.id).expect(200);
    expect(await defaults()).toEqual([third.id]);
    // The last card gone, the next card saved is the default again.
    await remove(third.id).expect(200);
    expect(await defaults()).toEqual([]);
    const fourth = await save();
    expect(fourth.is_default).toBe(true);
    expect(await defaults()).toEqual([fourth.id]);
  });

  it('first cards saved at the same time: every save succeeds and exactly one card is the default', async () => {
    const { save, cards, defaults } = await shopWithCards('Concurrent Card Shop', 'sk_test_default_cards_02');
    const saved = await Promise.all(Array.from({ length: 12 }, () => save()));
    expect(saved.filter((c) => c.is_default)).toHaveLength(1);
    expect(await cards()).toHaveLength(12);
    expect(await defaults()).toEqual([saved.find((c) => c.is_default)!.id]);
  });

  it('a saved card is deleted even when the merchant has no card credentials any more, or credentials of another provider account', async () => {
    const { shop, save, cards, remove, defaults } = await shopWithCards('Card Credentials Gone Shop', 'sk_test_cards_creds_01');
    const kept = await save();
    const orphan = await save('pm_card_mastercard');
    await t.http.delete('/v1/merchant/credentials/cardpay').set('X-API-Key', shop.apiKey).expect(200);
    const deleted = await remove(orphan.id);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true, data: { id: orphan.id, deleted: true } });
    expect((await cards()).map((c) => c.id)).toEqual([kept.id]);
    const log = readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter((l) => l.includes(orphan.id));
    // The detach stays due for the worker (test/payments/card-detach.test.ts), once credentials of the card's account are stored again.
    expect(log.join('\n')).toContain('could not be detached at the provider: retried by the worker');

    // Credentials of another provider account: it does not know the card's payment method. Still deleted.
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_cards_creds_02' } }).expect(200);
    await remove(kept.id).expect(200);
    expect(await cards()).toEqual([]);
    expect(await defaults()).toEqual([]);
    expect((await remove(kept.id)).status).toBe(404);
  });
});
