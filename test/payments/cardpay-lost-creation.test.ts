import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

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
    // The first answer about this payment (its key held none): 201, not a replay.
    expect(res.status).toBe(201);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([]);
    expect(res.body.data).toMatchObject({ id, status: 'completed', provider_ref: intent!.id });
  });

  it('whose create never reached the provider fails the payment, saying nothing was charged; the create is not sent', async () => {
    const id = await createThatNeverArrived();
    const idem = await interruptedADayAgo(id);
    await providerForgetsKey(id);
    const res = await retry(idem);
    expect(res.status).toBe(201);
    expect(await intentsOf(id)).toEqual([]);
    expect(await payment(id)).toMatchObject({ status: 'failed', provider_ref: null, failure_reason: expect.stringContaining('Nothing was charged') });
    // The key now replays that answer.
    expect((await retry(idem)).body.data).toMatchObject({ id, status: 'failed' });
  });
});

/**
 * Stripe's idempotency keys and objects are per account. A payment whose create answer was lost on account A
 * (the card charged there), after which the merchant stores the secret key of another account B: through B,
 * a search finds nothing, and a repeat of `payment-<id>` would be a new charge on B (with a test token) or,
 * a day later, "nothing was charged" while A holds the charge. Each simulator key never rolled is its own account
 * (sk_test_lost_creation_0002 is another one). So a payment records the account it was created on
 * (GET /v1/account when the credentials are stored) and is never asked about through another's credentials.
 */
describe('a payment created on one provider account, the credentials then replaced by those of another', () => {
  const ACCOUNT_A = 'sk_test_lost_creation_account_a';
  const ACCOUNT_B = 'sk_test_lost_creation_0002';
  let shop: string;
  const storeKey = (secretKey: string, webhookSecret: string) => t.http.put('/v1/merchant/credentials').set('X-API-Key', shop)
    .send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: webhookSecret } }).expect(200);
  const accountOf = async (secretKey: string) =>
    (await t.http.get('/sandbox/cardpay/v1/account').set('Authorization', `Bearer ${secretKey}`).expect(200)).body as { id: string; object: string };
  const logLines = () => {
    const file = path.resolve('test-results', 'logs', `${new URL(t.databaseUrl).pathname.slice(1)}.log`);
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  /** A create on account A whose answer is lost (A charged the card), then B's key stored. */
  async function lostOnAThenB(): Promise<string> {
    const id = await lostOnA();
    await storeKey(ACCOUNT_B, 'whsec_lost_creation_account_b');
    return id;
  }
  /** A create on account A whose answer is lost (A charged the card); A's key still stored. */
  async function lostOnA(): Promise<string> {
    ({ apiKey: shop } = await t.createMerchant(`Two Accounts Shop ${++n}`));
    const stored = await storeKey(ACCOUNT_A, 'whsec_lost_creation_account_a');
    expect(stored.body.data.config_summary).toEqual({ secret_key: expect.any(String), webhook_secret: expect.any(String) });
    await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 2 }).expect(200);
    const res = await t.http.post('/v1/payments').set('X-API-Key', shop).set('Idempotency-Key', `two-accounts-${n}`)
      .send({ provider: 'cardpay', amount: '40.00', currency: 'USD', payment_method: 'pm_card_visa' });
    await t.http.post('/sandbox/cardpay/_control/lose-answers').send({ count: 0 }).expect(200);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = res.body.data.id as string;
    expect(await intentsOf(id)).toEqual([expect.objectContaining({ amount: '4000', status: 'succeeded' })]);
    return id;
  }
  const paymentOf = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', shop).expect(200)).body.data;

  it('the simulator answers GET /v1/account with one stable account per key, as Stripe does per account', async () => {
    const a = await accountOf(ACCOUNT_A);
    expect(a).toMatchObject({ id: expect.stringMatching(/^acct_[A-Za-z0-9]{16}$/), object: 'account', charges_enabled: true });
    expect((await accountOf(ACCOUNT_A)).id).toBe(a.id);
    expect((await accountOf(ACCOUNT_B)).id).not.toBe(a.id);
  });

  it('within the key retention: the create is not sent again through the other account (one intent, not two); the payment stays pending, logged for the operator', async () => {
    const id = await lostOnAThenB();
    await sync(id);
    expect(await intentsOf(id)).toHaveLength(1);
    expect(await paymentOf(id)).toMatchObject({ status: 'pending', provider_ref: null });
    const [row] = await t.sql<{ next_sync_at: Date | null; provider_account: string }>('SELECT next_sync_at, provider_account FROM payments WHERE id = $1', [id]);
    // The account with its mode: a test key sees none of the same account's live objects.
    expect(row!.provider_account).toBe(`${(await accountOf(ACCOUNT_A)).id}:test`);
    // Still re-checked on its schedule (then counted in payments_unresolved once it runs out), and said why.
    expect(row!.next_sync_at).not.toBeNull();
    const warned = logLines().filter((l) => l.paymentId === id && String(l.msg).includes('created on another provider account'));
    expect(warned).toEqual([expect.objectContaining({ level: 40, createdOnAccount: row!.provider_account, reason: expect.stringContaining(row!.provider_account) })]);
    // The credentials of its own account stored again: the sync finds the charge there and completes it.
    await storeKey(ACCOUNT_A, 'whsec_lost_creation_account_a2');
    await sync(id);
    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([]);
    expect(await paymentOf(id)).toMatchObject({ status: 'completed', provider_ref: intent!.id });
  });

  it('past the key retention: not failed as "nothing was charged" from the other account\'s empty search; still pending, nothing sent', async () => {
    const id = await lostOnAThenB();
    await providerForgetsKey(id);
    await sync(id, DAY_AND_AN_HOUR_MS);
    expect(await intentsOf(id)).toHaveLength(1);
    expect(await paymentOf(id)).toMatchObject({ status: 'pending', provider_ref: null, failure_reason: null });
    const shopEvents = (await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', shop).expect(200)).body.data as unknown[];
    expect(shopEvents).toEqual([]);
  });

  it("a refund of a payment completed on account A, asked once B's key is stored, is refused before anything is sent", async () => {
    ({ apiKey: shop } = await t.createMerchant(`Two Accounts Refund Shop ${++n}`));
    await storeKey(ACCOUNT_A, 'whsec_lost_creation_account_a');
    const paid = await t.http.post('/v1/payments').set('X-API-Key', shop).set('Idempotency-Key', `two-accounts-refund-${n}`)
      .send({ provider: 'cardpay', amount: '40.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
    expect(paid.body.data).toMatchObject({ status: 'completed' });
    await storeKey(ACCOUNT_B, 'whsec_lost_creation_account_b');
    const res = await t.http.post('/v1/refunds').set('X-API-Key', shop).set('Idempotency-Key', `two-accounts-refund-r-${n}`).send({ payment_id: paid.body.data.id, amount: '5.00' });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toContain('created on cardpay account');
    expect(await t.sql('SELECT id FROM sandbox_cardpay_refunds WHERE payment_intent = $1', [paid.body.data.provider_ref])).toEqual([]);
  });

  it("a verified refund event (signed with the secret stored with B's key) of a payment pending from A: the payment is not asked about, nor settled, through B", async () => {
    const id = await lostOnAThenB();
    // On B, an intent naming our payment (made there outside the service), paid, then refunded 5.00 in B's dashboard.
    const onB = (await t.http.post('/sandbox/cardpay/v1/payment_intents').set('Authorization', `Bearer ${ACCOUNT_B}`).type('form')
      .send({ amount: '4000', currency: 'usd', payment_method: 'pm_card_visa', confirm: 'true', 'automatic_payment_methods[enabled]': 'true', 'automatic_payment_methods[allow_redirects]': 'never', 'metadata[payment_id]': id }).expect(200)).body as { id: string; status: string; latest_charge: string };
    expect(onB.status).toBe('succeeded');
    await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${ACCOUNT_B}`).type('form').send({ payment_intent: onB.id, amount: '500' }).expect(200);
    const charge = (await t.http.get(`/sandbox/cardpay/v1/charges/${onB.latest_charge}`).set('Authorization', `Bearer ${ACCOUNT_B}`).expect(200)).body;
    const body = JSON.stringify({ id: `evt_two_accounts_${++n}_${Date.now()}`, object: 'event', type: 'charge.refunded', created: Math.floor(Date.now() / 1000), data: { object: charge } });
    const res = await t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json')
      .set('Cardpay-Signature', signatureHeader(body, 'whsec_lost_creation_account_b')).send(body);
    // B's event is never the payment's (whatever its metadata names): acknowledged, as sending it again changes
    // nothing, and nothing judged from B's answers: still pending, as the status sync leaves it.
    expect(res.status).toBe(200);
    expect(await paymentOf(id)).toMatchObject({ status: 'pending', provider_ref: null, amount_refunded: '0.00' });
    expect(await t.sql('SELECT id FROM refunds WHERE payment_id = $1', [id])).toEqual([]);
    expect((await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', shop).expect(200)).body.data).toEqual([]);
  });

  const unmatchedCallbacks = async () => total(await scrapeMetrics(t), 'provider_callbacks_total', { provider: 'cardpay', outcome: 'unmatched' });
  const completedBy = async (id: string) =>
    (await t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE payment_id = $1 AND to_status = 'completed'`, [id])).map((r) => r.trigger);
  const intentEvent = (intent: Record<string, unknown>, extra: Record<string, unknown> = {}) => JSON.stringify({
    id: `evt_two_accounts_${++n}_${Date.now()}`, object: 'event', type: 'payment_intent.succeeded', created: Math.floor(Date.now() / 1000), livemode: false, data: { object: intent }, ...extra,
  });
  const sendEvent = (body: string, secret: string) =>
    t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, secret)).send(body);

  it("a verified payment_intent.succeeded signed with the secret stored with B's key, naming a payment pending from A with its amount: acknowledged, counted unmatched, not applied", async () => {
    const id = await lostOnAThenB();
    // On B, an intent naming our payment (made there outside the service) for the payment's very amount, paid.
    const onB = (await t.http.post('/sandbox/cardpay/v1/payment_intents').set('Authorization', `Bearer ${ACCOUNT_B}`).type('form')
      .send({ amount: '4000', currency: 'usd', payment_method: 'pm_card_visa', confirm: 'true', 'automatic_payment_methods[enabled]': 'true', 'automatic_payment_methods[allow_redirects]': 'never', 'metadata[payment_id]': id }).expect(200)).body as Record<string, unknown>;
    expect(onB).toMatchObject({ status: 'succeeded', amount_received: 4000 });
    const unmatched = await unmatchedCallbacks();
    const body = intentEvent(onB);
    const res = await sendEvent(body, 'whsec_lost_creation_account_b');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true });
    expect(await paymentOf(id)).toMatchObject({ status: 'pending', provider_ref: null });
    expect(await completedBy(id)).toEqual([]);
    expect(await t.sql('SELECT 1 FROM provider_events WHERE payment_id = $1', [id])).toEqual([]);
    expect((await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', shop).expect(200)).body.data).toEqual([]);
    // Counted as one naming nothing of ours (the counter moves as the answer finishes, which supertest may see first).
    expect(await eventually(async () => {
      const now = await unmatchedCallbacks();
      return now > unmatched ? now : null;
    })).toBe(unmatched + 1);
    const [row] = await t.sql<{ provider_account: string }>('SELECT provider_account FROM payments WHERE id = $1', [id]);
    const warned = logLines().filter((l) => l.paymentId === id && String(l.msg).includes('another provider account than its payment was created on'));
    expect(warned).toEqual([expect.objectContaining({ level: 40, createdOnAccount: row!.provider_account, eventAccount: `${(await accountOf(ACCOUNT_B)).id}:test` })]);
    // A's key stored again: the sync completes the payment with A's charge, never B's intent.
    await storeKey(ACCOUNT_A, 'whsec_lost_creation_account_a2');
    await sync(id);
    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([expect.objectContaining({ id: onB.id })]);
    expect(await paymentOf(id)).toMatchObject({ status: 'completed', provider_ref: intent!.id });
  });

  it("an event of the key's other mode (livemode: true for a test key's payment), signed with the stored secret, is not applied; the same event in the payment's mode is", async () => {
    const id = await lostOnA();
    const [onA] = await intentsOf(id);
    const intent = (await t.http.get(`/sandbox/cardpay/v1/payment_intents/${onA!.id}`).set('Authorization', `Bearer ${ACCOUNT_A}`).expect(200)).body as Record<string, unknown>;
    const live = await sendEvent(intentEvent({ ...intent, livemode: true }, { livemode: true }), 'whsec_lost_creation_account_a');
    expect(live.status).toBe(200);
    expect(await paymentOf(id)).toMatchObject({ status: 'pending', provider_ref: null });
    const [row] = await t.sql<{ provider_account: string }>('SELECT provider_account FROM payments WHERE id = $1', [id]);
    expect(logLines().filter((l) => l.paymentId === id && String(l.msg).includes('another provider account'))).toEqual([
      expect.objectContaining({ createdOnAccount: row!.provider_account, eventAccount: row!.provider_account.replace(/:test$/, ':live') }),
    ]);
    // Nor an event of a connected account (a Connect endpoint's), in the payment's mode.
    await sendEvent(intentEvent(intent, { account: 'acct_connected0000001' }), 'whsec_lost_creation_account_a').expect(200);
    expect(await paymentOf(id)).toMatchObject({ status: 'pending', provider_ref: null });
    // The payment's own mode and account: applied as it says.
    await sendEvent(intentEvent(intent), 'whsec_lost_creation_account_a').expect(200);
    expect(await paymentOf(id)).toMatchObject({ status: 'completed', provider_ref: onA!.id });
    expect(await completedBy(id)).toEqual(['callback:payment_intent.succeeded']);
  });

  it('credentials stored while their account cannot be read (the provider down) prove no other account: earlier payments are refunded as before', async () => {
    ({ apiKey: shop } = await t.createMerchant(`Unknown Account Shop ${++n}`));
    await storeKey(ACCOUNT_A, 'whsec_lost_creation_account_a');
    const paid = await t.http.post('/v1/payments').set('X-API-Key', shop).set('Idempotency-Key', `unknown-account-${n}`)
      .send({ provider: 'cardpay', amount: '40.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
    expect((await t.sql<{ provider_account: string }>('SELECT provider_account FROM payments WHERE id = $1', [paid.body.data.id]))[0]!.provider_account).toMatch(/^acct_\w+:test$/);
    // Stored again (a rolled key, say) while GET /v1/account fails: its account is not recorded.
    await t.http.delete('/v1/merchant/credentials/cardpay').set('X-API-Key', shop).expect(200);
    await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'error' }).expect(200);
    try {
      await storeKey(ACCOUNT_A, 'whsec_lost_creation_account_a');
    } finally {
      await t.http.post('/sandbox/cardpay/_control/outage').send({ mode: 'ok' }).expect(200);
    }
    const res = await t.http.post('/v1/refunds').set('X-API-Key', shop).set('Idempotency-Key', `unknown-account-r-${n}`).send({ payment_id: paid.body.data.id, amount: '5.00' });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'completed', amount: '5.00' });
  });
});
