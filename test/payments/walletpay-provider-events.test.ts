import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * What walletpay (PayPal) tells the service by its events alone, end to end through the simulator: a
 * capture PayPal reverses (PAYMENT.CAPTURE.REVERSED, e.g. a chargeback), and a refund that goes pending
 * and later fails (PAYMENT.REFUND.PENDING, PAYMENT.REFUND.FAILED: an eCheck). The status sync's first
 * re-check is an hour away, so only the events can settle anything here.
 */
let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;

beforeAll(async () => {
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '1h' });
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Wallet Events Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'wallet-events-client', client_secret: 'wallet-events-secret' } }).expect(200);
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key).expect(200)).body.data;
const refundsOf = async (id: string) => (await t.http.get(`/v1/refunds?payment_id=${id}`).set('X-API-Key', key).expect(200)).body.data as Record<string, unknown>[];

/** A walletpay payment approved with `choice` on the approval page and captured. */
async function captured(choice = 'approve', amount = '30.00') {
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `wallet-events-${++n}`)
    .send({ provider: 'walletpay', amount, currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
  expect(res.status).toBe(201);
  const approval = res.body.data.next_action.url as string;
  await fetch(`${approval}${approval.includes('?') ? '&' : '?'}auto=${choice}`, { redirect: 'manual' });
  const done = await t.http.post(`/v1/payments/${res.body.data.id}/capture`).set('X-API-Key', key).send({}).expect(200);
  expect(done.body.data.status).toBe('completed');
  const [capture] = await t.sql<{ id: string }>('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [done.body.data.provider_ref]);
  return { id: done.body.data.id as string, captureId: capture!.id };
}

const events = (type: string, paymentId: string) => receiver.events(type).filter((e) => e.json.data.payment_id === paymentId);

describe('a capture PayPal reverses (PAYMENT.CAPTURE.REVERSED)', () => {
  it('records the money taken back as a refund made at the provider and tells the merchant payment.refunded; the rest reversed makes the payment refunded', async () => {
    const p = await captured();
    const part = await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: p.captureId, amount: '10.00' });
    expect(part.status).toBe(201);
    expect(part.body).toMatchObject({ status: 'COMPLETED', amount: { currency_code: 'USD', value: '10.00' } });

    const first = await eventually(() => events('payment.refunded', p.id)[0], 10_000, 'payment.refunded');
    expect(first.json.data).toMatchObject({ payment_id: p.id, status: 'completed', amount_refunded: '10.00' });
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '10.00' });
    expect(await refundsOf(p.id)).toEqual([expect.objectContaining({ amount: '10.00', currency: 'USD', status: 'completed', provider_ref: part.body.id })]);

    // The rest reversed too: nothing of the payment is left with the merchant.
    expect((await t.http.post('/sandbox/walletpay/_control/reverse-capture').send({ capture_id: p.captureId })).status).toBe(201);
    await eventually(async () => (await getPayment(p.id)).status === 'refunded', 10_000, 'the payment to be refunded');
    expect(await getPayment(p.id)).toMatchObject({ amount_refunded: '30.00' });
    // The second event is delivered after the commit that made the payment refunded: waited for too.
    await eventually(() => events('payment.refunded', p.id).length >= 2, 10_000, 'the second payment.refunded');
    expect(events('payment.refunded', p.id).map((e) => e.json.data.amount_refunded).sort()).toEqual(['10.00', '30.00']);
    // A refund asked now is refused: nothing is left to refund.
    expect((await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id })).status).toBe(409);
  });
});

describe('a refund that goes pending and then fails at PayPal (eCheck)', () => {
  it('stays pending on PAYMENT.REFUND.PENDING, fails on PAYMENT.REFUND.FAILED with refund.failed, and its amount can be refunded again', async () => {
    const p = await captured('approve-echeck');
    const res = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id, amount: '12.00' });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', amount: '12.00', provider_ref: expect.any(String) });

    const failed = await eventually(() => events('refund.failed', p.id)[0], 10_000, 'refund.failed');
    expect(failed.json.data).toMatchObject({ payment_id: p.id, refund_id: res.body.data.id, status: 'completed', amount_refunded: '0.00', failure_reason: expect.stringContaining('FAILED') });
    const refund = (await t.http.get(`/v1/refunds/${res.body.data.id}`).set('X-API-Key', key).expect(200)).body.data;
    expect(refund).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('PAYMENT.REFUND.FAILED') });
    // Settled by the provider's events (the pending one moved nothing), not by the refund sync.
    const triggers = await t.sql<{ trigger: string }>(`SELECT trigger FROM payment_transitions WHERE refund_id = $1 AND accepted ORDER BY id`, [res.body.data.id]);
    expect(triggers.map((r) => r.trigger)).toEqual(['callback:PAYMENT.REFUND.FAILED']);
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    // The failed refund no longer holds its amount: the whole payment can be refunded.
    const again = await t.http.post('/v1/refunds').set('X-API-Key', key).send({ payment_id: p.id });
    expect(again.status).toBe(201);
    expect(again.body.data).toMatchObject({ amount: '30.00' });
  });
});

describe('an order the buyer never approves expires at PayPal after 3 h', () => {
  const syncOne = (id: string, now?: number) => t.inContext(() => t.service.container.services.statusSync.syncOne(id, now));
  const created = async () => {
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `wallet-events-${++n}`)
      .send({ provider: 'walletpay', amount: '18.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    expect(res.status).toBe(201);
    return res.body.data as { id: string; provider_ref: string; next_action: { url: string } };
  };
  /** The simulator's clock for the order: created 4 h ago, so PayPal has let it expire. */
  const ageOrder = (orderId: string) => t.sql(`UPDATE sandbox_walletpay_orders SET created_at = created_at - interval '4 hours' WHERE id = $1`, [orderId]);

  it('the status sync fails the payment ("expired", payment.failed) once PayPal no longer has its order', async () => {
    const p = await created();
    await ageOrder(p.provider_ref);
    // At PayPal the order is gone: the approval link and GET order both say so.
    expect((await fetch(p.next_action.url)).status).toBe(404);

    await syncOne(p.id, Date.now() + 4 * 3_600_000);
    const payment = await getPayment(p.id);
    expect(payment).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('expired unpaid, more than 3 h after its creation') });
    expect(payment.failure_reason).toContain('Nothing was charged');
    const failed = await eventually(() => events('payment.failed', p.id)[0], 10_000, 'payment.failed');
    expect(failed.json.data).toMatchObject({ status: 'failed', previous_status: 'pending' });
  });

  it('a capture of an expired order fails the payment the same way', async () => {
    const p = await created();
    await ageOrder(p.provider_ref);
    // The payment is 4 h old too (its creation time is otherwise never changed: a trigger refuses it).
    await t.sql(`SET session_replication_role = replica; UPDATE payments SET created_at = created_at - interval '4 hours' WHERE id = '${p.id}'`);
    const res = await t.http.post(`/v1/payments/${p.id}/capture`).set('X-API-Key', key).send({});
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('failed');
    expect(await getPayment(p.id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('expired unpaid, more than 3 h after its creation') });
    await eventually(() => events('payment.failed', p.id)[0], 10_000, 'payment.failed');
  });

  it('an order the buyer approved but that was never captured expires 3 h after the buyer was sent to approve it: the status sync, or a capture, fails the payment', async () => {
    /** The simulator's clock: the order created and its approval page opened `hours` ago; the payment as old. */
    const ageAll = async (p: { id: string; provider_ref: string }, hours: number) => {
      await t.sql(`UPDATE sandbox_walletpay_orders SET created_at = created_at - make_interval(hours => $2::int), redirected_at = redirected_at - make_interval(hours => $2::int) WHERE id = $1`, [p.provider_ref, hours]);
      await t.sql(`SET session_replication_role = replica; UPDATE payments SET created_at = created_at - interval '${hours} hours' WHERE id = '${p.id}'`);
    };
    const approved = async () => {
      const p = await created();
      const res = await fetch(`${p.next_action.url}&auto=approve`, { redirect: 'manual' });
      expect(res.status).toBe(302);
      return p;
    };

    // Captured after PayPal let the approved order expire: nothing is captured, the payment fails.
    const late = await approved();
    await ageAll(late, 4);
    const res = await t.http.post(`/v1/payments/${late.id}/capture`).set('X-API-Key', key).send({});
    expect(res.status).toBe(200);
    expect(res.body.data.status).toBe('failed');
    expect(await getPayment(late.id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('never captured') });
    expect(await t.sql('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [late.provider_ref])).toEqual([]);
    await eventually(() => events('payment.failed', late.id)[0], 10_000, 'payment.failed');

    // Never captured at all: the status sync's check after the expiry fails it the same way.
    const abandoned = await approved();
    await ageAll(abandoned, 4);
    await syncOne(abandoned.id);
    expect(await getPayment(abandoned.id)).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('expired unpaid') });
  });

  it('an order still there at that check (the buyer sent to approve it late, or an account keeping orders longer) is checked again every 3 h, until 75 h', async () => {
    const p = await created();
    const dueAfterCreation = async () => (await t.sql<{ s: number | null }>(
      `SELECT extract(epoch FROM next_sync_at - created_at)::int AS s FROM payments WHERE id = $1`, [p.id]))[0]!.s;
    const createdAt = (await t.sql<{ ms: number }>(`SELECT (extract(epoch FROM created_at) * 1000)::float8 AS ms FROM payments WHERE id = $1`, [p.id]))[0]!.ms;
    // The check just after 3 h finds the order still at PayPal (here: it is not aged), awaiting the buyer.
    await syncOne(p.id, createdAt + 3 * 3_600_000 + 60_000);
    expect(await getPayment(p.id)).toMatchObject({ status: 'pending' });
    expect(await dueAfterCreation()).toBe(6 * 3600 + 60);
    // Checked at 72 h 1 min: the last look is at 75 h; after that, none.
    await syncOne(p.id, createdAt + 72 * 3_600_000 + 60_000);
    expect(await dueAfterCreation()).toBe(75 * 3600 + 60);
    await t.sql(`UPDATE payments SET next_sync_at = NULL WHERE id = $1`, [p.id]);
    await syncOne(p.id, createdAt + 75 * 3_600_000 + 60_000);
    expect(await dueAfterCreation()).toBeNull();
  });

  it('when STATUS_SYNC_SCHEDULE runs out before the order expires, one more check is due just after its expiry', async () => {
    const p = await created();
    await syncOne(p.id); // the schedule here has one interval: this check is its last
    const [row] = await t.sql<{ due_after_creation_s: number | null }>(
      `SELECT extract(epoch FROM next_sync_at - created_at)::int AS due_after_creation_s FROM payments WHERE id = $1`, [p.id]);
    expect(row!.due_after_creation_s).toBe(3 * 3600 + 60);
  });

  it('a payment younger than that whose order PayPal does not know (other credentials, another account) is not failed', async () => {
    const p = await created();
    await ageOrder(p.provider_ref);
    await syncOne(p.id);
    expect(await getPayment(p.id)).toMatchObject({ status: 'pending', failure_reason: null });
    expect(events('payment.failed', p.id)).toEqual([]);
  });
});
