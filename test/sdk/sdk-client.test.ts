import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPaymentsClient, PaymentsApiError, PaymentsConnectionError, type PaymentsClient } from '../../client/index.js';
import { startTestService, type TestService } from '../support/service.js';

let t: TestService;
let client: PaymentsClient;
let merchantId: string;
let apiKey: string;

interface SentRequest {
  method: string;
  url: string;
  headers: Headers;
}

/** A fetch that records what it sends and can lose the response of the next POST to a path (default /v1/payments). */
function recordingFetch() {
  const sent: SentRequest[] = [];
  let losePath: string | undefined;
  const wrapped: typeof fetch = async (input, init) => {
    const url = String(input);
    const method = init?.method ?? 'GET';
    sent.push({ method, url, headers: new Headers(init?.headers) });
    const response = await fetch(input, init);
    if (losePath !== undefined && method === 'POST' && new URL(url).pathname === losePath) {
      losePath = undefined;
      // The service has done the work; the answer is lost on the way back, as with a dropped connection.
      await response.arrayBuffer();
      throw new TypeError('fetch failed: socket hang up');
    }
    return response;
  };
  return { sent, fetch: wrapped, loseNextCreateResponse: (pathname = '/v1/payments') => void (losePath = pathname) };
}

const visa = { provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' } as const;

beforeAll(async () => {
  t = await startTestService();
  ({ merchantId, apiKey } = await t.createMerchant('SDK Shop'));
  client = createPaymentsClient({ baseUrl: t.baseUrl, apiKey });
  const stored = await client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_sdkshop_0001' } });
  expect(stored).toEqual({ provider: 'cardpay', config_summary: expect.objectContaining({ secret_key: '****0001' }) });
});
afterAll(async () => {
  await t.stop();
});

describe('SDK against the real service', () => {
  it('creates a cardpay payment, reads it back and finds it in the list', async () => {
    const payment = await client.payments.create(visa);
    expect(payment).toMatchObject({ merchant_id: merchantId, provider: 'cardpay', status: 'completed', amount: '25.00', currency: 'USD' });
    expect(payment.provider_ref).toMatch(/^pi_/);

    const again = await client.payments.get(payment.id);
    expect(again.id).toBe(payment.id);
    expect(again.provider_response).toEqual(expect.any(Object));

    const page = await client.payments.list({ search: payment.idempotency_key });
    expect(page.meta).toEqual({ page: 1, page_size: 50, total: 1 });
    expect(page.data.map((p) => p.id)).toEqual([payment.id]);
  });

  it('generates an Idempotency-Key per create, and sends a given one as it is', async () => {
    const rec = recordingFetch();
    const sdk = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, fetch: rec.fetch });
    const a = await sdk.payments.create(visa);
    const b = await sdk.payments.create(visa);
    const keys = rec.sent.map((r) => r.headers.get('idempotency-key'));
    expect(keys).toEqual([a.idempotency_key, b.idempotency_key]);
    expect(a.idempotency_key).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.idempotency_key).not.toBe(b.idempotency_key);
    expect(rec.sent[0]!.headers.get('x-api-key')).toBe(apiKey);

    const own = await sdk.payments.create(visa, { idempotencyKey: 'order-sdk-42' });
    expect(own.idempotency_key).toBe('order-sdk-42');
    expect(rec.sent.at(-1)!.headers.get('idempotency-key')).toBe('order-sdk-42');
  });

  it('retries a create whose response was lost with the same key: one payment, the original returned', async () => {
    const rec = recordingFetch();
    const retries: number[] = [];
    const sdk = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, fetch: rec.fetch, initialRetryDelayMs: 50, onRetry: (i) => retries.push(i.attempt) });
    rec.loseNextCreateResponse();
    const payment = await sdk.payments.create({ ...visa, amount: '31.00' });

    expect(retries).toEqual([2]);
    expect(rec.sent).toHaveLength(2);
    const [first, second] = rec.sent.map((r) => r.headers.get('idempotency-key'));
    expect(first).toEqual(expect.any(String));
    expect(second).toBe(first);
    expect(payment.idempotency_key).toBe(first);
    const rows = await t.sql<{ id: string }>('SELECT id FROM payments WHERE idempotency_key = $1', [first]);
    expect(rows.map((r) => r.id)).toEqual([payment.id]);
  });

  it('does not retry a POST without an Idempotency-Key (a reconciliation) after a network error', async () => {
    let calls = 0;
    const sdk = createPaymentsClient({
      baseUrl: t.baseUrl,
      apiKey,
      initialRetryDelayMs: 10,
      fetch: async (input, init) => {
        calls += 1;
        throw new TypeError(`fetch failed (${init?.method} ${String(input)})`);
      },
    });
    const error = await sdk.mobilemoney.reconcile({}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsConnectionError);
    expect((error as PaymentsConnectionError).attempts).toBe(1);
    expect(calls).toBe(1);
  });

  it('a create whose every answer was lost throws with the Idempotency-Key it sent, and retrying later with it charges once', async () => {
    const sent: (string | null)[] = [];
    const lossy = createPaymentsClient({
      baseUrl: t.baseUrl,
      apiKey,
      initialRetryDelayMs: 10,
      fetch: async (input, init) => {
        sent.push(new Headers(init?.headers).get('idempotency-key'));
        // The service does the work; the answer is lost on the way back, on every attempt.
        await (await fetch(input, init)).arrayBuffer();
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
      },
    });
    const error = await lossy.payments.create({ ...visa, amount: '33.00' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsConnectionError);
    expect((error as PaymentsConnectionError).attempts).toBe(3);
    expect(sent).toEqual([expect.stringMatching(/^[0-9a-f-]{36}$/), sent[0], sent[0]]);
    const key = (error as PaymentsConnectionError).idempotencyKey;
    expect(key).toBe(sent[0]);

    // Later (the service reachable again), the same key returns the payment the lost attempts made.
    const later = await client.payments.create({ ...visa, amount: '33.00' }, { idempotencyKey: key });
    expect(later.$response).toMatchObject({ replayed: true, idempotencyKey: key });
    const rows = await t.sql<{ id: string }>('SELECT id FROM payments WHERE idempotency_key = $1', [key]);
    expect(rows.map((r) => r.id)).toEqual([later.id]);
  });

  it('PaymentsApiError and $response carry the Idempotency-Key the request sent, and none when it sent none', async () => {
    const rec = recordingFetch();
    const sdk = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, fetch: rec.fetch });
    const refused = await sdk.refunds.create({ payment_id: '00000000-0000-4000-8000-000000000000' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PaymentsApiError);
    expect(refused).toMatchObject({ status: 404, idempotencyKey: rec.sent[0]!.headers.get('idempotency-key') });
    expect((refused as PaymentsApiError).idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);

    const payment = await sdk.payments.create(visa);
    expect(payment.$response.idempotencyKey).toBe(payment.idempotency_key);

    const missing = await sdk.payments.get('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e);
    expect(missing).toMatchObject({ status: 404, idempotencyKey: undefined });
    expect((await sdk.merchant.get()).$response.idempotencyKey).toBeUndefined();
  });

  it("a key another merchant already used is refused 409 CONFLICT: keys are unique across the service, as the SDK's docs say", async () => {
    // Two shops that both key by their bare order number: the second shop's order 1042 cannot be paid.
    const key = `order-${Date.now()}`;
    await client.payments.create(visa, { idempotencyKey: key });
    const { apiKey: otherKey } = await t.createMerchant('Other Shop');
    const other = createPaymentsClient({ baseUrl: t.baseUrl, apiKey: otherKey });
    await other.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_othershop_01' } });
    const refused = await other.payments.create(visa, { idempotencyKey: key }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PaymentsApiError);
    expect(refused).toMatchObject({ status: 409, code: 'CONFLICT', inProgress: false, mayHaveSucceeded: false });
    // A key behind a prefix only that shop uses goes through.
    const prefixed = await other.payments.create(visa, { idempotencyKey: `other-shop-3b1d:${key}` });
    expect(prefixed.status).toBe('completed');
  });

  it('successful calls carry the request id and the replayed flag on $response (left out of JSON)', async () => {
    const key = `sdk-replay-${Date.now()}`;
    const first = await client.payments.create(visa, { idempotencyKey: key });
    const again = await client.payments.create(visa, { idempotencyKey: key });
    expect(again.id).toBe(first.id);
    expect(first.$response).toMatchObject({ status: 201, replayed: false, requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(again.$response).toMatchObject({ status: 200, replayed: true });
    expect(again.$response.requestId).not.toBe(first.$response.requestId);
    expect(JSON.parse(JSON.stringify(first))).not.toHaveProperty('$response');
    const page = await client.payments.list({ page_size: 1 });
    expect(page.$response.status).toBe(200);
    expect(page.data).toHaveLength(1);
  });

  it('throws PaymentsApiError with code, status, requestId and details for 422', async () => {
    const error = await client.payments.create({ provider: 'cardpay', amount: '-5', currency: 'USD', payment_method: 'pm_card_visa' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsApiError);
    const e = error as PaymentsApiError;
    expect(e).toMatchObject({ name: 'PaymentsApiError', status: 422, code: 'VALIDATION_ERROR' });
    expect(e.details).toEqual(expect.arrayContaining([expect.objectContaining({ field: 'amount' })]));
    expect(e.requestId).toBe(e.headers.get('x-request-id'));
    expect(e.requestId).toEqual(expect.any(String));
    expect(e.message).toEqual(expect.any(String));
  });

  it('throws PaymentsApiError NOT_FOUND for an unknown payment and UNAUTHORIZED for a bad key', async () => {
    const missing = await client.payments.get('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(PaymentsApiError);
    expect(missing).toMatchObject({ status: 404, code: 'NOT_FOUND', details: [] });
    expect((missing as PaymentsApiError).requestId).toEqual(expect.any(String));

    const stranger = createPaymentsClient({ baseUrl: t.baseUrl, apiKey: 'pk_not_a_real_key' });
    const unauthorized = await stranger.merchant.get().catch((e: unknown) => e);
    expect(unauthorized).toBeInstanceOf(PaymentsApiError);
    expect(unauthorized).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    expect((unauthorized as PaymentsApiError).requestId).toEqual(expect.any(String));
  });

  it('encodes ids into one path segment, so an id cannot reach another route, and refuses empty or dot ids before sending', async () => {
    const rec = recordingFetch();
    const sdk = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, fetch: rec.fetch, maxRetries: 0 });
    // Unencoded, this id was DELETE /v1/merchant/credentials/cardpay: the merchant's provider credentials.
    const traversal = await sdk.cards.delete('../../merchant/credentials/cardpay').catch((e: unknown) => e);
    expect(traversal).toBeInstanceOf(PaymentsApiError);
    expect(new URL(rec.sent[0]!.url).pathname).toBe('/v1/payments/cards/..%2F..%2Fmerchant%2Fcredentials%2Fcardpay');
    expect((await client.merchant.listCredentials()).map((c) => c.provider)).toContain('cardpay');

    await sdk.cards.delete('a/../b').catch((e: unknown) => e);
    expect(rec.sent[1]!.url).toBe(`${t.baseUrl}/v1/payments/cards/a%2F..%2Fb`);

    // '' dropped the segment (GET /v1/payments: a list, typed as a Payment); '.' and '..' are resolved away by URL parsing.
    for (const bad of ['', '.', '..', undefined, 42]) {
      await expect(sdk.payments.get(bad as string)).rejects.toThrow(TypeError);
    }
    await expect(sdk.merchant.deleteCredentials('' as 'cardpay')).rejects.toThrow(TypeError);
    await expect(sdk.mobilemoney.checkStatus('..')).rejects.toThrow(TypeError);
    // Every method taking an id rejects (events.get threw synchronously, escaping a `.catch`).
    await expect(sdk.events.get('')).rejects.toThrow(TypeError);
    const byId = [sdk.payments.transitions, sdk.payments.capture, sdk.cards.delete, sdk.refunds.get, sdk.webhookLogs.get, sdk.webhookLogs.retry, sdk.events.get];
    for (const method of byId) await expect(method('..')).rejects.toThrow(TypeError);
    expect(rec.sent).toHaveLength(2);
  });

  it('listAll walks every page of a filtered list', async () => {
    const { apiKey: key } = await t.createMerchant('Paging Shop');
    const rec = recordingFetch();
    const sdk = createPaymentsClient({ baseUrl: t.baseUrl, apiKey: key, fetch: rec.fetch });
    await sdk.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_paging_0001' } });
    const created: string[] = [];
    for (let i = 0; i < 5; i++) created.push((await sdk.payments.create({ ...visa, amount: `${10 + i}.00` })).id);
    await sdk.payments.create({ ...visa, payment_method: 'pm_card_chargeDeclined' });

    const sentBefore = rec.sent.length;
    const seen: string[] = [];
    for await (const p of sdk.payments.listAll({ status: 'completed', page_size: 2 })) {
      expect(p.status).toBe('completed');
      seen.push(p.id);
    }
    expect(seen.sort()).toEqual([...created].sort());
    const pages = rec.sent.slice(sentBefore).map((r) => new URL(r.url).searchParams.get('page'));
    expect(pages).toEqual(['1', '2', '3']);

    const empty: unknown[] = [];
    for await (const p of sdk.payments.listAll({ status: 'refunded' })) empty.push(p);
    expect(empty).toEqual([]);
  });

  it('covers cards, refunds, capture errors, the webhook settings and the delivery log', async () => {
    const card = await client.cards.create({ payment_method_id: 'pm_card_visa', customer_email: 'ada@example.com' });
    expect(card).toMatchObject({ provider: 'cardpay', last4: expect.any(String) });
    expect((await client.cards.list()).data.map((c) => c.id)).toContain(card.id);
    const charged = await client.payments.create({ provider: 'cardpay', amount: '12.00', currency: 'USD', saved_card_id: card.id });
    expect(charged.status).toBe('completed');
    expect(await client.cards.delete(card.id)).toEqual({ id: card.id, deleted: true });

    const refund = await client.refunds.create({ payment_id: charged.id, amount: '2.00' });
    expect(refund).toMatchObject({ payment_id: charged.id, status: 'completed', amount: '2.00' });
    expect((await client.refunds.get(refund.id)).id).toBe(refund.id);
    const refunds = [];
    for await (const r of client.refunds.listAll({ payment_id: charged.id })) refunds.push(r.id);
    expect(refunds).toEqual([refund.id]);

    const conflict = await client.payments.capture(charged.id).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(PaymentsApiError);
    // A completed card payment is in the wrong status for capture: the final 409 CONFLICT, not a passing one.
    expect(conflict).toMatchObject({ status: 409, code: 'CONFLICT', inProgress: false });

    const webhook = await client.merchant.setWebhook('http://127.0.0.1:9/webhooks');
    expect(webhook.webhook_secret).toMatch(/^whsec_/);
    expect((await client.merchant.get()).webhook_url).toBe('http://127.0.0.1:9/webhooks');
    expect((await client.merchant.listCredentials()).map((c) => c.provider)).toEqual(['cardpay']);

    const logs = await client.webhookLogs.list({ page_size: 5 });
    expect(logs.meta).toMatchObject({ page: 1, page_size: 5 });
  });

  it('takes a walletpay payment through approval and capture', async () => {
    await client.merchant.storeCredentials({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'sdk-wallet-client', client_secret: 'sdk-wallet-secret' } });
    const order = await client.payments.create({
      provider: 'walletpay', amount: '45.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel',
    });
    expect(order).toMatchObject({ status: 'pending', next_action: { type: 'redirect', url: expect.any(String) } });
    const approval = order.next_action!.url;
    await fetch(`${approval}${approval.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
    const captured = await client.payments.capture(order.id);
    expect(captured).toEqual({ id: order.id, status: 'completed', provider_ref: expect.any(String), amount: '45.00', currency: 'USD', provider: 'walletpay', created_at: expect.any(String) });
  });

  it("what the SDK's retry got back after a lost answer is this call's work: replayed is false with a generated key, and earlierAttemptMayHaveSucceeded says so", async () => {
    // $response.replayed documents "nothing new happened": a merchant skipping fulfilment on it skipped a payment this very call charged.
    const rec = recordingFetch();
    const sdk = createPaymentsClient({ baseUrl: t.baseUrl, apiKey, fetch: rec.fetch, initialRetryDelayMs: 10 });
    const lost = async <T>(pathname: string, call: () => Promise<T>): Promise<T> => {
      rec.loseNextCreateResponse(pathname);
      const before = rec.sent.length;
      const result = await call();
      expect(rec.sent.slice(before).map((r) => new URL(r.url).pathname)).toEqual([pathname, pathname]);
      return result;
    };
    // The service's answer to the retry is a replay (Idempotent-Replayed: true) of the work the lost attempt did.
    const ownWork = (meta: { headers: Headers; replayed: boolean; earlierAttemptMayHaveSucceeded: boolean }) =>
      expect({ header: meta.headers.get('idempotent-replayed'), replayed: meta.replayed, earlier: meta.earlierAttemptMayHaveSucceeded }).toEqual({ header: 'true', replayed: false, earlier: true });

    const payment = await lost('/v1/payments', () => sdk.payments.create({ ...visa, amount: '41.00' }));
    ownWork(payment.$response);
    expect(payment.$response.idempotencyKey).toBe(payment.idempotency_key);
    ownWork((await lost('/v1/refunds', () => sdk.refunds.create({ payment_id: payment.id, amount: '1.00' }))).$response);
    ownWork((await lost('/v1/payments/cards', () => sdk.cards.create({ payment_method_id: 'pm_card_visa' }))).$response);
    await sdk.merchant.storeCredentials({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'sdk-wallet-client', client_secret: 'sdk-wallet-secret' } });
    const order = await sdk.payments.create({ provider: 'walletpay', amount: '46.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' });
    await fetch(`${order.next_action!.url}${order.next_action!.url.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
    const captured = await lost(`/v1/payments/${order.id}/capture`, () => sdk.payments.capture(order.id));
    expect(captured).toMatchObject({ id: order.id, status: 'completed' });
    ownWork(captured.$response);

    // The caller's own key may be an earlier call's: replayed stays true, earlierAttemptMayHaveSucceeded says it may be this one's.
    const key = `sdk-lost-own-key-${Date.now()}`;
    const keyed = await lost('/v1/payments', () => sdk.payments.create({ ...visa, amount: '42.00' }, { idempotencyKey: key }));
    expect(keyed.$response).toMatchObject({ status: 200, replayed: true, earlierAttemptMayHaveSucceeded: true, idempotencyKey: key });
    // No lost answer: a first answer and a plain replay by a later call, neither after an earlier attempt.
    const again = await sdk.payments.create({ ...visa, amount: '42.00' }, { idempotencyKey: key });
    expect(again.$response).toMatchObject({ status: 200, replayed: true, earlierAttemptMayHaveSucceeded: false });
    const fresh = await sdk.payments.create(visa);
    expect(fresh.$response).toMatchObject({ status: 201, replayed: false, earlierAttemptMayHaveSucceeded: false });
  });

  it('covers the mobilemoney operations: push payment, status query and reconciliation', async () => {
    await client.merchant.storeCredentials({
      provider: 'mobilemoney',
      mobilemoney: {
        env: 'sandbox', consumer_key: 'sdk-consumer-key', consumer_secret: 'sdk-consumer-secret',
        passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379', nominated_number: '254708374149',
      },
    });
    const push = await client.payments.create({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' });
    expect(push).toMatchObject({ provider: 'mobilemoney', status: 'pending', provider_ref: expect.stringMatching(/^ws_CO_/) });
    const ack = await client.mobilemoney.checkStatus(push.provider_ref!);
    expect(ack).toEqual(expect.objectContaining({ ResponseCode: expect.any(String) }));
    const report = await client.mobilemoney.reconcile();
    expect(report).toEqual(expect.objectContaining({ pulled: expect.any(Number), results: expect.any(Array) }));
  });
});
