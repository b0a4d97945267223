import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The cardpay simulator keeps its statements prepared on its connections. A migration run by another
 * process (a rolling deploy) that adds columns to the simulator's tables must not break the
 * connections this process already has: every kind of request still answers as before.
 */
let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t.stop());

const key = `sk_test_${randomUUID().replace(/-/g, '')}`;
const base = '/sandbox/cardpay';
const post = (path: string, form: Record<string, string>, idempotencyKey?: string) => {
  const req = t.http.post(`${base}${path}`).set('Authorization', `Bearer ${key}`).type('form');
  return (idempotencyKey ? req.set('Idempotency-Key', idempotencyKey) : req).send(form);
};
const get = (path: string) => t.http.get(`${base}${path}`).set('Authorization', `Bearer ${key}`);
const visa = { amount: '2000', currency: 'usd', payment_method: 'pm_card_visa', confirm: 'true', 'automatic_payment_methods[enabled]': 'true', 'automatic_payment_methods[allow_redirects]': 'never' };

/** Every kind of request the service makes: a keyed create, its replay, a retrieval, a list, a search, an update, a refund. */
async function everyKindOfRequest(): Promise<void> {
  const idempotencyKey = randomUUID();
  const created = await post('/v1/payment_intents', { ...visa, 'metadata[payment_id]': idempotencyKey }, idempotencyKey).expect(200);
  const replayed = await post('/v1/payment_intents', { ...visa, 'metadata[payment_id]': idempotencyKey }, idempotencyKey).expect(200);
  expect(replayed.body.id).toBe(created.body.id);
  expect(replayed.headers['idempotent-replayed']).toBe('true');
  await get(`/v1/payment_intents/${created.body.id}`).expect(200);
  const list = await get('/v1/payment_intents?limit=1').expect(200);
  expect(list.body.data[0].id).toBe(created.body.id);
  const found = await get(`/v1/payment_intents/search?query=${encodeURIComponent(`metadata['payment_id']:'${idempotencyKey}'`)}`).expect(200);
  expect(found.body.data.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
  await post(`/v1/payment_intents/${created.body.id}`, { description: 'updated' }).expect(200);
  const refund = await post('/v1/refunds', { payment_intent: created.body.id, amount: '500' }, randomUUID()).expect(200);
  await get(`/v1/refunds/${refund.body.id}`).expect(200);
  const pending = await post('/v1/payment_intents', { amount: '1500', currency: 'usd' }).expect(200);
  await post(`/v1/payment_intents/${pending.body.id}/cancel`, {}).expect(200);
}

describe('a migration adding columns while the simulator runs', () => {
  it('leaves every kind of request answering as before', async () => {
    // Twice, one request at a time: the pool's connections have run (and prepared) these statements.
    await everyKindOfRequest();
    await everyKindOfRequest();
    for (const table of ['sandbox_cardpay_intents', 'sandbox_cardpay_payment_methods', 'sandbox_cardpay_refunds', 'sandbox_cardpay_idempotency', 'sandbox_controls']) {
      await t.sql(`ALTER TABLE ${table} ADD COLUMN added_by_a_later_release text`);
    }
    await everyKindOfRequest();
    await everyKindOfRequest();
  });
});
