import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { SYNC_REFUNDS_JOB } from '../../server/jobs/sync-refunds.job.js';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { jobRunFinished, runJobOnce } from '../support/job-run.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * The refund sync: a refund left pending — the provider's answer lost to an outage, its events never
 * delivered, a mobile-money result that never came — is re-checked with the provider on
 * STATUS_SYNC_SCHEDULE and settled by what the provider says, through the status writer (the
 * merchant's events, the amount checked). A request that never reached the provider is sent again with
 * the same idempotency key; one that did is found by our refund id and never made twice. Each provider's
 * events to the service are switched off where the provider allows it, so only the sync can settle.
 */
let t: TestService;
let receiver: WebhookReceiver;
let n = 0;

beforeAll(async () => {
  // The first re-check 2 s after a refund is made: later than a loaded machine takes to answer the refund
  // request itself, so the sync never races the request it re-checks; then quickly.
  t = await startTestService({ STATUS_SYNC_SCHEDULE: '2s,300ms,500ms,1s,1s,1s,2s,2s,2s,3s', STATUS_SYNC_POLL_INTERVAL: '200ms' });
  receiver = await new WebhookReceiver().start();
});
afterAll(async () => {
  for (const provider of ['cardpay', 'walletpay', 'mobilemoney']) await t.http.post(`/sandbox/${provider}/_control/outage`).send({ mode: 'ok' });
  await t.stop();
  await receiver.stop();
});

async function shop(name: string, provider: string, creds: Record<string, unknown>) {
  const { apiKey } = await t.createMerchant(name);
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', apiKey).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider, [provider]: creds }).expect(200);
  return apiKey;
}
const outage = (provider: string, mode: 'ok' | 'error') => t.http.post(`/sandbox/${provider}/_control/outage`).send({ mode }).expect(200);
const refundRequest = (apiKey: string, body: Record<string, unknown>) => t.http.post('/v1/refunds').set('X-API-Key', apiKey).send(body);
const getPayment = async (apiKey: string, id: string) => (await t.http.get(`/v1/payments/${id}`).set('X-API-Key', apiKey).expect(200)).body.data;
const pendingRefundOf = async (paymentId: string) => {
  const rows = await t.sql<{ id: string; status: string; provider_ref: string | null }>('SELECT id, status, provider_ref FROM refunds WHERE payment_id = $1', [paymentId]);
  expect(rows).toEqual([expect.objectContaining({ status: 'pending' })]);
  return rows[0]!;
};
const settled = (apiKey: string, refundId: string) =>
  eventually(async () => {
    const refund = (await t.http.get(`/v1/refunds/${refundId}`).set('X-API-Key', apiKey).expect(200)).body.data;
    return refund.status === 'pending' ? null : refund;
  }, 20_000, `refund ${refundId} settled`);
/** The audit trail's triggers of the refund's completion and the payment's move with it. */
const completionTriggers = (paymentId: string) =>
  t.sql<{ subject: string; to_status: string; trigger: string }>(
    `SELECT subject, to_status, trigger FROM payment_transitions WHERE payment_id = $1 AND accepted AND from_status = ANY ('{pending,completed}')
     AND ((subject = 'refund' AND to_status = 'completed') OR (subject = 'payment' AND to_status IN ('refunded', 'reversed'))) ORDER BY id`, [paymentId]);
const refundedEvent = (paymentId: string, type = 'payment.refunded') =>
  eventually(() => receiver.events(type).find((e) => e.json.data.payment_id === paymentId), 10_000, type);
/** Holds the refund's re-check off (it is not due for an hour) while the test acts as the provider, then makes it due. */
const holdSync = (refundId: string) => t.sql(`UPDATE refunds SET next_sync_at = now() + interval '1 hour' WHERE id = $1`, [refundId]);
const releaseSync = (refundId: string) => t.sql('UPDATE refunds SET next_sync_at = now() WHERE id = $1', [refundId]);
/**
 * A refund asked while `provider` answers 500: 201 with the refund pending (not 502, which reads as
 * "nothing happened"), with no provider reference. `hold`: its re-check is held off before the provider
 * recovers (see holdSync).
 */
async function refundDuringOutage(provider: string, apiKey: string, body: { payment_id: string; amount?: string }, { hold = false } = {}) {
  await outage(provider, 'error');
  try {
    const unanswered = await refundRequest(apiKey, body);
    expect(unanswered.status).toBe(201);
    expect(unanswered.body.data).toMatchObject({ status: 'pending', provider_ref: null });
    const pending = await pendingRefundOf(body.payment_id);
    expect(pending.id).toBe(unanswered.body.data.id);
    if (hold) await holdSync(pending.id);
    return pending;
  } finally {
    await outage(provider, 'ok');
  }
}

describe('cardpay', () => {
  const SECRET = 'sk_test_refund_sync_0001';
  let key: string;
  const provider = (method: 'get' | 'post' | 'delete', path: string) =>
    t.http[method](`/sandbox/cardpay${path}`).set('Authorization', `Bearer ${SECRET}`);
  const paid = async (paymentMethod = 'pm_card_visa') => {
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `refund-sync-${++n}`)
      .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: paymentMethod });
    expect(res.body.data.status).toBe('completed');
    return res.body.data as { id: string; provider_ref: string };
  };
  const refundsAtProvider = async (intentId: string) =>
    (await provider('get', `/v1/refunds?payment_intent=${intentId}`).expect(200)).body.data as { id: string; amount: number; metadata: Record<string, string> }[];

  beforeAll(async () => {
    key = await shop('Refund Sync Cards', 'cardpay', { secret_key: SECRET });
    // The account's events stop reaching the service (its endpoint removed at the provider).
    const endpoints = (await provider('get', '/v1/webhook_endpoints').expect(200)).body.data as { id: string }[];
    expect(endpoints).toHaveLength(1);
    for (const endpoint of endpoints) await provider('delete', `/v1/webhook_endpoints/${endpoint.id}`).expect(200);
  });

  it('a refund whose request never reached the provider is sent again, with the same idempotency key, and completes once', async () => {
    const p = await paid();
    const pending = await refundDuringOutage('cardpay', key, { payment_id: p.id, amount: '4.00' });

    const refund = await settled(key, pending.id);
    expect(refund).toMatchObject({ status: 'completed', amount: '4.00', provider_ref: expect.stringMatching(/^re_/) });
    expect(await getPayment(key, p.id)).toMatchObject({ status: 'completed', amount_refunded: '4.00' });
    expect((await refundedEvent(p.id)).json.data).toMatchObject({ refund_id: pending.id, amount_refunded: '4.00' });
    expect(await refundsAtProvider(p.provider_ref)).toEqual([expect.objectContaining({ id: refund.provider_ref, amount: 400, metadata: expect.objectContaining({ refund_id: pending.id }) })]);
    expect(await completionTriggers(p.id)).toEqual([{ subject: 'refund', to_status: 'completed', trigger: 'refund-sync' }]);
  });

  it('a refund the provider made but whose answer was lost is found by our refund id, not made twice', async () => {
    const p = await paid();
    const pending = await refundDuringOutage('cardpay', key, { payment_id: p.id, amount: '6.00' }, { hold: true });
    // The request did reach the provider (as if only its answer was lost, its idempotency key long expired).
    const made = await provider('post', '/v1/refunds').type('form')
      .send({ payment_intent: p.provider_ref, amount: '600', 'metadata[refund_id]': pending.id, 'metadata[payment_id]': p.id }).expect(200);
    await releaseSync(pending.id);

    const refund = await settled(key, pending.id);
    expect(refund).toMatchObject({ status: 'completed', amount: '6.00', provider_ref: made.body.id });
    expect((await refundsAtProvider(p.provider_ref)).map((r) => r.id)).toEqual([made.body.id]);
    expect(await getPayment(key, p.id)).toMatchObject({ amount_refunded: '6.00' });
    expect(await completionTriggers(p.id)).toEqual([{ subject: 'refund', to_status: 'completed', trigger: 'refund-sync' }]);
  });

  it('while a pending refund holds what remains, a refund of an amount is 422 naming it (at most 0.00), one of "what remains" 409', async () => {
    const p = await paid();
    const pending = await refundDuringOutage('cardpay', key, { payment_id: p.id }, { hold: true });
    const withAmount = await refundRequest(key, { payment_id: p.id, amount: '1.00' });
    expect(withAmount.status).toBe(422);
    expect(withAmount.body.error.details).toEqual([{ field: 'amount', issue: 'must be at most 0.00' }]);
    const withoutAmount = await refundRequest(key, { payment_id: p.id });
    expect(withoutAmount.status).toBe(409);
    expect(withoutAmount.body.error.message).toBe('payment has no amount left to refund');
    await releaseSync(pending.id);
    expect(await settled(key, pending.id)).toMatchObject({ status: 'completed', amount: '25.00' });
    expect(await t.sql('SELECT 1 FROM refunds WHERE payment_id = $1', [p.id])).toHaveLength(1);
  });

  it('a refund the provider answers pending completes when the provider has settled it, with none of its events', async () => {
    const p = await paid('pm_card_pendingRefund');
    const res = await refundRequest(key, { payment_id: p.id });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: expect.stringMatching(/^re_/) });

    expect(await settled(key, res.body.data.id)).toMatchObject({ status: 'completed', amount: '25.00' });
    expect(await getPayment(key, p.id)).toMatchObject({ status: 'refunded', amount_refunded: '25.00' });
    expect((await refundedEvent(p.id)).json.data).toMatchObject({ refund_id: res.body.data.id, status: 'refunded' });
    expect(await completionTriggers(p.id)).toEqual([
      { subject: 'refund', to_status: 'completed', trigger: 'refund-sync' },
      { subject: 'payment', to_status: 'refunded', trigger: 'refund-sync' },
    ]);
  });
});

describe('walletpay', () => {
  const CLIENT = { id: 'refund-sync-client', secret: 'refund-sync-secret' };
  let key: string;
  let token: string;
  const provider = (method: 'get' | 'post' | 'delete', path: string) =>
    t.http[method](`/sandbox/walletpay${path}`).set('Authorization', `Bearer ${token}`);
  const captured = async () => {
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `refund-sync-${++n}`)
      .send({ provider: 'walletpay', amount: '30.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    const approval = res.body.data.next_action.url as string;
    await fetch(`${approval}${approval.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
    const done = await t.http.post(`/v1/payments/${res.body.data.id}/capture`).set('X-API-Key', key).send({}).expect(200);
    expect(done.body.data.status).toBe('completed');
    const [capture] = await t.sql<{ id: string }>('SELECT id FROM sandbox_walletpay_captures WHERE order_id = $1', [done.body.data.provider_ref]);
    return { id: done.body.data.id as string, captureId: capture!.id };
  };
  const refundsAtProvider = (captureId: string) =>
    t.sql<{ id: string; amount_minor: string; custom_id: string }>('SELECT id, amount_minor, custom_id FROM sandbox_walletpay_refunds WHERE capture_id = $1', [captureId]);

  beforeAll(async () => {
    key = await shop('Refund Sync Wallet', 'walletpay', { env: 'sandbox', client_id: CLIENT.id, client_secret: CLIENT.secret });
    token = (await t.http.post('/sandbox/walletpay/v1/oauth2/token').auth(CLIENT.id, CLIENT.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token;
    // The app's webhook removed at the provider: its events stop reaching the service.
    const hooks = (await provider('get', '/v1/notifications/webhooks').expect(200)).body.webhooks as { id: string }[];
    expect(hooks).toHaveLength(1);
    for (const hook of hooks) await provider('delete', `/v1/notifications/webhooks/${hook.id}`).expect(204);
  });

  it('a refund whose request never reached the provider is sent again and completes once', async () => {
    const p = await captured();
    const pending = await refundDuringOutage('walletpay', key, { payment_id: p.id, amount: '5.00' });

    const refund = await settled(key, pending.id);
    expect(refund).toMatchObject({ status: 'completed', amount: '5.00' });
    expect(await refundsAtProvider(p.captureId)).toEqual([{ id: refund.provider_ref, amount_minor: '500', custom_id: pending.id }]);
    expect((await refundedEvent(p.id)).json.data).toMatchObject({ refund_id: pending.id, amount_refunded: '5.00' });
  });

  it('a refund the provider made but whose answer was lost is found on the order by our refund id, not made twice', async () => {
    const p = await captured();
    const pending = await refundDuringOutage('walletpay', key, { payment_id: p.id, amount: '7.00' }, { hold: true });
    const made = await provider('post', `/v2/payments/captures/${p.captureId}/refund`)
      .send({ amount: { value: '7.00', currency_code: 'USD' }, custom_id: pending.id }).expect(201);
    await releaseSync(pending.id);

    const refund = await settled(key, pending.id);
    expect(refund).toMatchObject({ status: 'completed', amount: '7.00', provider_ref: made.body.id });
    expect((await refundsAtProvider(p.captureId)).map((r) => r.id)).toEqual([made.body.id]);
    expect(await completionTriggers(p.id)).toEqual([{ subject: 'refund', to_status: 'completed', trigger: 'refund-sync' }]);
  });

  it('a refund answered 409 PREVIOUS_REQUEST_IN_PROGRESS is kept pending, not failed, and the sync completes it', async () => {
    const p = await captured();
    // Another request on the capture is in progress at the provider: the simulator finds the capture locked.
    const other = new pg.Client({ connectionString: t.databaseUrl });
    await other.connect();
    let pending: { id: string };
    try {
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM sandbox_walletpay_captures WHERE id = $1 FOR UPDATE', [p.captureId]);
      const res = await refundRequest(key, { payment_id: p.id, amount: '4.00' });
      expect(res.status).toBe(201);
      expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
      pending = await pendingRefundOf(p.id);
      expect(pending.id).toBe(res.body.data.id);
    } finally {
      await other.query('ROLLBACK');
      await other.end();
    }

    const refund = await settled(key, pending.id);
    expect(refund).toMatchObject({ status: 'completed', amount: '4.00' });
    expect(await refundsAtProvider(p.captureId)).toEqual([{ id: refund.provider_ref, amount_minor: '400', custom_id: pending.id }]);
    expect((await refundedEvent(p.id)).json.data).toMatchObject({ refund_id: pending.id, amount_refunded: '4.00' });
  });
});

describe('mobilemoney', () => {
  let key: string;
  const paid = async () => {
    const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `refund-sync-${++n}`)
      .send({ provider: 'mobilemoney', currency: 'KES', amount: '100', phone: '254708374149' });
    return eventually(async () => {
      const p = await getPayment(key, res.body.data.id);
      return p.status === 'completed' ? (p as { id: string }) : null;
    }, 15_000, 'payment completed');
  };
  const loseResults = (count: number) => t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count }).expect(200);

  beforeAll(async () => {
    key = await shop('Refund Sync Duka', 'mobilemoney', {
      env: 'sandbox', consumer_key: 'refund-sync-key', consumer_secret: 'refund-sync-secret',
      passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379', nominated_number: '254708374149',
    });
  });

  it('a reversal whose result never came is completed by the status report the sync asks for', async () => {
    const p = await paid();
    await loseResults(1);
    const res = await refundRequest(key, { payment_id: p.id });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: expect.any(String) });
    // The sync asks only once the operator's own result has been lost, so that one is the result lost.
    await holdSync(res.body.data.id);
    await eventually(async () => {
      const [control] = await t.sql<{ lost_results: number }>(`SELECT lost_results FROM sandbox_controls WHERE provider = 'mobilemoney'`);
      return control!.lost_results === 0 ? true : null;
    }, 10_000, "the reversal's result lost");
    await releaseSync(res.body.data.id);

    expect(await settled(key, res.body.data.id)).toMatchObject({ status: 'completed', amount: '100.00' });
    expect(await getPayment(key, p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
    expect((await refundedEvent(p.id, 'payment.reversed')).json.data).toMatchObject({ refund_id: res.body.data.id });
    // The sync's query answered.
    expect(await t.sql('SELECT confirms, result_code FROM provider_status_queries WHERE refund_id = $1', [res.body.data.id])).toEqual([{ confirms: 'refund-sync', result_code: '0' }]);
    expect(await completionTriggers(p.id)).toEqual([
      { subject: 'refund', to_status: 'completed', trigger: 'confirmed:refund-sync' },
      { subject: 'payment', to_status: 'reversed', trigger: 'confirmed:refund-sync' },
    ]);
  });

  it('the lose-results control takes a whole count, 0 or more', async () => {
    for (const count of [-1, 1.5, '2', null]) {
      const res = await t.http.post('/sandbox/mobilemoney/_control/lose-results').send({ count });
      expect(res.status).toBe(400);
    }
    expect((await loseResults(0)).body).toEqual({ provider: 'mobilemoney', lose_results: 0 });
  });

  it('a reversal whose request never reached the operator is sent again and completes', async () => {
    const p = await paid();
    const pending = await refundDuringOutage('mobilemoney', key, { payment_id: p.id });

    expect(await settled(key, pending.id)).toMatchObject({ status: 'completed', amount: '100.00', provider_ref: expect.any(String) });
    expect(await getPayment(key, p.id)).toMatchObject({ status: 'reversed', amount_refunded: '100.00' });
  });
});

describe('a backlog', () => {
  /**
   * A service with an hour between the refund sync's runs (it runs once at boot) and between a refund's
   * re-checks, so every re-check is the one run a test asks for, and 60 cardpay refunds an outage left
   * pending, all due now as after the outage; cardpay's events do not reach the service. A run lasts at most
   * half the jobs' lock lifetime: 30 s here (5 s by default in tests), room for 60 refunds on a loaded machine.
   * `count` refunds instead of 60; `env`, the service's further configuration; `started`, called once it listens.
   */
  async function refundBacklog(
    secret: string,
    { count = 60, env = {}, started }: { count?: number; env?: Record<string, string>; started?: (s: TestService) => void } = {},
  ): Promise<TestService> {
    const s = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', STATUS_SYNC_POLL_INTERVAL: '1h', ...env }, { agendaLockLifetimeMs: 60_000 });
    started?.(s);
    const { apiKey } = await s.createMerchant(`Refund Backlog Shop ${secret}`);
    await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: secret } }).expect(200);
    const endpoints = (await s.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${secret}`).expect(200)).body.data as { id: string }[];
    for (const endpoint of endpoints) await s.http.delete(`/sandbox/cardpay/v1/webhook_endpoints/${endpoint.id}`).set('Authorization', `Bearer ${secret}`).expect(200);
    const paymentIds: string[] = [];
    for (let i = 0; i < count; i++) {
      const paid = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', `refund-backlog-${i}`)
        .send({ provider: 'cardpay', amount: '10.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
      expect(paid.body.data.status).toBe('completed');
      paymentIds.push(paid.body.data.id);
    }
    await cardpayOutage(s, 'error');
    try {
      for (const paymentId of paymentIds) {
        const res = await s.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: paymentId, amount: '4.00' });
        expect(res.status).toBe(201);
        expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
      }
    } finally {
      await cardpayOutage(s, 'ok');
    }
    await jobRunFinished(s, SYNC_REFUNDS_JOB);
    await s.sql('UPDATE refunds SET next_sync_at = now()');
    return s;
  }
  const cardpayOutage = (s: TestService, mode: 'ok' | 'error') => s.http.post('/sandbox/cardpay/_control/outage').send({ mode }).expect(200);

  it('one run of the job sends every refund an outage left pending, batch after batch: 60 complete, not one claim of 25', async () => {
    const s = await refundBacklog('sk_test_refund_backlog_0001');
    try {
      expect(await runJobOnce(s, SYNC_REFUNDS_JOB)).toBe(1);
      const statuses = await s.sql('SELECT status, count(*)::int AS refunds FROM refunds GROUP BY status');
      expect(statuses).toEqual([{ status: 'completed', refunds: 60 }]); // was 25 completed, 35 pending for the next runs
    } finally {
      await s.stop();
    }
  }, 180_000);

  it('while cardpay is still down, one run stops after a batch whose every check met the outage, instead of asking about all 60', async () => {
    const s = await refundBacklog('sk_test_refund_backlog_down');
    try {
      await cardpayOutage(s, 'error');
      expect(await runJobOnce(s, SYNC_REFUNDS_JOB)).toBe(1);
      const [{ rechecked }] = await s.sql<{ rechecked: number }>('SELECT count(*)::int AS rechecked FROM refunds WHERE sync_attempts > 0') as [{ rechecked: number }];
      expect(rechecked).toBeGreaterThan(0);
      expect(rechecked).toBeLessThanOrEqual(25); // one batch; was 60
    } finally {
      await s.stop();
    }
  }, 180_000);

  it("cardpay answering 429 to the sync's repeats: the refunds stay pending (no refund.failed), the account is not asked again in the run, and the next run completes them", async () => {
    const stub = new RateLimitedRefunds();
    const stubUrl = await stub.start();
    const s = await refundBacklog('sk_test_refund_backlog_429', {
      count: 10,
      env: { CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay` },
      started: (service) => (stub.target = service.baseUrl),
    });
    try {
      stub.limiting = true;
      expect(await runJobOnce(s, SYNC_REFUNDS_JOB)).toBe(1);
      // Only the repeats already under way when the first 429 came (5 at a time); was all 10, each refund failed.
      expect(stub.limited).toBeGreaterThan(0);
      expect(stub.limited).toBeLessThanOrEqual(5);
      expect(await s.sql('SELECT status, count(*)::int AS refunds FROM refunds GROUP BY status')).toEqual([{ status: 'pending', refunds: 10 }]);
      expect(await s.sql(`SELECT 1 FROM events WHERE type = 'refund.failed'`)).toEqual([]);

      // The limit is over: the next run (the rows due again) sends each refund once more, and each completes once.
      stub.limiting = false;
      await s.sql('UPDATE refunds SET next_sync_at = now()');
      expect(await runJobOnce(s, SYNC_REFUNDS_JOB)).toBe(1);
      expect(await s.sql('SELECT status, count(*)::int AS refunds FROM refunds GROUP BY status')).toEqual([{ status: 'completed', refunds: 10 }]);
      const [made] = await s.sql<{ n: number }>('SELECT count(*)::int AS n FROM sandbox_cardpay_refunds');
      expect(made!.n).toBe(10);
    } finally {
      await s.stop();
      await stub.stop();
    }
  }, 180_000);
});

/** In front of the cardpay simulator: while `limiting`, every refund request (POST /v1/refunds) is answered 429 as Stripe's rate limiter does, and counted. */
class RateLimitedRefunds extends ForwardingStub {
  limiting = false;
  limited = 0;

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (!this.limiting || req.method !== 'POST' || !/\/v1\/refunds(\?|$)/.test(req.url)) return forward();
    this.limited++;
    return jsonAnswer(429, { error: { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests hit the API too quickly.' } });
  }
}

describe('refunds of one capture', () => {
  it('two walletpay refunds an outage left pending are sent one after the other, not at once: one run completes both (neither answered 409 PREVIOUS_REQUEST_IN_PROGRESS)', async () => {
    // PayPal answers a refund of a capture on which another request is in progress 409; the refund would
    // wait for its next schedule step (an hour here). An hour between the job's runs: the one run below is all.
    const s = await startTestService({ STATUS_SYNC_SCHEDULE: '1h', STATUS_SYNC_POLL_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
    try {
      const client = { id: 'refund-lanes-client', secret: 'refund-lanes-secret' };
      const { apiKey } = await s.createMerchant('Refund Lanes Wallet');
      await s.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: client.id, client_secret: client.secret } }).expect(200);
      const token = (await s.http.post('/sandbox/walletpay/v1/oauth2/token').auth(client.id, client.secret).type('form').send({ grant_type: 'client_credentials' }).expect(200)).body.access_token;
      // The app's webhook removed at the provider: only the sync settles the refunds.
      const hooks = (await s.http.get('/sandbox/walletpay/v1/notifications/webhooks').set('Authorization', `Bearer ${token}`).expect(200)).body.webhooks as { id: string }[];
      for (const hook of hooks) await s.http.delete(`/sandbox/walletpay/v1/notifications/webhooks/${hook.id}`).set('Authorization', `Bearer ${token}`).expect(204);
      const created = await s.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', 'refund-lanes-1')
        .send({ provider: 'walletpay', amount: '30.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
      const approval = created.body.data.next_action.url as string;
      await fetch(`${approval}${approval.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
      const paymentId = created.body.data.id as string;
      expect((await s.http.post(`/v1/payments/${paymentId}/capture`).set('X-API-Key', apiKey).send({}).expect(200)).body.data.status).toBe('completed');

      const walletpayOutage = (mode: 'ok' | 'error') => s.http.post('/sandbox/walletpay/_control/outage').send({ mode }).expect(200);
      await walletpayOutage('error');
      try {
        for (const amount of ['4.00', '5.00']) {
          const res = await s.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: paymentId, amount });
          expect(res.status).toBe(201);
          expect(res.body.data).toMatchObject({ status: 'pending', provider_ref: null });
        }
      } finally {
        await walletpayOutage('ok');
      }
      await jobRunFinished(s, SYNC_REFUNDS_JOB);
      await s.sql('UPDATE refunds SET next_sync_at = now()');

      expect(await runJobOnce(s, SYNC_REFUNDS_JOB)).toBe(1);
      const refunds = await s.sql('SELECT amount_minor::text AS amount_minor, status FROM refunds WHERE payment_id = $1 ORDER BY amount_minor', [paymentId]);
      expect(refunds).toEqual([{ amount_minor: '400', status: 'completed' }, { amount_minor: '500', status: 'completed' }]); // was one of them pending
    } finally {
      await s.stop();
    }
  }, 120_000);
});
