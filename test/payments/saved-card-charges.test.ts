import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

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

/** Ends the lease of the payment's create mark (2 × PROVIDER_TIMEOUT_MS + 10 s: 30 s here), as its running out would. */
const leaseRunsOut = (s: TestService, paymentId: string) =>
  s.sql('UPDATE payments SET card_send_until = now() WHERE id = $1 AND card_send_until > now()', [paymentId]);

describe('a saved card deleted while a payment charging it is still pending (its create answered 500)', () => {
  it('the DELETE answers only once the send\'s lease ran out; the status sync never sends the create again; the payment stays pending until cardpay\'s "none" is proof, then fails', async () => {
    const s = await shop(t, 'Deleted Card Sync Shop', 'sk_test_saved_charge_sync');
    const card = await s.save();
    await outage('error');
    let paymentId: string;
    try {
      const res = await s.charge(card.id);
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
      paymentId = res.body.data.id;
      // cardpay answered 500: it may still be running the create. The DELETE deactivates the card at once but
      // answers only once the send's lease ran out. Before: it answered 200 at once (the mark was cleared on the 500).
      let answered = false;
      const deleted = s.remove(card.id).then((r) => ((answered = true), r));
      await eventually(async () => (await t.sql<{ active: boolean }>('SELECT active FROM saved_cards WHERE id = $1', [card.id]))[0]!.active === false, 10_000, 'the card to be deactivated');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(answered).toBe(false);
      expect(await t.sql('SELECT card_send_until > now() AS marked FROM payments WHERE id = $1', [paymentId])).toEqual([{ marked: true }]);
      await leaseRunsOut(t, paymentId);
      expect((await deleted).status).toBe(200);
    } finally {
      await outage('ok');
    }
    expect(await s.intentsOfCard(card.id)).toEqual([]);

    await t.inContext(() => t.service.container.services.statusSync.syncOne(paymentId));
    // Never sent again (before the first fix: sent, completed). Its create was sent once, so cardpay's "none"
    // within the replay window proves nothing (its search trails its writes): pending, no event. (Asserted
    // `failed` at once before this change: a verdict of "nothing was charged" on a create that was sent.)
    expect(await s.intentsOfCard(card.id)).toEqual([]);
    expect(await s.payment(paymentId)).toMatchObject({ status: 'pending', provider_ref: null });
    expect(await s.events(paymentId)).toEqual([]);

    // At the end of cardpay's replay window its "none" is its record: nothing was charged, the payment fails.
    await t.inContext(() => t.service.container.services.statusSync.syncOne(paymentId, Date.now() + 24 * 3_600_000));
    const p = await s.payment(paymentId);
    expect(p).toMatchObject({ status: 'failed', provider_ref: null });
    expect(p.failure_reason).toContain('Nothing was charged');
    expect(await s.events(paymentId)).toEqual(['payment.failed']);
    expect(await s.intentsOfCard(card.id)).toEqual([]);
  });

  it('a retry with the Idempotency-Key that takes over the dead first request does not send it either: the payment stays pending for the status sync, nothing charged', async () => {
    const s = await shop(t, 'Deleted Card Takeover Shop', 'sk_test_saved_charge_takeover');
    const card = await s.save();
    const key = `saved-charge-takeover-${Date.now()}`;
    await outage('error');
    let paymentId: string;
    try {
      const res = await s.charge(card.id, key);
      expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
      paymentId = res.body.data.id;
      await leaseRunsOut(t, paymentId);
      expect((await s.remove(card.id)).status).toBe(200);
    } finally {
      await outage('ok');
    }
    // The first request died before its answer was kept (its process stopped): its lease ran out.
    await t.sql(
      "UPDATE idempotency_keys SET recovery_point = 'provider_call', answer = NULL, lease_token = gen_random_uuid(), locked_until = now() - interval '1 second' WHERE scope = 'payment.create' AND key = $1",
      [key],
    );
    const retry = await s.charge(card.id, key);
    expect(retry.status).toBe(201);
    expect(retry.body.data.id).toBe(paymentId);
    // Before the first fix: resumed and sent — completed, the customer charged after the DELETE's 200. Its
    // create was sent before (answered 500), so it is not failed on the lookup's "none" either (asserted
    // `failed` before this change): pending, left to the status sync.
    expect(await s.intentsOfCard(card.id)).toEqual([]);
    expect(retry.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    expect(await s.events(paymentId)).toEqual([]);
    // The key now answers that payment.
    const replay = await s.charge(card.id, key);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data).toMatchObject({ id: paymentId });
    expect(await s.intentsOfCard(card.id)).toEqual([]);
  });
});

/** In front of the simulator: answers the search for the intent of payment `emptyFor` with an empty list, once (a search index that trails). */
class EmptySearchOnce extends ForwardingStub {
  emptyFor: string | null = null;

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (this.emptyFor && req.method === 'GET' && req.url.includes('/v1/payment_intents/search') && decodeURIComponent(req.url).includes(this.emptyFor)) {
      this.emptyFor = null;
      return jsonAnswer(200, { object: 'search_result', url: '/v1/payment_intents/search', data: [], has_more: false, next_page: null });
    }
    return forward();
  }
}

describe('a saved card deleted while cardpay ran its payment\'s create but answered 500', () => {
  let s: TestService;
  let stub: EmptySearchOnce;

  beforeAll(async () => {
    stub = new EmptySearchOnce();
    const stubUrl = await stub.start();
    s = await startTestService({ CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay` });
    stub.target = s.baseUrl;
  });
  afterAll(async () => {
    await stub.stop();
    await s.stop();
  });

  it('a lookup that finds nothing (cardpay\'s search trailing) does not fail it "nothing was charged": it stays pending, and the next check completes it', async () => {
    const secretKey = 'sk_test_saved_charge_stored_500';
    const shopOf = await shop(s, 'Stored 500 Card Shop', secretKey);
    const card = await shopOf.save();
    // cardpay runs the next create (the card charged) and answers it 500, stored under its key.
    await s.http.post('/sandbox/cardpay/_control/api-errors').set('Authorization', `Bearer ${secretKey}`).send({ count: 1 }).expect(200);
    const res = await shopOf.charge(card.id);
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const paymentId = res.body.data.id as string;
    expect(await shopOf.intentsOfCard(card.id)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
    await leaseRunsOut(s, paymentId);
    expect((await shopOf.remove(card.id)).status).toBe(200);

    stub.emptyFor = paymentId;
    await s.inContext(() => s.service.container.services.statusSync.syncOne(paymentId));
    expect(stub.emptyFor).toBeNull();
    // Before: failed "nothing was charged" (payment.failed) while the customer was charged.
    expect(await shopOf.payment(paymentId)).toMatchObject({ status: 'pending' });
    expect(await shopOf.events(paymentId)).not.toContain('payment.failed');
    expect(await shopOf.intentsOfCard(card.id)).toHaveLength(1);

    // The search finds it now: the charge is the payment's.
    await s.inContext(() => s.service.container.services.statusSync.syncOne(paymentId));
    const p = await shopOf.payment(paymentId);
    expect(p).toMatchObject({ status: 'completed' });
    expect(p.provider_ref).toBe((await shopOf.intentsOfCard(card.id))[0]!.id);
    expect(await shopOf.events(paymentId)).toEqual(['payment.completed']);
  });
});

describe('a DELETE racing a payment charging the card', () => {
  it('a DELETE that commits after the payment read the card but before its create was sent wins: nothing is sent, the payment fails', async () => {
    const s = await shop(t, 'Deleted Card Race Shop', 'sk_test_saved_charge_race');
    const card = await s.save();
    // Something holds the card's row (as a DELETE would): the DELETE below waits for it, then the payment's send.
    const holder = new pg.Client({ connectionString: t.databaseUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM saved_cards WHERE id = $1 FOR UPDATE', [card.id]);
      const waitingOn = (pattern: string) => t.sql(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`, [pattern]).then((r) => r.length > 0);
      const deleted = s.remove(card.id).then((r) => r);
      await eventually(() => waitingOn('%FROM saved_cards WHERE id%FOR UPDATE%'), 10_000, 'the DELETE to wait on the card');
      // The payment reads the card (still active: the DELETE has not committed) and reserves the payment.
      let charged: { status: number; body: { data: Record<string, unknown> } } | null = null;
      const charging = s.charge(card.id).then((r) => (charged = r));
      // Its send waits on the card behind the DELETE (before the fix nothing waited: it was sent at once).
      await eventually(async () => charged !== null || (await waitingOn('%card_send_until%')), 10_000, 'the payment to be about to send');
      await holder.query('COMMIT');
      expect((await deleted).status).toBe(200);
      await charging;
      expect(charged!.status).toBe(201);
      expect(charged!.body.data).toMatchObject({ status: 'failed', provider_ref: null });
      expect(await s.intentsOfCard(card.id)).toEqual([]);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  });
});

/** In front of the simulator: holds every payment intent create until `release` is called. */
class HoldsCreates extends ForwardingStub {
  holding = false;
  held = 0;
  private releases: (() => void)[] = [];

  release(): void {
    this.holding = false;
    for (const r of this.releases.splice(0)) r();
  }

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (this.holding && req.method === 'POST' && /\/v1\/payment_intents$/.test(req.url)) {
      this.held += 1;
      await new Promise<void>((resolve) => this.releases.push(resolve));
    }
    return forward();
  }
}

describe('a DELETE while a create of the card is already being sent', () => {
  let s: TestService;
  let stub: HoldsCreates;

  beforeAll(async () => {
    stub = new HoldsCreates();
    const stubUrl = await stub.start();
    s = await startTestService({ CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay` });
    stub.target = s.baseUrl;
  });
  afterAll(async () => {
    stub.release();
    await stub.stop();
    await s.stop();
  });

  it('the charge that began first goes out, and the DELETE answers 200 only after cardpay answered it: no charge starts after the 200', async () => {
    const shopOf = await shop(s, 'In Flight Card Shop', 'sk_test_saved_charge_in_flight');
    const card = await shopOf.save();
    stub.holding = true;
    const charging = shopOf.charge(card.id).then((r) => r); // sent now (a supertest request goes when awaited)
    await eventually(() => stub.held === 1, 10_000, 'the create to be on its way to cardpay');
    let deletedAt: number | null = null;
    const deleted = shopOf.remove(card.id).then((r) => {
      deletedAt = Date.now();
      return r;
    });
    // The card is inactive at once (a new charge is refused), but the DELETE waits for the create under way.
    await eventually(async () => (await s.sql<{ active: boolean }>('SELECT active FROM saved_cards WHERE id = $1', [card.id]))[0]!.active === false, 10_000, 'the card to be deactivated');
    expect((await shopOf.charge(card.id)).status).toBe(422);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(deletedAt).toBeNull();
    const releasedAt = Date.now();
    stub.release();
    const res = await charging;
    expect(res.body.data).toMatchObject({ status: 'completed' });
    expect((await deleted).status).toBe(200);
    expect(deletedAt!).toBeGreaterThanOrEqual(releasedAt);
    expect(await shopOf.intentsOfCard(card.id)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
  });
});

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
