import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Saving a card (POST /v1/payments/cards) makes a customer at cardpay and attaches the payment method to
 * it. What a merchant sees at the provider afterwards: one customer with the card for a save that
 * succeeded, however its attempts went, and nothing for a save that was refused.
 *
 * Stripe keeps the answer of a request that began under its idempotency key, a 500 too, and replays it to
 * every repeat for 24 h; the simulator's api-errors control does exactly that (the customer made or the
 * card attached, then 500 api_error stored under the key).
 */
let t: TestService;
let n = 0;

beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t.stop());

/** A merchant with cardpay credentials of its own account at the simulator (its own tenant there). */
async function shop() {
  const secretKey = `sk_test_card_save_${randomUUID().replace(/-/g, '')}`;
  const { apiKey } = await t.createMerchant(`Card Save Shop ${++n}`);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
  const account = `encode(sha256('${secretKey}'::bytea), 'hex')`;
  return {
    apiKey,
    /** The account's next `count` requests that change something run, then are answered 500, stored under their key. */
    failAfterRunning: (count: number) =>
      t.http.post('/sandbox/cardpay/_control/api-errors').set('Authorization', `Bearer ${secretKey}`).send({ count }).expect(200),
    save: (body: Record<string, unknown>, idempotencyKey?: string) => {
      const req = t.http.post('/v1/payments/cards').set('X-API-Key', apiKey);
      return (idempotencyKey ? req.set('Idempotency-Key', idempotencyKey) : req).send(body);
    },
    /** Every customer of the account at the provider, with the payment methods attached to it. */
    customers: async () =>
      t.sql<{ id: string; saved_card_id: string | null; attached: string[] }>(
        `SELECT c.id, c.metadata->>'saved_card_id' AS saved_card_id,
                coalesce(array_agg(pm.id ORDER BY pm.id) FILTER (WHERE pm.id IS NOT NULL), '{}') AS attached
           FROM sandbox_cardpay_customers c
           LEFT JOIN sandbox_cardpay_payment_methods pm ON pm.customer = c.id AND NOT pm.detached
          WHERE c.account = ${account} GROUP BY c.id ORDER BY c.created, c.id`,
      ),
    /** The payment methods of the account attached to a customer. */
    attached: async () => t.sql<{ id: string; customer: string }>(`SELECT id, customer FROM sandbox_cardpay_payment_methods WHERE account = ${account} AND customer IS NOT NULL AND NOT detached`),
  };
}

describe('a save answered with a stored 500, retried with its Idempotency-Key', () => {
  it('customer creation 500: 502 with Payments-Outcome: unknown, then the retry is 201 with one customer holding the card', async () => {
    const s = await shop();
    const key = `stored-500-customer-${n}`;
    await s.failAfterRunning(1);
    const first = await s.save({ payment_method_id: 'pm_card_visa', customer_email: 'ada@example.com' }, key);
    expect(first.status).toBe(502);
    expect(first.headers['payments-outcome']).toBe('unknown');
    // The customer was made; its creation's key holds the 500.
    expect(await s.customers()).toEqual([expect.objectContaining({ attached: [] })]);

    const retried = await s.save({ payment_method_id: 'pm_card_visa', customer_email: 'ada@example.com' }, key);
    expect(retried.status).toBe(201);
    const card = retried.body.data;
    expect(card).toMatchObject({ brand: 'visa', last4: '4242' });
    const [row] = await t.sql<{ payment_method_token: string; customer_ref: string }>('SELECT payment_method_token, customer_ref FROM saved_cards WHERE id = $1', [card.id]);
    // One customer, the first attempt's, made for this card, holding its payment method and nothing else.
    expect(await s.customers()).toEqual([{ id: row!.customer_ref, saved_card_id: card.id, attached: [row!.payment_method_token] }]);
    // The key now replays the card.
    const replayed = await s.save({ payment_method_id: 'pm_card_visa', customer_email: 'ada@example.com' }, key);
    expect(replayed.status).toBe(201);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body.data.id).toBe(card.id);
    expect((await t.http.get('/v1/payments/cards').set('X-API-Key', s.apiKey).expect(200)).body.data.map((c: { id: string }) => c.id)).toEqual([card.id]);
  });

  it('customer creation 500, then the attach 500 on the retry: a later retry is 201 with the card attached then, never a second', async () => {
    const s = await shop();
    const key = `stored-500-attach-${n}`;
    await s.failAfterRunning(2);
    const first = await s.save({ payment_method_id: 'pm_card_mastercard' }, key);
    expect(first.status).toBe(502);
    expect(first.headers['payments-outcome']).toBe('unknown');
    const second = await s.save({ payment_method_id: 'pm_card_mastercard' }, key);
    expect(second.status).toBe(502);
    expect(second.headers['payments-outcome']).toBe('unknown');
    // The card is attached at the provider; the service has no row for it yet.
    const [attachedThen, ...more] = await s.attached();
    expect(more).toEqual([]);
    expect(attachedThen).toBeDefined();

    const third = await s.save({ payment_method_id: 'pm_card_mastercard' }, key);
    expect(third.status).toBe(201);
    expect(third.body.data).toMatchObject({ brand: 'mastercard', last4: '4444' });
    const [row] = await t.sql<{ payment_method_token: string; customer_ref: string }>('SELECT payment_method_token, customer_ref FROM saved_cards WHERE id = $1', [third.body.data.id]);
    expect(row).toEqual({ payment_method_token: attachedThen!.id, customer_ref: attachedThen!.customer });
    expect(await s.customers()).toEqual([{ id: attachedThen!.customer, saved_card_id: third.body.data.id, attached: [attachedThen!.id] }]);
  });
});

describe('a save the provider refuses leaves nothing at the provider', () => {
  it('a card whose attach is declined: 422, and no customer left', async () => {
    const s = await shop();
    const res = await s.save({ payment_method_id: 'pm_card_chargeDeclined', customer_email: 'bob@example.com' });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([expect.objectContaining({ field: 'payment_method_id' })]);
    expect(await s.customers()).toEqual([]);
  });

  it('a payment method attached to another customer: 422, and no customer made for it', async () => {
    const s = await shop();
    const saved = (await s.save({ payment_method_id: 'pm_card_visa' }).expect(201)).body.data;
    const [row] = await t.sql<{ payment_method_token: string }>('SELECT payment_method_token FROM saved_cards WHERE id = $1', [saved.id]);
    const before = await s.customers();
    expect(before).toHaveLength(1);

    const res = await s.save({ payment_method_id: row!.payment_method_token });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: 'payment_method_id', issue: expect.stringContaining('already been attached to a customer') }]);
    expect(await s.customers()).toEqual(before);
  });

  it('a payment method that is no card (a US bank account): 422 naming payment_method_id, nothing made or attached', async () => {
    const s = await shop();
    const res = await s.save({ payment_method_id: 'pm_usBankAccount_success' });
    expect(res.status).toBe(422);
    expect(res.body.error.details).toEqual([{ field: 'payment_method_id', issue: expect.stringContaining('not a card') }]);
    expect(await s.customers()).toEqual([]);
    expect(await s.attached()).toEqual([]);
    expect((await t.http.get('/v1/payments/cards').set('X-API-Key', s.apiKey).expect(200)).body.data).toEqual([]);
  });
});
