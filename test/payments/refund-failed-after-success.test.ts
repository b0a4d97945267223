import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { signatureHeader } from '../../server/sandbox/cardpay/events.js';
import { cardpayDrained } from '../support/cardpay-drained.js';
import { scrapeMetrics, type Samples } from '../support/prometheus.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * A card refund can fail after it succeeded (the card expired or was closed): the provider gives the
 * money back to the merchant and says so (refund.failed, charge.refund.updated). The test card
 * pm_card_refundFail does exactly that a moment after each refund. The service marks the refund
 * failed, lowers amount_refunded and tells the merchant (refund.failed); the payment's status never
 * moves back. It acts only on the provider's own refund, for its exact amount and currency.
 */
let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;

const pay = async (amount: string) =>
  (
    await t.http
      .post('/v1/payments')
      .set('X-API-Key', key)
      .set('Idempotency-Key', `rf-${Date.now()}-${++n}`)
      .send({ provider: 'cardpay', amount, currency: 'USD', payment_method: 'pm_card_refundFail' })
      .expect(201)
  ).body.data as { id: string; status: string; provider_ref: string };
const refund = (body: Record<string, unknown>) => t.http.post('/v1/refunds').set('X-API-Key', key).send(body);
const getPayment = async (id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', key)).body.data;
const getRefund = async (id: string) => (await t.http.get(`/v1/refunds/${id}`).set('X-API-Key', key)).body.data;
const misreport = (body: Record<string, unknown>) => t.http.post('/sandbox/cardpay/_control/misreport').send(body).expect(200);
const refundFailedEvents = (paymentId: string) => receiver.events('refund.failed').filter((e) => e.json.data.payment_id === paymentId);

beforeAll(async () => {
  t = await startTestService();
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Refund Failure Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  // No webhook_secret: the service registers its callback URL with the provider, which then sends its events.
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_refund_fail_01' } }).expect(200);
});
afterAll(async () => {
  await misreport({});
  await t.stop();
  await receiver.stop();
});

describe('a card refund that fails after it succeeded', () => {
  it('a partial refund: the refund becomes failed, amount_refunded drops back, refund.failed is sent, and the amount can be refunded again', async () => {
    const p = await pay('25.00');
    const first = await refund({ payment_id: p.id, amount: '10.00' });
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({ status: 'completed', amount: '10.00' });
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '10.00' });

    const failed = await eventually(async () => {
      const r = await getRefund(first.body.data.id);
      return r.status === 'failed' ? r : null;
    }, 20_000, 'the refund failed');
    expect(failed).toMatchObject({ status: 'failed', amount: '10.00', failure_reason: 'expired_or_canceled_card', provider_ref: first.body.data.provider_ref });

    // Exactly once, counted when every event the provider had for it arrived (refund.failed and the
    // charge.refund.updated, refund.updated with it) and every webhook of ours went out.
    await cardpayDrained(t, p.id, [p.provider_ref, first.body.data.provider_ref]);
    expect(await getPayment(p.id)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    const [event, ...more] = refundFailedEvents(p.id);
    expect(more).toEqual([]);
    expect(receiver.received.filter((e) => e.json.data?.payment_id === p.id).map((e) => e.json.type).sort())
      .toEqual(['payment.completed', 'payment.refunded', 'refund.failed']);
    // Each provider event handled once (its outcome: its type).
    expect((await t.sql<{ outcome: string }>('SELECT outcome FROM provider_events WHERE payment_id = $1', [p.id])).map((e) => e.outcome).sort())
      .toEqual(['charge.refund.updated', 'charge.refunded', 'payment_intent.succeeded', 'refund.created', 'refund.failed', 'refund.updated']);
    expect(event!.json.data).toMatchObject({
      payment_id: p.id,
      refund_id: first.body.data.id,
      status: 'completed',
      previous_status: 'completed',
      amount_refunded: '0.00',
      failure_reason: 'expired_or_canceled_card',
    });

    // What went back to the merchant can be refunded again (here all of it).
    const again = await refund({ payment_id: p.id });
    expect(again.status).toBe(201);
    expect(again.body.data).toMatchObject({ status: 'completed', amount: '25.00' });
  });

  it('a full refund: the payment stays refunded (it never moves back), amount_refunded says nothing went back, and the merchant is told', async () => {
    const p = await pay('40.00');
    const full = await refund({ payment_id: p.id });
    expect(full.status).toBe(201);
    expect(await getPayment(p.id)).toMatchObject({ status: 'refunded', amount_refunded: '40.00' });

    await eventually(async () => ((await getRefund(full.body.data.id)).status === 'failed' ? true : null), 20_000, 'the refund failed');
    expect(await getPayment(p.id)).toMatchObject({ status: 'refunded', amount_refunded: '0.00' });
    const [event] = await eventually(() => (refundFailedEvents(p.id).length > 0 ? refundFailedEvents(p.id) : null), 20_000, 'refund.failed');
    expect(event!.json.data).toMatchObject({ refund_id: full.body.data.id, status: 'refunded', previous_status: 'refunded', amount_refunded: '0.00' });
  });

  it('a failure the provider reports for another amount changes nothing and is recorded; the right amount then applies', async () => {
    // A merchant holding its own signing secret: the provider sends it nothing, the test signs each event.
    const secret = 'whsec_refund_failure_mismatch';
    const other = await t.createMerchant('Refund Failure Mismatch Shop');
    const secretKey = 'sk_test_refund_fail_02';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: secret } }).expect(200);
    const p = (
      await t.http.post('/v1/payments').set('X-API-Key', other.apiKey).set('Idempotency-Key', `rf-mm-${Date.now()}`)
        .send({ provider: 'cardpay', amount: '30.00', currency: 'USD', payment_method: 'pm_card_refundFail' }).expect(201)
    ).body.data as { id: string };
    const partial = await t.http.post('/v1/refunds').set('X-API-Key', other.apiKey).send({ payment_id: p.id, amount: '12.00' }).expect(201);
    const providerRefund = async () =>
      (await (await fetch(`${t.baseUrl}/sandbox/cardpay/v1/refunds/${partial.body.data.provider_ref}`, { headers: { Authorization: `Bearer ${secretKey}` } })).json()) as Record<string, unknown>;
    const failedAtProvider = await eventually(async () => {
      const r = await providerRefund();
      return r.status === 'failed' ? r : null;
    }, 20_000, 'the provider failed the refund');
    const callback = (id: string) => {
      const body = JSON.stringify({ id, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type: 'refund.failed', data: { object: failedAtProvider } });
      return t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, secret)).send(body);
    };
    const getOther = async (path: string) => (await t.http.get(path).set('X-API-Key', other.apiKey)).body.data;

    // The provider's answers (the refunds the service reads back on the event) say 0.01 instead of 12.00.
    await misreport({ amount: 1 });
    try {
      expect((await callback(`evt_rf_mismatch_${Date.now()}`)).status).toBe(200);
    } finally {
      await misreport({});
    }
    const payment = await getOther(`/v1/payments/${p.id}`);
    expect(payment).toMatchObject({ status: 'completed', amount_refunded: '12.00', integrity: { status: 'mismatch' } });
    expect(payment.integrity.mismatches).toEqual([
      expect.objectContaining({ expected_amount: '12.00', expected_currency: 'USD', reported_amount: '0.01', reported_currency: 'USD' }),
    ]);
    expect(await getOther(`/v1/refunds/${partial.body.data.id}`)).toMatchObject({ status: 'completed', failure_reason: null });

    // The provider's next event, read back truthfully, applies.
    expect((await callback(`evt_rf_truthful_${Date.now()}`)).status).toBe(200);
    expect(await getOther(`/v1/refunds/${partial.body.data.id}`)).toMatchObject({ status: 'failed', failure_reason: 'expired_or_canceled_card' });
    expect(await getOther(`/v1/payments/${p.id}`)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
  });

  it('the provider later reporting a failed refund completed: recorded as a refused move and logged as an error; the refund stays failed', async () => {
    const secret = 'whsec_refund_failure_then_completed';
    const other = await t.createMerchant('Refund Completed After Failure Shop');
    const secretKey = 'sk_test_refund_fail_03';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: secret } }).expect(200);
    const p = (
      await t.http.post('/v1/payments').set('X-API-Key', other.apiKey).set('Idempotency-Key', `rf-cf-${Date.now()}`)
        .send({ provider: 'cardpay', amount: '30.00', currency: 'USD', payment_method: 'pm_card_refundFail' }).expect(201)
    ).body.data as { id: string };
    const partial = (await t.http.post('/v1/refunds').set('X-API-Key', other.apiKey).send({ payment_id: p.id, amount: '12.00' }).expect(201)).body.data as { id: string; provider_ref: string };
    const providerRefund = async () =>
      (await (await fetch(`${t.baseUrl}/sandbox/cardpay/v1/refunds/${partial.provider_ref}`, { headers: { Authorization: `Bearer ${secretKey}` } })).json()) as Record<string, unknown>;
    const callback = (type: string, object: Record<string, unknown>) => {
      const body = JSON.stringify({ id: `evt_rf_cf_${type}_${Date.now()}`, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type, data: { object } });
      return t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, secret)).send(body);
    };
    const getOther = async (path: string) => (await t.http.get(path).set('X-API-Key', other.apiKey)).body.data;

    // The provider fails the refund and says so: it is failed here, nothing refunded.
    const failedAtProvider = await eventually(async () => {
      const r = await providerRefund();
      return r.status === 'failed' ? r : null;
    }, 20_000, 'the provider failed the refund');
    expect((await callback('refund.failed', failedAtProvider)).status).toBe(200);
    expect(await getOther(`/v1/refunds/${partial.id}`)).toMatchObject({ status: 'failed' });

    // Then the provider reports the same refund (our metadata.refund_id) succeeded after all.
    await t.sql(`UPDATE sandbox_cardpay_refunds SET status = 'succeeded', failure_reason = NULL WHERE id = $1`, [partial.provider_ref]);
    const succeeded = await providerRefund();
    expect(succeeded).toMatchObject({ status: 'succeeded', metadata: { refund_id: partial.id } });
    expect((await callback('refund.updated', succeeded)).status).toBe(200);

    // Money state does not move: the refund stays failed and amount_refunded leaves it out...
    expect(await getOther(`/v1/refunds/${partial.id}`)).toMatchObject({ status: 'failed', failure_reason: 'expired_or_canceled_card' });
    expect(await getOther(`/v1/payments/${p.id}`)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    // ...but the report is in the payment's history as a refused move, naming the provider's refund and amount.
    const refusedMoves = async () =>
      ((await getOther(`/v1/payments/${p.id}/transitions`)) as { subject: string; refund_id: string; from_status: string; to_status: string; accepted: boolean; note: string; trigger: string }[])
        .filter((m) => m.refund_id === partial.id && m.from_status === 'failed' && m.to_status === 'completed');
    const [refused, ...others] = await refusedMoves();
    expect(others).toEqual([]);
    expect(refused).toMatchObject({ subject: 'refund', accepted: false, trigger: 'callback:refund.updated' });
    expect(refused!.note).toContain(partial.provider_ref);
    expect(refused!.note).toContain('12.00 USD');
    // An operator is told: an error-level log line naming the refund.
    const log = readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter((l) => l.includes(partial.id) && l.includes('"level":50'));
    expect(log).toHaveLength(1);
    expect(log[0]).toContain('completed at the provider');

    // The provider lists the charge's refunds again on its next event: recorded once.
    expect((await callback('refund.created', succeeded)).status).toBe(200);
    expect(await refusedMoves()).toHaveLength(1);
    expect(await getOther(`/v1/refunds/${partial.id}`)).toMatchObject({ status: 'failed' });
  });
  it('the provider completing a pending refund the payment can no longer take: the refund stays pending, no refund.failed, a refused move, counted and logged as an error', async () => {
    // A merchant holding its own signing secret: the provider sends it nothing, the test delivers the event.
    const secret = 'whsec_refund_completion_does_not_fit';
    const other = await t.createMerchant('Refund Completion Does Not Fit Shop');
    const secretKey = 'sk_test_refund_fail_05';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: secret } }).expect(200);
    const getOther = async (path: string) => (await t.http.get(path).set('X-API-Key', other.apiKey)).body.data;
    const p = (
      await t.http.post('/v1/payments').set('X-API-Key', other.apiKey).set('Idempotency-Key', `rf-nf-${Date.now()}`)
        .send({ provider: 'cardpay', amount: '30.00', currency: 'USD', payment_method: 'pm_card_pendingRefund' }).expect(201)
    ).body.data as { id: string; status: string };
    expect(p.status).toBe('completed');
    // A refund of 10.00 the provider holds pending (this test card's refunds succeed a moment later).
    const ours = (await t.http.post('/v1/refunds').set('X-API-Key', other.apiKey).send({ payment_id: p.id, amount: '10.00' }).expect(201)).body.data as { id: string; status: string; provider_ref: string };
    expect(ours.status).toBe('pending');
    // Meanwhile a refund made at the provider was recorded (here by hand): 25.00 of the 30.00 went back, so our 10.00 no longer fits.
    await t.sql('UPDATE payments SET amount_refunded_minor = 2500 WHERE id = $1', [p.id]);

    const notFitting = (samples: Samples) => [...samples].filter(([series]) => series.startsWith('payments_integrity_mismatches_total{') && series.includes('provider="cardpay"') && series.includes(':refund_does_not_fit"')).reduce((sum, [, v]) => sum + v, 0);
    const countedBefore = notFitting(await scrapeMetrics(t));

    // The provider completes our refund and says so (refund.updated, our metadata.refund_id, 10.00 USD).
    const providerRefund = async () =>
      (await (await fetch(`${t.baseUrl}/sandbox/cardpay/v1/refunds/${ours.provider_ref}`, { headers: { Authorization: `Bearer ${secretKey}` } })).json()) as Record<string, unknown>;
    const succeeded = await eventually(async () => {
      const r = await providerRefund();
      return r.status === 'succeeded' ? r : null;
    }, 20_000, 'the provider completed the refund');
    expect(succeeded).toMatchObject({ amount: 1000, currency: 'usd', metadata: { refund_id: ours.id } });
    const callback = (type: string) => {
      const body = JSON.stringify({ id: `evt_rf_nf_${type}_${Date.now()}`, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type, data: { object: succeeded } });
      return t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, secret)).send(body);
    };
    expect((await callback('refund.updated')).status).toBe(200);

    // Not failed: the money went back, so the merchant is not told refund.failed and the amount stays reserved.
    expect(await getOther(`/v1/refunds/${ours.id}`)).toMatchObject({ status: 'pending', failure_reason: null });
    expect(await getOther(`/v1/payments/${p.id}`)).toMatchObject({ status: 'completed', amount_refunded: '25.00' });
    const events = (await t.http.get(`/v1/events?payment_id=${p.id}`).set('X-API-Key', other.apiKey).expect(200)).body.data as { type: string }[];
    expect(events.map((e) => e.type)).not.toContain('refund.failed');
    // No more can be refunded than the provider says is left (5.00 - the 10.00 it holds as ours: nothing).
    expect((await t.http.post('/v1/refunds').set('X-API-Key', other.apiKey).send({ payment_id: p.id })).status).toBe(409);

    // The report is a refused move in the payment's history, naming the provider's refund and the amounts.
    const refusedMoves = async () =>
      ((await getOther(`/v1/payments/${p.id}/transitions`)) as { subject: string; refund_id: string; from_status: string; to_status: string; accepted: boolean; note: string }[])
        .filter((m) => m.refund_id === ours.id && m.to_status !== 'pending');
    const [refused, ...others] = await refusedMoves();
    expect(others).toEqual([]);
    expect(refused).toMatchObject({ subject: 'refund', from_status: 'pending', to_status: 'completed', accepted: false });
    expect(refused!.note).toContain(ours.provider_ref);
    expect(refused!.note).toContain('exceeds what remains');
    expect(refused!.note).toContain('25.00 USD refunded');
    // Counted as an integrity mismatch and logged at error level, naming the payment and the refund.
    expect(notFitting(await scrapeMetrics(t)) - countedBefore).toBe(1);
    const log = readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter((l) => l.includes(ours.id) && l.includes('"level":50'));
    expect(log).toHaveLength(1);
    expect(log[0]).toContain(p.id);
    expect(log[0]).toContain('does not fit the payment');

    // The provider says it again (refund.created, charge.refund.updated): recorded and counted once; still pending.
    expect((await callback('refund.created')).status).toBe(200);
    expect((await callback('charge.refund.updated')).status).toBe(200);
    expect(await refusedMoves()).toHaveLength(1);
    expect(notFitting(await scrapeMetrics(t)) - countedBefore).toBe(1);
    expect(await getOther(`/v1/refunds/${ours.id}`)).toMatchObject({ status: 'pending' });
  });
  it('the provider completing a pending refund of a payment already refunded in full there: the same (the refund stays pending, refused, counted)', async () => {
    // As a walletpay PAYMENT.CAPTURE.REVERSED of the whole capture, recorded while our refund was pending at the provider.
    const secret = 'whsec_refund_completion_payment_refunded';
    const other = await t.createMerchant('Refund Completion Payment Refunded Shop');
    const secretKey = 'sk_test_refund_fail_06';
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: secret } }).expect(200);
    const getOther = async (path: string) => (await t.http.get(path).set('X-API-Key', other.apiKey)).body.data;
    const p = (
      await t.http.post('/v1/payments').set('X-API-Key', other.apiKey).set('Idempotency-Key', `rf-nr-${Date.now()}`)
        .send({ provider: 'cardpay', amount: '30.00', currency: 'USD', payment_method: 'pm_card_pendingRefund' }).expect(201)
    ).body.data as { id: string };
    const ours = (await t.http.post('/v1/refunds').set('X-API-Key', other.apiKey).send({ payment_id: p.id, amount: '10.00' }).expect(201)).body.data as { id: string; status: string; provider_ref: string };
    expect(ours.status).toBe('pending');
    await t.sql(`UPDATE payments SET status = 'refunded', amount_refunded_minor = 3000 WHERE id = $1`, [p.id]);
    const counted = async () => [...(await scrapeMetrics(t))].filter(([series]) => series.startsWith('payments_integrity_mismatches_total{') && series.includes(':refund_does_not_fit"')).reduce((sum, [, v]) => sum + v, 0);
    const before = await counted();

    const succeeded = await eventually(async () => {
      const r = (await (await fetch(`${t.baseUrl}/sandbox/cardpay/v1/refunds/${ours.provider_ref}`, { headers: { Authorization: `Bearer ${secretKey}` } })).json()) as Record<string, unknown>;
      return r.status === 'succeeded' ? r : null;
    }, 20_000, 'the provider completed the refund');
    const body = JSON.stringify({ id: `evt_rf_nr_${Date.now()}`, object: 'event', api_version: '2026-07-29', created: Math.floor(Date.now() / 1000), livemode: false, type: 'refund.updated', data: { object: succeeded } });
    expect((await t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', signatureHeader(body, secret)).send(body)).status).toBe(200);

    expect(await getOther(`/v1/refunds/${ours.id}`)).toMatchObject({ status: 'pending', failure_reason: null });
    expect(await getOther(`/v1/payments/${p.id}`)).toMatchObject({ status: 'refunded', amount_refunded: '30.00' });
    const events = (await t.http.get(`/v1/events?payment_id=${p.id}`).set('X-API-Key', other.apiKey).expect(200)).body.data as { type: string }[];
    expect(events.map((e) => e.type)).not.toContain('refund.failed');
    const moves = ((await getOther(`/v1/payments/${p.id}/transitions`)) as { refund_id: string; from_status: string; to_status: string; accepted: boolean; note: string }[])
      .filter((m) => m.refund_id === ours.id && m.to_status !== 'pending');
    expect(moves).toEqual([expect.objectContaining({ from_status: 'pending', to_status: 'completed', accepted: false })]);
    expect(moves[0]!.note).toContain('the payment is refunded');
    expect((await counted()) - before).toBe(1);
  });
  it("through an endpoint made in the provider's dashboard rendering an API version before 2024-10-28 (charge.refund.updated, no refund.*): the refund becomes failed and the merchant is told", async () => {
    // The merchant made its endpoint in the dashboard, in the account's (old) default version, subscribed to
    // what README "Going live → cardpay" lists, and stored its whsec_ as webhook_secret. Such an endpoint gets
    // charge.refunded and charge.refund.updated for a card refund, never refund.created/updated/failed.
    const other = await t.createMerchant('Refund Failure Dashboard Endpoint Shop');
    const secretKey = 'sk_test_refund_fail_04';
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', other.apiKey).send({ webhook_url: receiver.url }).expect(200);
    const endpoint = await t.http
      .post('/sandbox/cardpay/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${secretKey}`)
      .type('form')
      .send({
        url: `${t.baseUrl}/v1/webhooks/cardpay?merchant=${other.merchantId}`,
        // Not charge.refunded: sent at the refund's creation, its handler reads the charge's refunds, and
        // delivered late (a loaded host) it settled the failure itself; here only charge.refund.updated can.
        'enabled_events[]': ['payment_intent.succeeded', 'payment_intent.payment_failed', 'payment_intent.canceled', 'charge.refund.updated', 'refund.created', 'refund.updated', 'refund.failed'],
        api_version: '2024-06-20',
      })
      .expect(200);
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', other.apiKey)
      .send({ provider: 'cardpay', cardpay: { secret_key: secretKey, webhook_secret: endpoint.body.secret } }).expect(200);
    const getOther = async (path: string) => (await t.http.get(path).set('X-API-Key', other.apiKey)).body.data;
    const p = (
      await t.http.post('/v1/payments').set('X-API-Key', other.apiKey).set('Idempotency-Key', `rf-de-${Date.now()}`)
        .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_refundFail' }).expect(201)
    ).body.data as { id: string };
    const first = (await t.http.post('/v1/refunds').set('X-API-Key', other.apiKey).send({ payment_id: p.id, amount: '10.00' }).expect(201)).body.data as { id: string };
    expect(first).toMatchObject({ status: 'completed', amount: '10.00' });
    expect(await getOther(`/v1/payments/${p.id}`)).toMatchObject({ status: 'completed', amount_refunded: '10.00' });

    const failed = await eventually(async () => {
      const r = await getOther(`/v1/refunds/${first.id}`);
      return r.status === 'failed' ? r : null;
    }, 20_000, 'the refund failed');
    expect(failed).toMatchObject({ status: 'failed', amount: '10.00', failure_reason: 'expired_or_canceled_card' });
    expect(await getOther(`/v1/payments/${p.id}`)).toMatchObject({ status: 'completed', amount_refunded: '0.00' });
    const [event, ...more] = await eventually(() => (refundFailedEvents(p.id).length > 0 ? refundFailedEvents(p.id) : null), 20_000, 'refund.failed');
    expect(more).toEqual([]);
    expect(event!.json.data).toMatchObject({ payment_id: p.id, refund_id: first.id, amount_refunded: '0.00', failure_reason: 'expired_or_canceled_card' });
    // It was the provider's charge.refund.updated that did it (no refund.* reached this endpoint).
    const moves = (await getOther(`/v1/payments/${p.id}/transitions`)) as { refund_id: string; from_status: string; to_status: string; accepted: boolean; trigger: string }[];
    expect(moves.filter((m) => m.refund_id === first.id && m.to_status === 'failed')).toEqual([
      expect.objectContaining({ from_status: 'completed', accepted: true, trigger: 'callback:charge.refund.updated' }),
    ]);
  });
});
