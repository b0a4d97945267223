import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * A card payment whose creation answer was lost stays pending without a provider reference, and the
 * status sync settles it. Its schedule reaches ~31 h and ~79 h (and an overdue check runs at once after
 * an outage), while the provider keeps idempotency keys 24 h: a create repeated after that is a second
 * charge. So the sync looks the payment up at the provider by our id first, repeats the create only
 * while the provider still knows the key, and otherwise never sends it again.
 *
 * The answer is lost with the simulator's lose-answers control (the intent is made, the connection drops
 * before the answer); "never reached the provider" is its outage switch. The merchant's credentials
 * carry their own webhook secret, so no endpoint is registered and no event settles anything: only the
 * sync does, run here at once (at a later time where the test says so) instead of waiting for its schedule.
 */
let t: TestService;
let key: string;
let n = 0;
const DAY_AND_AN_HOUR_MS = 25 * 3_600_000;

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('Patient Card Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_lost_creation_0001', webhook_secret: 'whsec_lost_creation_not_registered' } }).expect(200);
});
afterAll(async () => {
  await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 0 });
  await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' });
  await t.stop();
});

const create = () => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `lost-${Date.now()}-${++n}`)
  .send({ provider: 'cardpay', amount: '40.00', currency: 'USD', payment_method: 'pm_card_visa' });
const payment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const events = async (id: string) => ((await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as { type: string }[]).map((e) => e.type);
const intentsOf = async (paymentId: string) =>
  (await t.sql<{ id: string; amount: string; status: string }>(`SELECT id, amount::text, status FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1 ORDER BY created`, [paymentId]));
/** The status sync's check of one payment, now or `laterMs` from now (a payment's created_at never changes). */
const sync = (id: string, laterMs = 0) => t.inContext(() => t.service.container.services.statusSync.syncOne(id, Date.now() + laterMs));

/** The provider charges the card; its answer never arrives (a write is not retried; a second loss is armed in case). */
async function createWithLostAnswer(): Promise<string> {
  await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 2 }).expect(200);
  const res = await create();
  await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 0 }).expect(200);
  expect(res.status).toBe(201);
  expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
  expect(await intentsOf(res.body.data.id)).toEqual([expect.objectContaining({ amount: '4000', status: 'succeeded' })]);
  return res.body.data.id;
}

/** The create never reaches the provider (it answers 500; a write is not retried). */
async function createThatNeverArrived(): Promise<string> {
  await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
  const res = await create();
  await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
  expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
  expect(await intentsOf(res.body.data.id)).toEqual([]);
  return res.body.data.id;
}

/** A day and an hour later the provider has forgotten the create's idempotency key, as Stripe does after 24 h. */
async function providerForgetsKey(id: string): Promise<void> {
  await t.sql(`DELETE FROM sandbox_cardpay_idempotency WHERE idempotency_key = $1`, [`payment-${id}`]);
}

describe('a payment older than the provider idempotency-key retention', () => {
  it('whose create answer was lost is found at the provider and completed; the card is not charged again', async () => {
    const id = await createWithLostAnswer();
    await providerForgetsKey(id);
    await sync(id, DAY_AND_AN_HOUR_MS);
    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([]);
    expect(await payment(id)).toMatchObject({ status: 'completed', provider_ref: intent!.id, integrity: { status: 'ok' } });
    expect(await events(id)).toEqual(['payment.completed']);
  });

  it('whose create never reached the provider is failed, saying nothing was charged; the create is never sent', async () => {
    const id = await createThatNeverArrived();
    await providerForgetsKey(id);
    await sync(id, DAY_AND_AN_HOUR_MS);
    expect(await intentsOf(id)).toEqual([]);
    expect(await payment(id)).toMatchObject({ status: 'failed', provider_ref: null, failure_reason: expect.stringContaining('Nothing was charged') });
    expect(await events(id)).toEqual(['payment.failed']);
  });
});

describe('a payment younger than the retention', () => {
  it('whose create answer was lost is found and completed without a repeat', async () => {
    const id = await createWithLostAnswer();
    await sync(id);
    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([]);
    expect(await payment(id)).toMatchObject({ status: 'completed', provider_ref: intent!.id });
  });

  it('whose create never reached the provider is sent again with its idempotency key and charged once', async () => {
    const id = await createThatNeverArrived();
    await sync(id);
    await sync(id);
    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([]);
    expect(intent).toMatchObject({ amount: '4000', status: 'succeeded' });
    expect(await payment(id)).toMatchObject({ status: 'completed', provider_ref: intent!.id });
  });
});

/**
 * The request creating the payment died mid-way (its key still says "call the provider") a day and an
 * hour ago, and the merchant retries with the same key now. The dead request is made up from one whose
 * answer was lost: its key put back to the provider-call step, the payment made 25 h old (the trigger
 * that keeps created_at is set aside for that one statement) and kept from the status sync.
 */
async function interruptedADayAgo(id: string): Promise<string> {
  const [row] = await t.sql<{ idempotency_key: string }>('SELECT idempotency_key FROM payments WHERE id = $1', [id]);
  await t.sql(`UPDATE idempotency_keys SET recovery_point = 'provider_call', answer = NULL, lease_token = NULL, locked_until = NULL WHERE resource_id = $1`, [id]);
  await t.sql(`BEGIN; ALTER TABLE payments DISABLE TRIGGER payments_keep_merchant_and_created_at;
    UPDATE payments SET created_at = created_at - interval '25 hours', next_sync_at = now() + interval '1 day' WHERE id = '${id}';
    ALTER TABLE payments ENABLE TRIGGER payments_keep_merchant_and_created_at; COMMIT;`);
  return row!.idempotency_key;
}
const retry = (idem: string) => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem)
  .send({ provider: 'cardpay', amount: '40.00', currency: 'USD', payment_method: 'pm_card_visa' });

describe("a merchant's retry of a creation interrupted more than the retention ago", () => {
  it('finds the first charge at the provider and completes the payment; the card is not charged again', async () => {
    const id = await createWithLostAnswer();
    const idem = await interruptedADayAgo(id);
    await providerForgetsKey(id);
    const res = await retry(idem);
    expect(res.status).toBe(200);
    expect(res.headers['idempotent-replayed']).toBe('true');
    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([]);
    expect(res.body.data).toMatchObject({ id, status: 'completed', provider_ref: intent!.id });
  });

  it('whose create never reached the provider fails the payment, saying nothing was charged; the create is not sent', async () => {
    const id = await createThatNeverArrived();
    const idem = await interruptedADayAgo(id);
    await providerForgetsKey(id);
    const res = await retry(idem);
    expect(res.status).toBe(200);
    expect(await intentsOf(id)).toEqual([]);
    expect(await payment(id)).toMatchObject({ status: 'failed', provider_ref: null, failure_reason: expect.stringContaining('Nothing was charged') });
    // The key now replays that answer.
    expect((await retry(idem)).body.data).toMatchObject({ id, status: 'failed' });
  });
});
