import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { scrapeMetrics, total, type Samples } from '../support/prometheus.js';
import { freePort } from '../../server/net/free-port.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * What an operator's Prometheus sees on /metrics next to the HTTP metrics: payments by provider and
 * status, provider call latency, callbacks, deliveries and their lag, the job queue. Scraped before
 * and after real traffic through the simulators; the numbers have to move.
 */

let t: TestService;
let receiver: WebhookReceiver;
let key: string;
let n = 0;

const scrape = () => scrapeMetrics(t);

async function pay(paymentMethod: string) {
  const res = await t.http
    .post('/v1/payments')
    .set('X-API-Key', key)
    .set('Idempotency-Key', `metrics-${Date.now()}-${++n}`)
    .send({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: paymentMethod });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; status: string };
}

beforeAll(async () => {
  t = await startTestService();
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key } = await t.createMerchant('Metrics Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_metrics_0001' } }).expect(200);
});
afterAll(async () => {
  await t?.stop();
  await receiver?.stop();
});

describe('business metrics on /metrics', () => {
  it('payments by provider and status, provider call latency, deliveries and callbacks move with real traffic', async () => {
    const before = await scrape();
    const completed = await pay('pm_card_visa');
    const declined = await pay('pm_card_chargeDeclined');
    expect([completed.status, declined.status]).toEqual(['completed', 'failed']);
    // A forged callback is rejected and counted as such.
    const forged = await t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').set('Cardpay-Signature', 't=1,v1=00').send('{"id":"evt_forged"}');
    expect(forged.status).toBeGreaterThanOrEqual(400);

    // The gauges come from the database (cached up to 5 s); the counters are this process's own.
    const after = await eventually(async () => {
      const s = await scrape();
      const delivered = total(s, 'webhook_delivery_attempts_total', { status: 'delivered' }) - total(before, 'webhook_delivery_attempts_total', { status: 'delivered' });
      const callbacksAccepted = total(s, 'provider_callbacks_total', { provider: 'cardpay', outcome: 'accepted' });
      return delivered >= 2 && total(s, 'payments', { provider: 'cardpay', status: 'completed' }) === 1 && callbacksAccepted >= 1 ? s : null;
    }, 20_000, 'metrics to show the payments, their deliveries and the simulator callbacks');

    expect(total(after, 'payments', { provider: 'cardpay', status: 'completed' })).toBe(1);
    expect(total(after, 'payments', { provider: 'cardpay', status: 'failed' })).toBe(1);
    const created = (s: Samples) => total(s, 'provider_call_duration_seconds_count', { provider: 'cardpay', operation: 'createPayment' });
    expect(created(after) - created(before)).toBe(2);
    expect(total(after, 'provider_call_duration_seconds_sum', { provider: 'cardpay', operation: 'createPayment' })).toBeGreaterThan(0);
    expect(total(after, 'provider_callbacks_total', { provider: 'cardpay', outcome: 'rejected' }) - total(before, 'provider_callbacks_total', { provider: 'cardpay', outcome: 'rejected' })).toBe(1);
    // Deliveries not (yet) delivered, by status; delivered ones are counted by the attempts counter instead.
    expect(['pending', 'retrying', 'dead'].map((status) => total(after, 'webhook_deliveries', { status }))).toEqual([0, 0, 0]);
    expect([...after.keys()].filter((series) => series.startsWith('webhook_deliveries{'))).toEqual([
      'webhook_deliveries{status="pending"}', 'webhook_deliveries{status="retrying"}', 'webhook_deliveries{status="dead"}',
    ]);
    // Everything due has been sent.
    expect(total(after, 'webhook_delivery_lag_seconds')).toBe(0);
    // Refused provider reports (amount or currency not ours) are counted by the status writer.
    expect((await t.http.get('/metrics')).text).toContain('# TYPE payments_integrity_mismatches_total counter');
    // Round trips to PostgreSQL per pool: the service's own (ORM), its job queue's (Agenda) and the simulators'.
    for (const pool of ['service', 'jobs', 'sandbox']) {
      expect(total(after, 'db_round_trips_total', { pool }) - total(before, 'db_round_trips_total', { pool })).toBeGreaterThan(0);
    }
    // The HTTP metrics are still there beside them.
    expect(total(after, 'http_requests_total', { route: '/v1/payments', status: '201' })).toBeGreaterThanOrEqual(2);
  }, 40_000);

  it('a failed POST /v1/webhooks/test (the endpoint is not up yet) is not a dead delivery: neither the dead gauge nor the dead attempts count it', async () => {
    const before = await scrape();
    const shop = await t.createMerchant('Not Up Yet Shop');
    // Nothing listens on the port: the connection is refused.
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', shop.apiKey).send({ webhook_url: `http://127.0.0.1:${await freePort()}/hooks` }).expect(200);
    const tested = await t.http.post('/v1/webhooks/test').set('X-API-Key', shop.apiKey);
    expect(tested.status).toBe(200);
    expect(tested.body.data).toMatchObject({ delivered: false, response_status: null });
    // The merchant still sees it dead in its delivery log.
    const logged = await t.http.get('/v1/webhooks/logs?status=dead').set('X-API-Key', shop.apiKey).expect(200);
    expect(logged.body.data.map((d: { id: string }) => d.id)).toEqual([tested.body.data.delivery_id]);
    // A probe job proves the scrape below read the database after the test was recorded (not a snapshot cached before it).
    const probe = `metrics-probe-after-test-${Date.now()}`;
    await t.sql(`INSERT INTO agenda_jobs (name, next_run_at, type, priority) VALUES ('${probe}', now() - interval '1 second', 'normal', 0)`);
    const after = await eventually(async () => {
      const s = await scrape();
      return total(s, 'job_queue_depth', { job_name: probe }) === 1 ? s : null;
    }, 10_000, 'a snapshot taken after the test event');
    await t.sql(`DELETE FROM agenda_jobs WHERE name = '${probe}'`);
    expect(total(after, 'webhook_deliveries', { status: 'dead' })).toBe(0);
    expect(total(after, 'webhook_delivery_attempts_total', { status: 'dead' }) - total(before, 'webhook_delivery_attempts_total', { status: 'dead' })).toBe(0);
  }, 30_000);

  it('a delivery whose endpoint keeps failing: its attempts are counted as retrying, then dead, and the dead gauge counts it', async () => {
    const before = await scrape();
    const attempts = (s: Samples, status: string) => total(s, 'webhook_delivery_attempts_total', { status }) - total(before, 'webhook_delivery_attempts_total', { status });
    // The first attempt and the five retries of the test schedule all fail.
    receiver.failNext(6);
    await pay('pm_card_visa');
    const after = await eventually(async () => {
      const s = await scrape();
      return total(s, 'webhook_deliveries', { status: 'dead' }) === 1 ? s : null;
    }, 20_000, 'the delivery to die and the gauge to count it');
    expect([attempts(after, 'retrying'), attempts(after, 'dead'), attempts(after, 'delivered')]).toEqual([5, 1, 0]);
  }, 30_000);

  it("a merchant's retry or recover of a dead delivery failing again is not counted dead: only its death through the schedule is", async () => {
    const shop = await t.createMerchant('Still Down Shop');
    // Nothing listens on the port: every attempt is refused.
    await t.http.put('/v1/merchant/webhook').set('X-API-Key', shop.apiKey).send({ webhook_url: `http://127.0.0.1:${await freePort()}/hooks` }).expect(200);
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_metrics_0002' } }).expect(200);
    const dead = (s: Samples) => total(s, 'webhook_delivery_attempts_total', { status: 'dead' });
    const before = await scrape();
    const res = await t.http.post('/v1/payments').set('X-API-Key', shop.apiKey).set('Idempotency-Key', `metrics-down-${Date.now()}`)
      .send({ provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
    const deliveryOf = async () => {
      const logged = await t.http.get(`/v1/webhooks/logs?payment_id=${res.body.data.id}`).set('X-API-Key', shop.apiKey).expect(200);
      return logged.body.data[0] as { id: string; status: string; attempts: number } | undefined;
    };
    // The first attempt and the five retries of the test schedule fail: the death the operator is told of.
    const died = await eventually(async () => ((await deliveryOf())?.status === 'dead' ? deliveryOf() : null), 20_000, 'the delivery to die');
    const afterDeath = await scrape();
    expect(dead(afterDeath) - dead(before)).toBe(1);

    // The merchant retries it by hand: it fails again, and stays dead.
    const retried = await t.http.post(`/v1/webhooks/logs/${died!.id}/retry`).set('X-API-Key', shop.apiKey).expect(200);
    expect(retried.body.data).toMatchObject({ status: 'dead', attempts: died!.attempts + 1 });
    expect(dead(await scrape()) - dead(afterDeath)).toBe(0);

    // And recovers it with the endpoint still down: one attempt, dead again.
    const recovered = await t.http.post('/v1/webhooks/recover').set('X-API-Key', shop.apiKey).send({ since: new Date(Date.now() - 3_600_000).toISOString() }).expect(200);
    expect(recovered.body.data.queued).toBe(1);
    await eventually(async () => {
      const d = await deliveryOf();
      return d?.status === 'dead' && d.attempts === died!.attempts + 2 ? d : null;
    }, 20_000, 'the recovered delivery to die again');
    expect(dead(await scrape()) - dead(afterDeath)).toBe(0);
  }, 60_000);

  it('job queue depth and lag: a job due 30 s ago that no worker handles shows up by name', async () => {
    await t.sql(`INSERT INTO agenda_jobs (name, next_run_at, type, priority) VALUES ('metrics-probe-unhandled', now() - interval '30 seconds', 'normal', 0)`);
    const s = await eventually(async () => {
      const scraped = await scrape();
      return total(scraped, 'job_queue_depth', { job_name: 'metrics-probe-unhandled' }) === 1 ? scraped : null;
    }, 10_000, 'the probe job in job_queue_depth');
    expect(total(s, 'job_queue_lag_seconds', { job_name: 'metrics-probe-unhandled' })).toBeGreaterThanOrEqual(30);
  }, 20_000);

  it('with no worker running, due deliveries wait: the delivery lag grows', async () => {
    // An api-only service: the outbox commit is followed by a NOTIFY, but no worker listens or sweeps.
    const stalled = await startTestService({ ROLE: 'api' });
    try {
      const shop = await stalled.createMerchant('Stalled Shop');
      await stalled.http.put('/v1/merchant/webhook').set('X-API-Key', shop.apiKey).send({ webhook_url: receiver.url }).expect(200);
      await stalled.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_metrics_0002' } }).expect(200);
      const res = await stalled.http
        .post('/v1/payments')
        .set('X-API-Key', shop.apiKey)
        .set('Idempotency-Key', `metrics-stalled-${Date.now()}`)
        .send({ provider: 'cardpay', amount: '3.00', currency: 'USD', payment_method: 'pm_card_visa' });
      expect(res.body.data.status).toBe('completed');
      const lagging = await eventually(async () => {
        const s = await scrapeMetrics(stalled);
        return total(s, 'webhook_delivery_lag_seconds') >= 2 ? s : null;
      }, 15_000, 'the delivery lag to reach 2 s');
      expect(total(lagging, 'webhook_deliveries', { status: 'pending' })).toBeGreaterThanOrEqual(1);
    } finally {
      await stalled.stop();
    }
  }, 40_000);

  it('a refund its provider has not settled shows its age in refunds_pending_oldest_seconds', async () => {
    // The simulator holds back its refund events: the refund stays pending.
    const slow = await startTestService({ SANDBOX_CALLBACK_DELAY_MS: '120000' });
    try {
      const shop = await slow.createMerchant('Slow Refund Shop');
      await slow.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_metrics_0003' } }).expect(200);
      const oldest = async (provider: string) => total(await scrapeMetrics(slow), 'refunds_pending_oldest_seconds', { provider });
      expect(await oldest('cardpay')).toBe(0);
      const paid = await slow.http.post('/v1/payments').set('X-API-Key', shop.apiKey).set('Idempotency-Key', `metrics-refund-${Date.now()}`)
        .send({ provider: 'cardpay', amount: '9.00', currency: 'USD', payment_method: 'pm_card_pendingRefund' });
      expect(paid.body.data.status).toBe('completed');
      const refund = await slow.http.post('/v1/refunds').set('X-API-Key', shop.apiKey).send({ payment_id: paid.body.data.id });
      expect(refund.body.data.status).toBe('pending');
      // The gauge is read at most every 5 s; the refund's age grows from its creation.
      await eventually(async () => ((await oldest('cardpay')) >= 1 ? true : null), 15_000, 'the pending refund in the gauge');
      expect([await oldest('walletpay'), await oldest('mobilemoney')]).toEqual([0, 0]);
    } finally {
      await slow.stop();
    }
  }, 40_000);

  it('METRICS_TOKEN protects /metrics: no token, a wrong one or the token without the Bearer scheme is 401 in the envelope', async () => {
    const guarded = await startTestService({ METRICS_TOKEN: 'a-long-metrics-token-123' });
    try {
      const none = await guarded.http.get('/metrics');
      expect(none.status).toBe(401);
      expect(none.body).toMatchObject({ success: false, error: { code: 'UNAUTHORIZED' } });
      expect((await guarded.http.get('/metrics').set('Authorization', 'Bearer wrong-token-wrong-token')).status).toBe(401);
      // The token alone, or under another scheme, is not `Authorization: Bearer <token>`.
      for (const header of ['a-long-metrics-token-123', 'Basic a-long-metrics-token-123', 'Bearera-long-metrics-token-123']) {
        expect((await guarded.http.get('/metrics').set('Authorization', header)).status).toBe(401);
      }
      const ok = await guarded.http.get('/metrics').set('Authorization', 'Bearer a-long-metrics-token-123');
      expect(ok.status).toBe(200);
      expect(ok.text).toContain('# TYPE payments gauge');
      // The scheme is case-insensitive, as HTTP's are.
      expect((await guarded.http.get('/metrics').set('Authorization', 'bearer a-long-metrics-token-123')).status).toBe(200);
      // Health and readiness stay open for probes.
      expect((await guarded.http.get('/healthz')).status).toBe(200);
    } finally {
      await guarded.stop();
    }
  }, 30_000);

  it('says store_metrics_up 0 and leaves the database-backed gauges out while their read fails, instead of 0 or stale values', async () => {
    const up = await eventually(async () => {
      const s = await scrape();
      return total(s, 'store_metrics_up') === 1 ? s : null;
    }, 10_000, 'store_metrics_up 1');
    expect(up.has('webhook_delivery_lag_seconds')).toBe(true);
    expect(total(up, 'payments', { provider: 'cardpay' })).toBeGreaterThan(0);
    // The gauges' read fails, as in a database outage: the counters' view it starts with is gone.
    await t.sql('ALTER VIEW payment_count_totals RENAME TO payment_count_totals_away');
    try {
      const down = await eventually(async () => {
        const s = await scrape();
        return total(s, 'store_metrics_up') === 0 ? s : null;
      }, 10_000, 'store_metrics_up 0 once the cached read expired');
      // No webhook_delivery_lag_seconds 0 ("nothing unsent", so the unsent-webhooks alert could not fire), no stale payments.
      const storeSeries = [...down.keys()].filter((series) =>
        /^(payments|payments_unresolved|refunds_pending_oldest_seconds|saved_cards_detach_due|webhook_deliveries|webhook_delivery_lag_seconds|job_queue_depth|job_queue_lag_seconds|stored_secrets)(\{|$)/.test(series));
      expect(storeSeries).toEqual([]);
      // The process's own metrics are still served.
      expect(total(down, 'http_requests_total')).toBeGreaterThan(0);
    } finally {
      await t.sql('ALTER VIEW payment_count_totals_away RENAME TO payment_count_totals');
    }
    const back = await eventually(async () => {
      const s = await scrape();
      return total(s, 'store_metrics_up') === 1 ? s : null;
    }, 10_000, 'store_metrics_up 1 again');
    expect(back.has('webhook_delivery_lag_seconds')).toBe(true);
    expect(total(back, 'payments', { provider: 'cardpay' })).toBe(total(up, 'payments', { provider: 'cardpay' }));
  }, 40_000);
});
