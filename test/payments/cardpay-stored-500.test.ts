import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SYNC_PAYMENTS_JOB } from '../../server/jobs/sync-payments.job.js';
import { jobRunFinished, runJobOnce } from '../support/job-run.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * Stripe saves the answer of the first request with an idempotency key once the request began to run, a
 * 500 too, and replays it to every repeat with that key for 24 h (docs.stripe.com/api/idempotent_requests).
 * A 500 says the work may have been done. The simulator's api-errors control does exactly that: the
 * request runs and commits (here: the intent made, the card charged, the webhook endpoint made), then is
 * answered 500 api_error, stored under its key. So a repeat with the same key can never tell the service
 * what happened: the service has to find out otherwise, and never charge twice.
 */
let t: TestService;
let n = 0;

beforeAll(async () => {
  // An hour between the status sync's runs: every run below is one the test asks for (runJobOnce).
  t = await startTestService({ STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
  await jobRunFinished(t, SYNC_PAYMENTS_JOB);
});
afterAll(async () => t.stop());

const newSecretKey = () => `sk_test_stored_500_${randomUUID().replace(/-/g, '')}`;
/** The account of `secretKey` fails its next `count` requests that change something, after they ran, the 500 stored under their key. */
const failAfterRunning = (secretKey: string, count: number) =>
  t.http.post('/sandbox/cardpay/_control/api-errors').set('Authorization', `Bearer ${secretKey}`).send({ count }).expect(200);
const intentsOf = (paymentId: string) =>
  t.sql<{ id: string; amount: string; status: string }>(`SELECT id, amount::text, status FROM sandbox_cardpay_intents WHERE metadata->>'payment_id' = $1 ORDER BY created`, [paymentId]);

describe('a card payment whose create was answered with a stored 500 (the card charged)', () => {
  it('is answered pending with no provider reference; the status sync finds the charge by our payment id and completes the payment, charged once', async () => {
    const secretKey = newSecretKey();
    const { apiKey } = await t.createMerchant(`Stored 500 Shop ${++n}`);
    // With its own webhook secret: no endpoint is registered, so no event settles anything; only the sync does.
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: 'whsec_stored_500_not_registered' } }).expect(200);
    await failAfterRunning(secretKey, 1);

    const res = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `stored-500-${n}`)
      .send({ provider: 'cardpay', amount: '40.00', currency: 'USD', payment_method: 'pm_card_visa' });
    // What the service answers when the provider did not say whether it charged: the payment, pending, without the provider's reference.
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const id = res.body.data.id as string;
    // The simulator charged the card and keeps the 500 under the create's key: a repeat with it can only get that 500.
    expect(await intentsOf(id)).toEqual([expect.objectContaining({ amount: '4000', status: 'succeeded' })]);
    const [stored] = await t.sql<{ response_status: number }>('SELECT response_status FROM sandbox_cardpay_idempotency WHERE idempotency_key = $1', [`payment-${id}`]);
    expect(stored).toEqual({ response_status: 500 });

    // Its first check is booked a minute after the create; brought forward to now, then the job's own run.
    await t.sql('UPDATE payments SET next_sync_at = now() WHERE id = $1 AND next_sync_at IS NOT NULL', [id]);
    expect(await runJobOnce(t, SYNC_PAYMENTS_JOB)).toBe(1);

    const [intent, ...more] = await intentsOf(id);
    expect(more).toEqual([]);
    const payment = (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', apiKey).expect(200)).body.data;
    expect(payment).toMatchObject({ status: 'completed', provider_ref: intent!.id, amount: '40.00', integrity: { status: 'ok' } });
    const events = (await t.http.get(`/v1/events?payment_id=${id}`).set('X-API-Key', apiKey).expect(200)).body.data as { type: string }[];
    expect(events.map((e) => e.type)).toEqual(['payment.completed']);
  });
});

describe("storing cardpay credentials whose webhook endpoint's creation was answered with a stored 500 (the endpoint made)", () => {
  it('registers one with a new key; the endpoint the failed request made is deleted, and the stored secret verifies the provider\'s events', async () => {
    const secretKey = newSecretKey();
    const { apiKey, merchantId } = await t.createMerchant(`Stored 500 Endpoint Shop ${++n}`);
    const endpoints = async () => {
      const res = await t.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${secretKey}`).expect(200);
      return (res.body.data as { id: string; url: string }[]).filter((e) => new URL(e.url).searchParams.get('merchant') === merchantId);
    };
    await failAfterRunning(secretKey, 1);
    // Every repeat of the PUT uses the same key (the same request, the same credentials): were the 500
    // taken as the answer, the merchant could not store these credentials for 24 h.
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
    const [failed] = await t.sql<{ response_status: number }>(
      `SELECT response_status FROM sandbox_cardpay_idempotency WHERE idempotency_key LIKE 'webhook-endpoint-%' AND response_status = 500 AND account = encode(sha256($1::bytea), 'hex')`, [secretKey]);
    expect(failed).toEqual({ response_status: 500 });
    const [kept, ...others] = await endpoints();
    expect(others).toEqual([]);
    expect(kept).toBeDefined();

    // The provider's events reach the service and verify with the stored secret: a refund made in the
    // provider's dashboard (only its events tell of it) is recorded.
    const paid = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `stored-500-endpoint-${n}`)
      .send({ provider: 'cardpay', amount: '20.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
    expect(paid.body.data.status).toBe('completed');
    await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${secretKey}`).type('form')
      .send({ payment_intent: paid.body.data.provider_ref, amount: '600' }).expect(200);
    await eventually(
      async () => (await t.http.get(`/v1/payments/${paid.body.data.id}`).set('X-API-Key', apiKey).expect(200)).body.data.amount_refunded === '6.00',
      15_000,
      'the dashboard refund recorded from its event',
    );
  });
});
