import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

// The Agenda job `idempotency-keys.prune` deletes idempotency keys past IDEMPOTENCY_KEY_RETENTION (the
// default, 24 h, is what runs here; keys are aged by moving created_at and updated_at back). Pruned: finished refund,
// capture and card keys, and claims abandoned with their lease long expired. Kept: recent keys, a claim
// whose lease is live, and payment-creation keys (their replay has no time limit). The cutoff is the
// database's now() less the retention (the clock created_at and updated_at are written by), never a worker's.

let t: TestService;
let key: string;
let merchantId: string;
let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now()}-${++n}`;

const visa = async (amount: string) =>
  (await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', unique('pay'))
    .send({ provider: 'cardpay', amount, currency: 'USD', payment_method: 'pm_card_visa' }).expect(201)).body.data;
const refund = (paymentId: string, amount: string, idem: string) =>
  t.http.post('/v1/refunds').set('X-API-Key', key).set('Idempotency-Key', idem).send({ payment_id: paymentId, amount });
const saveCard = (email: string, idem: string) =>
  t.http.post('/v1/payments/cards').set('X-API-Key', key).set('Idempotency-Key', idem).send({ payment_method_id: 'pm_card_visa', customer_email: email });
const keyRows = (keys: string[]) =>
  t.sql<{ key: string }>('SELECT key FROM idempotency_keys WHERE key = ANY($1) ORDER BY key', [keys]).then((rows) => rows.map((r) => r.key).sort());
const age = (keys: string[], interval: string) =>
  t.sql(`UPDATE idempotency_keys SET created_at = now() - $2::interval, updated_at = now() - $2::interval WHERE key = ANY($1)`, [keys, interval]);

beforeAll(async () => {
  t = await startTestService({ IDEMPOTENCY_KEY_PRUNE_INTERVAL: '500ms' });
  ({ apiKey: key, merchantId } = await t.createMerchant('Key Retention Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_key_retention_0001' } }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

describe('idempotency key retention (IDEMPOTENCY_KEY_RETENTION, 24 h by default)', () => {
  it('prunes old finished and abandoned keys; keeps recent ones, live leases and payment-creation keys', async () => {
    const payment = await visa('50.00');
    const oldRefund = unique('refund-old');
    const recentRefund = unique('refund-recent');
    const oldCard = unique('card-old');
    const touchedRefund = unique('refund-touched');
    await refund(payment.id, '5.00', oldRefund).expect(201);
    await refund(payment.id, '5.00', recentRefund).expect(201);
    await refund(payment.id, '5.00', touchedRefund).expect(201);
    await saveCard('retention-old@example.com', oldCard).expect(201);
    const [{ idempotency_key: paymentKey }] = await t.sql<{ idempotency_key: string }>('SELECT idempotency_key FROM payments WHERE id = $1', [payment.id]) as [{ idempotency_key: string }];

    // Two claims of requests that were still acting when they were last touched, 2 days ago: one whose
    // lease is live (a request is on it right now) and one whose holder died and nobody resumed.
    const leased = unique('refund-leased');
    const abandoned = unique('refund-abandoned');
    for (const [k, lease] of [[leased, "now() + interval '1 hour'"], [abandoned, "now() - interval '47 hours'"]] as const) {
      await t.sql(
        `INSERT INTO idempotency_keys (scope, key, merchant_id, request_hash, recovery_point, resource_id, lease_token, locked_until, created_at, updated_at)
         VALUES ('refund.create', $1, $2, 'h', 'provider_call', $3, $4, ${lease}, now() - interval '2 days', now() - interval '2 days')`,
        [k, merchantId, randomUUID(), randomUUID()],
      );
    }
    await age([oldRefund, oldCard, paymentKey], '25 hours');
    await age([recentRefund], '23 hours');
    // Made 2 days ago, last changed now: kept (retention runs from the last change).
    await t.sql(`UPDATE idempotency_keys SET created_at = now() - interval '2 days' WHERE key = $1`, [touchedRefund]);

    await eventually(async () => (await keyRows([oldRefund, oldCard, abandoned])).length === 0, 10_000, 'the prune job');
    expect(await keyRows([recentRefund, touchedRefund, leased, paymentKey, oldRefund, oldCard, abandoned])).toEqual([recentRefund, touchedRefund, leased, paymentKey].sort());

    // The payment's key still replays the payment, however old.
    const replay = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', paymentKey)
      .send({ provider: 'cardpay', amount: '50.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(replay.status).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.data.id).toBe(payment.id);
    // A recent refund key still replays its refund.
    const recent = await refund(payment.id, '5.00', recentRefund);
    expect(recent.status).toBe(201);
    expect(recent.headers['idempotent-replayed']).toBe('true');
  });

  it("a worker whose clock runs ahead does not prune a key early: the cutoff is the database's now(), so the retry replays", async () => {
    const payment = await visa('40.00');
    const idem = unique('refund-fast-worker');
    const first = await refund(payment.id, '10.00', idem).expect(201);
    // 10 minutes inside the 24 h the contract promises.
    await age([idem], '23 hours 50 minutes');

    // A prune as a worker 15 minutes fast would run it: its clock reads 15 minutes ahead of the database's.
    // The prune takes no clock any more (the cutoff is computed in SQL), so a caller's clock is not read.
    const fifteenMinutesFast = new Date(Date.now() + 15 * 60_000);
    // @ts-expect-error prune() takes no `now`: the cutoff is the database's now() less the retention.
    await t.inContext(() => t.service.container.services.idempotencyKeyRetention.prune(fifteenMinutesFast));

    const retry = await refund(payment.id, '10.00', idem);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body.data.id).toBe(first.body.data.id);
    expect((await t.http.get(`/v1/payments/${payment.id}`).set('X-API-Key', key)).body.data.amount_refunded).toBe('10.00');
  });

  it('a request with a pruned key is a new request: it refunds (or saves the card) again', async () => {
    const payment = await visa('30.00');
    const idem = unique('refund-pruned');
    const first = await refund(payment.id, '10.00', idem).expect(201);
    const cardIdem = unique('card-pruned');
    const firstCard = await saveCard('retention-pruned@example.com', cardIdem).expect(201);
    await age([idem, cardIdem], '25 hours');
    await eventually(async () => (await keyRows([idem, cardIdem])).length === 0, 10_000, 'the prune job');

    const again = await refund(payment.id, '10.00', idem);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.data.id).not.toBe(first.body.data.id);
    expect((await t.http.get(`/v1/payments/${payment.id}`).set('X-API-Key', key)).body.data.amount_refunded).toBe('20.00');
    const [intent] = await t.sql<{ id: string }>(`SELECT id FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1`, [payment.id]);
    expect(await t.sql('SELECT 1 FROM sandbox_cardpay_refunds WHERE payment_intent = $1', [intent!.id])).toHaveLength(2);

    const cardAgain = await saveCard('retention-pruned@example.com', cardIdem);
    expect(cardAgain.status).toBe(201);
    expect(cardAgain.headers['idempotent-replayed']).toBeUndefined();
    expect(cardAgain.body.data.id).not.toBe(firstCard.body.data.id);
    expect(await t.sql(`SELECT 1 FROM sandbox_cardpay_customers WHERE email = 'retention-pruned@example.com'`)).toHaveLength(2);
    // The new answers are themselves replayed from now on.
    expect((await refund(payment.id, '10.00', idem)).headers['idempotent-replayed']).toBe('true');
  });
});
