import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Charging a saved card (POST /v1/payments with saved_card_id) and deleting it. README: "DELETE always
 * deactivates the card here at once (it is no longer listed nor charged from its 200 on)". Before, a payment
 * created while cardpay was down stayed pending, and its create was sent later — by the status sync, or by a
 * retry with the Idempotency-Key taking over a dead request — after the card's DELETE had answered 200: the
 * customer was charged for a card the merchant had deleted. A card saved under another cardpay account (or
 * mode) than the stored credentials' was charged through them, and refused there after a payment was written.
 *
 * Each shop stores its own webhook secret: no endpoint is registered, so no provider event settles anything.
 */
let t: TestService;
let n = 0;

beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => {
  await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' });
  await t.stop();
});

const outage = (mode: 'ok' | 'error') => t.http.post('/sandbox/cardpay/_control/outage').send({ mode }).expect(200);

async function shop(s: TestService, name: string, secretKey: string) {
  const { apiKey, merchantId } = await s.createMerchant(name);
  const storeKey = (key: string) => s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
    .send({ provider: 'cardpay', cardpay: { secret_key: key, webhook_secret: `whsec_${name.replace(/\W/g, '_')}` } }).expect(200);
  await storeKey(secretKey);
  const save = async () => (await s.http.post('/v1/payments/cards').set('X-API-Key', apiKey).send({ payment_method_id: 'pm_card_visa' }).expect(201)).body.data as { id: string };
  const remove = (id: string) => s.http.delete(`/v1/payments/cards/${id}`).set('X-API-Key', apiKey);
  const charge = (cardId: string, key = `saved-charge-${Date.now()}-${++n}`) => s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', key)
    .send({ provider: 'cardpay', amount: '12.00', currency: 'USD', saved_card_id: cardId });
  const payment = async (id: string) => (await s.http.get(`/v1/payments/${id}`).set('X-API-Key', apiKey).expect(200)).body.data;
  const events = async (id: string) => ((await s.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', apiKey).expect(200)).body.data as { type: string }[]).map((e) => e.type);
  /** Every intent the simulator holds for the card's customer (what the customer was charged, or asked to be). */
  const intentsOfCard = async (cardId: string) => s.sql<{ id: string; status: string }>(
    `SELECT i.id, i.status FROM sandbox_cardpay_intents i JOIN saved_cards c ON c.customer_ref = i.customer WHERE c.id = $1`, [cardId]);
  return { apiKey, merchantId, storeKey, save, remove, charge, payment, events, intentsOfCard };
}

describe('a saved card of another cardpay account or mode than the stored credentials', () => {
  it('is refused 422 on saved_card_id: no payment written, nothing sent to cardpay, no event; charged again once its account\'s credentials are back', async () => {
    const s = await shop(t, 'Other Account Card Shop', 'sk_test_saved_charge_account_a');
    const card = await s.save();
    await s.storeKey('sk_test_saved_charge_account_b');
    const res = await s.charge(card.id);
    // Before: 502, a failed payment and payment.failed ("No such customer" from account B).
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR' });
    expect(res.body.error.details).toEqual([{ field: 'saved_card_id', issue: expect.stringContaining('was saved with other cardpay credentials') }]);
    expect(await t.sql('SELECT id FROM payments WHERE merchant_id = $1', [s.merchantId])).toEqual([]);
    expect(await t.sql('SELECT id FROM events WHERE merchant_id = $1', [s.merchantId])).toEqual([]);
    expect(await s.intentsOfCard(card.id)).toEqual([]);

    // Its own account's credentials stored again: it is charged.
    await s.storeKey('sk_test_saved_charge_account_a');
    const again = await s.charge(card.id);
    expect(again.status).toBe(201);
    expect(again.body.data).toMatchObject({ status: 'completed' });
  });
});
