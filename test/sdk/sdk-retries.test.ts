import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  backoffDelay, createPaymentsClient, parseRetryAfter, PaymentsAbortError, PaymentsApiError, PaymentsConnectionError, PaymentsError, responseOf, type RetryInfo,
} from '../../client/index.js';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * What the stub does with the next request: answer with a status, never answer, or pass it to the service
 * and lose the service's answer ('drop': the connection is cut once the service has answered, as when a
 * network fails on the way back). Unscripted requests go to the service.
 */
type Scripted = { status: number; headers?: Record<string, string>; body?: unknown } | 'hang' | 'drop';

/** A proxy in front of the real service that can answer the next requests itself (503, 429, a hang) or drop the service's answer. */
class StubProxy extends ForwardingStub {
  readonly seen: { method: string; path: string; idempotencyKey: string | undefined; requestId: string | undefined }[] = [];
  /** The service's answers that 'drop' kept from the client. */
  readonly dropped: { status: number; body: string }[] = [];
  private script: Scripted[] = [];

  next(...steps: Scripted[]) {
    this.script.push(...steps);
  }

  reset() {
    this.script = [];
    this.seen.length = 0;
    this.dropped.length = 0;
  }

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer | 'hold' | 'cut'> {
    const key = req.headers['idempotency-key'];
    const requestId = req.headers['x-request-id'];
    this.seen.push({ method: req.method, path: req.url, idempotencyKey: Array.isArray(key) ? key[0] : key, requestId: Array.isArray(requestId) ? requestId[0] : requestId });
    const step = this.script.shift();
    if (step === 'hang') return 'hold';
    if (step && step !== 'drop') {
      const text = typeof step.body === 'string' ? step.body : JSON.stringify(step.body ?? {});
      const type = typeof step.body === 'string' ? 'text/plain' : 'application/json';
      return { status: step.status, headers: { 'content-type': type, ...step.headers }, body: text };
    }
    const answer = await forward();
    if (step !== 'drop') return answer;
    this.dropped.push({ status: answer.status, body: answer.body.toString() });
    return 'cut';
  }
}

const unavailable = (retryAfter?: string): Scripted => ({
  status: 503,
  headers: retryAfter === undefined ? {} : { 'retry-after': retryAfter },
  body: { success: false, error: { code: 'INTERNAL_ERROR', message: 'Temporarily unavailable', request_id: 'stub-503' } },
});
const rateLimited = (retryAfter: string): Scripted => ({
  status: 429,
  headers: { 'retry-after': retryAfter },
  body: { success: false, error: { code: 'RATE_LIMITED', message: 'Slow down', request_id: 'stub-429' } },
});

let t: TestService;
let stub: StubProxy;
let stubUrl: string;
let apiKey: string;
const visa = { provider: 'cardpay', amount: '20.00', currency: 'USD', payment_method: 'pm_card_visa' } as const;

function sdk(extra: { maxRetries?: number; timeoutMs?: number; maxRetryDelayMs?: number } = {}) {
  const retries: RetryInfo[] = [];
  const client = createPaymentsClient({ baseUrl: stubUrl, apiKey, initialRetryDelayMs: 20, onRetry: (info) => retries.push(info), ...extra });
  return { client, retries };
}

beforeAll(async () => {
  t = await startTestService();
  stub = new StubProxy();
  stubUrl = await stub.start();
  stub.target = t.baseUrl;
  ({ apiKey } = await t.createMerchant('Retry Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_retry_0001' } }).expect(200);
});
afterAll(async () => {
  await stub.stop();
  await t.stop();
});

describe('SDK retries', () => {
  it('waits the Retry-After of a 503 and retries the create with the same Idempotency-Key', async () => {
    stub.reset();
    stub.next(unavailable('1'));
    const { client, retries } = sdk();
    const payment = await client.payments.create(visa);
    expect(payment.status).toBe('completed');
    expect(retries).toEqual([expect.objectContaining({ attempt: 2, status: 503, delayMs: 1000, method: 'POST' })]);
    expect(stub.seen).toHaveLength(2);
    expect(stub.seen[1]!.idempotencyKey).toBe(stub.seen[0]!.idempotencyKey);
    expect(payment.idempotency_key).toBe(stub.seen[0]!.idempotencyKey);
    const rows = await t.sql('SELECT id FROM payments WHERE idempotency_key = $1', [payment.idempotency_key]);
    expect(rows).toHaveLength(1);
  });

  it('retries a GET after 429s, using Retry-After (seconds or an HTTP date) instead of backoff', async () => {
    const created = await sdk().client.payments.create(visa);
    stub.reset();
    stub.next(rateLimited('0'), rateLimited(new Date(Date.now() - 60_000).toUTCString()));
    const { client, retries } = sdk();
    const payment = await client.payments.get(created.id);
    expect(payment.id).toBe(created.id);
    expect(retries.map((r) => [r.attempt, r.status, r.delayMs])).toEqual([
      [2, 429, 0],
      [3, 429, 0],
    ]);
  });

  it('gives up after maxRetries with the last error, using backoff when there is no Retry-After', async () => {
    stub.reset();
    stub.next(unavailable(), unavailable(), { status: 503, body: 'Service Unavailable' });
    const { client, retries } = sdk({ maxRetries: 2 });
    const error = await client.merchant.get().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsApiError);
    expect(error).toMatchObject({ status: 503, code: 'UNEXPECTED_RESPONSE', body: 'Service Unavailable' });
    expect(stub.seen).toHaveLength(3);
    expect(retries.map((r) => r.attempt)).toEqual([2, 3]);
    // First step 20 ms, then 40 ms, each with jitter over its upper half.
    expect(retries[0]!.delayMs).toBeGreaterThanOrEqual(10);
    expect(retries[0]!.delayMs).toBeLessThanOrEqual(20);
    expect(retries[1]!.delayMs).toBeGreaterThanOrEqual(20);
    expect(retries[1]!.delayMs).toBeLessThanOrEqual(40);
  });

  it('does not retry when Retry-After is longer than maxRetryDelayMs', async () => {
    stub.reset();
    stub.next(unavailable('120'));
    const { client, retries } = sdk({ maxRetryDelayMs: 5_000 });
    const error = await client.merchant.get().catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 503, code: 'INTERNAL_ERROR', requestId: 'stub-503' });
    expect(retries).toEqual([]);
    expect(stub.seen).toHaveLength(1);
  });

  it('refunds, captures and card saves send an Idempotency-Key and their retries reuse it', async () => {
    const { client, retries } = sdk();
    const calls = [
      () => client.refunds.create({ payment_id: '00000000-0000-4000-8000-000000000000' }),
      () => client.payments.capture('00000000-0000-4000-8000-000000000000'),
      () => client.cards.create({ payment_method_id: 'pm_card_visa' }),
    ];
    for (const call of calls) {
      stub.reset();
      stub.next(unavailable('0'));
      // The retry reaches the service, which answers for itself (404 / 422: nothing to act on).
      await call().catch((e: unknown) => e);
      expect(stub.seen).toHaveLength(2);
      const [first, second] = stub.seen;
      expect(first!.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
      expect(second!.idempotencyKey).toBe(first!.idempotencyKey);
    }
    expect(retries).toHaveLength(3);
    // A key of the caller's own is sent as given.
    stub.reset();
    await client.refunds.create({ payment_id: '00000000-0000-4000-8000-000000000000' }, { idempotencyKey: 'refund-order-77' }).catch((e: unknown) => e);
    expect(stub.seen.map((r) => r.idempotencyKey)).toEqual(['refund-order-77']);
  });

  it('a create whose key is still being processed (409 with Retry-After) is retried with the same key and answers the first request\'s payment', async () => {
    // A service whose provider takes 11 s to answer: the first request holds its key longer than the 10 s
    // a second request with that key waits before it is told 409 "still being processed".
    const slow = await startTestService({ SANDBOX_LATENCY_MS: '11000', PROVIDER_TIMEOUT_MS: '15000', IDEMPOTENCY_LEASE: '120s' });
    try {
      const { apiKey: slowKey } = await slow.createMerchant('Slow provider shop');
      await slow.http.put('/v1/merchant/credentials').set('X-API-Key', slowKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_retry_slow_01', webhook_secret: 'whsec_retry_slow' } }).expect(200);
      const key = `order-${Date.now()}`;
      const first = slow.http.post('/v1/payments').set('X-API-Key', slowKey).set('Idempotency-Key', key).send(visa);
      const firstAnswer = first.then((res) => res);
      await new Promise((r) => setTimeout(r, 300));
      const retries: RetryInfo[] = [];
      const client = createPaymentsClient({ baseUrl: slow.baseUrl, apiKey: slowKey, timeoutMs: 20_000, onRetry: (info) => retries.push(info) });
      const payment = await client.payments.create(visa, { idempotencyKey: key });
      expect(retries).toEqual([expect.objectContaining({ status: 409, delayMs: 1000 })]);
      expect(payment.id).toBe((await firstAnswer).body.data.id);
      expect(await slow.sql('SELECT id FROM payments WHERE idempotency_key = $1', [key])).toHaveLength(1);
    } finally {
      await slow.stop();
    }
  }, 60_000);

  it('a conflict without Retry-After (the key used with another body) is final: not retried', async () => {
    const { client, retries } = sdk();
    const key = `conflict-${Date.now()}`;
    await client.payments.create(visa, { idempotencyKey: key });
    stub.reset();
    const error = await client.payments.create({ ...visa, amount: '21.00' }, { idempotencyKey: key }).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 409, code: 'CONFLICT' });
    expect(retries).toEqual([]);
    expect(stub.seen).toHaveLength(1);
  });

  it('never retries a POST without an Idempotency-Key, nor a PROVIDER_ERROR', async () => {
    stub.reset();
    stub.next(unavailable('0'));
    const { client, retries } = sdk();
    const reconcile = await client.mobilemoney.reconcile({}).catch((e: unknown) => e);
    expect(reconcile).toMatchObject({ status: 503 });
    expect(stub.seen).toHaveLength(1);
    expect(stub.seen[0]!.idempotencyKey).toBeUndefined();

    stub.reset();
    stub.next({ status: 502, body: { success: false, error: { code: 'PROVIDER_ERROR', message: 'cardpay refused the payment', request_id: 'stub-502' } } });
    const refused = await client.payments.create(visa).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 502, code: 'PROVIDER_ERROR', message: 'cardpay refused the payment' });
    expect(stub.seen).toHaveLength(1);
    expect(retries).toEqual([]);
  });

  it('times out each attempt, retries, then throws PaymentsConnectionError', async () => {
    stub.reset();
    stub.next('hang', 'hang');
    const { client, retries } = sdk({ timeoutMs: 200, maxRetries: 1 });
    const error = await client.merchant.get().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsConnectionError);
    expect((error as PaymentsConnectionError).attempts).toBe(2);
    expect((error as Error).message).toContain('timed out');
    expect(retries).toHaveLength(1);
    expect(stub.seen).toHaveLength(2);
  });

  it('a call whose answer never came carries the X-Request-Id its last attempt sent, which the service logs it under', async () => {
    // A lost answer had no id to quote: the SDK sent none, so only the service knew the one it made up.
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    stub.reset();
    stub.next('hang');
    // The call's own timeoutMs: a create waits at least 4 minutes whatever the client's.
    const once = await sdk({ maxRetries: 0 }).client.payments.create(visa, { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(once).toBeInstanceOf(PaymentsConnectionError);
    expect(stub.seen).toHaveLength(1);
    expect(stub.seen[0]!.requestId).toMatch(uuid);
    expect((once as PaymentsConnectionError).requestId).toBe(stub.seen[0]!.requestId);

    // Each attempt its own id (the service's log tells them apart); the error names the last.
    stub.reset();
    stub.next('hang', 'hang');
    const twice = await sdk({ timeoutMs: 200, maxRetries: 1 }).client.merchant.get().catch((e: unknown) => e);
    const [first, second] = stub.seen.map((r) => r.requestId);
    expect(first).toMatch(uuid);
    expect(second).toMatch(uuid);
    expect(second).not.toBe(first);
    expect(twice).toMatchObject({ attempts: 2, requestId: second });

    // An answer that came names the id the service kept: the one the SDK sent, for a result and an API error alike.
    stub.reset();
    const { client } = sdk();
    const merchant = await client.merchant.get();
    expect(responseOf(merchant)?.requestId).toBe(stub.seen[0]!.requestId);
    const missing = await client.payments.get('00000000-0000-4000-8000-000000000000').catch((e: unknown) => e);
    expect(missing).toMatchObject({ status: 404, requestId: stub.seen[1]!.requestId });
    expect(stub.seen[1]!.requestId).toMatch(uuid);

    // A proxy's own answer names no id (its page, no X-Request-Id header): the error quotes the one the attempt sent.
    stub.reset();
    stub.next({ status: 502, body: '<html>Bad Gateway</html>' });
    const proxied = await sdk({ maxRetries: 0 }).client.merchant.get().catch((e: unknown) => e);
    expect(proxied).toBeInstanceOf(PaymentsApiError);
    expect(proxied).toMatchObject({ status: 502, code: 'UNEXPECTED_RESPONSE', requestId: stub.seen[0]!.requestId });
    expect(stub.seen[0]!.requestId).toMatch(uuid);

    // A caller's own X-Request-Id (a raw call's header) is sent as it is, on every attempt.
    stub.reset();
    stub.next(unavailable('0'));
    const raw = await client.raw.merchant.get({ extraHeaders: { 'X-Request-Id': 'shop-7f3c:req-1' } });
    expect(raw.status).toBe(200);
    expect(stub.seen.map((r) => r.requestId)).toEqual(['shop-7f3c:req-1', 'shop-7f3c:req-1']);
    expect(raw.headers.get('x-request-id')).toBe('shop-7f3c:req-1');
  });

  it('a DELETE whose answer was lost and whose retry finds the card gone resolves as deleted', async () => {
    const { client: direct } = sdk();
    const card = await direct.cards.create({ payment_method_id: 'pm_card_visa' });
    stub.reset();
    stub.next('drop');
    const { client, retries } = sdk();
    const result = await client.cards.delete(card.id);
    // The service deleted the card on the first attempt (its 200 was lost); the retry was told 404.
    expect(stub.dropped).toEqual([{ status: 200, body: expect.stringContaining('"deleted":true') }]);
    expect(stub.seen.map((r) => r.method)).toEqual(['DELETE', 'DELETE']);
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ attempt: 2, method: 'DELETE' });
    expect(retries[0]!.status).toBeUndefined(); // no answer: a network error
    expect((retries[0]!.error as Error).message).toBe('fetch failed');
    expect(result).toEqual({ id: card.id, deleted: true });
    expect(responseOf(result)).toMatchObject({ status: 404, alreadyDeleted: true });
    expect((await direct.cards.list()).data.map((c) => c.id)).not.toContain(card.id);

    // The same for credentials (restored after, for the other tests).
    stub.reset();
    stub.next('drop');
    const creds = await client.merchant.deleteCredentials('cardpay');
    expect(creds).toEqual({ provider: 'cardpay', deleted: true });
    expect(responseOf(creds)?.alreadyDeleted).toBe(true);
    expect(stub.dropped.map((d) => d.status)).toEqual([200]);
    expect(await direct.merchant.listCredentials()).toEqual([]);
    await direct.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_retry_0001' } });
  });

  it('a DELETE of an unknown card still throws 404, also after a retry the service refused before doing anything', async () => {
    const { client, retries } = sdk();
    const unknown = '00000000-0000-4000-8000-000000000000';
    stub.reset();
    const first = await client.cards.delete(unknown).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(PaymentsApiError);
    expect(first).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(stub.seen).toHaveLength(1);

    // A 503 (or 429) means the first attempt did nothing: the retry's 404 is the answer.
    stub.reset();
    stub.next(unavailable('0'));
    const afterRefusal = await client.cards.delete(unknown).catch((e: unknown) => e);
    expect(afterRefusal).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(stub.seen).toHaveLength(2);
    expect(retries).toHaveLength(1);

    // A successful delete is reported as it always was.
    const card = await client.cards.create({ payment_method_id: 'pm_card_visa' });
    const done = await client.cards.delete(card.id);
    expect(done).toEqual({ id: card.id, deleted: true });
    expect(responseOf(done)).toMatchObject({ status: 200 });
    expect(responseOf(done)?.alreadyDeleted).toBeUndefined();
  });

  it('a DELETE whose first attempt never connected reports a 404 as not found; one cut after connecting resolves as deleted', async () => {
    const unknown = '11111111-1111-4111-8111-111111111111';
    const notFound = { success: false, error: { code: 'NOT_FOUND', message: 'Card not found', request_id: 'fake-404' } };
    const deleteAfter = async (code: string) => {
      let calls = 0;
      const client = createPaymentsClient({
        baseUrl: 'http://payments.invalid',
        apiKey,
        initialRetryDelayMs: 1,
        fetch: async () => {
          calls += 1;
          // undici's shape: TypeError('fetch failed') with the socket error as its cause.
          if (calls === 1) throw new TypeError('fetch failed', { cause: Object.assign(new Error(`connect ${code}`), { code }) });
          return new Response(JSON.stringify(notFound), { status: 404, headers: { 'content-type': 'application/json' } });
        },
      });
      const outcome = await client.cards.delete(unknown).catch((e: unknown) => e);
      expect(calls).toBe(2);
      return outcome;
    };
    // Refused, or no DNS answer: the request never left, so the retry's 404 is a mistyped id (e.g. during a restart).
    for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']) {
      const outcome = await deleteAfter(code);
      expect(outcome).toBeInstanceOf(PaymentsApiError);
      expect(outcome).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    }
    // Reset once connected: the first attempt may have deleted the card.
    const reset = await deleteAfter('ECONNRESET');
    expect(reset).toEqual({ id: unknown, deleted: true });
    expect(responseOf(reset)).toMatchObject({ status: 404, alreadyDeleted: true });
  });

  it('stops waiting between retries when the caller aborts', async () => {
    stub.reset();
    stub.next(unavailable('20'));
    const controller = new AbortController();
    const client = createPaymentsClient({ baseUrl: stubUrl, apiKey, onRetry: () => controller.abort(new Error('caller gave up')) });
    const started = Date.now();
    const error = await client.merchant.get({ signal: controller.signal }).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(5_000); // not the 20 s Retry-After
    expect(error).toBeInstanceOf(PaymentsAbortError);
    expect(error).toMatchObject({ attempts: 1, idempotencyKey: undefined, cause: new Error('caller gave up') });
    expect(stub.seen).toHaveLength(1);
  });

  it("a create cut short by the caller's own signal rejects with a PaymentsError carrying the Idempotency-Key it sent, so a retry with that key charges once", async () => {
    stub.reset();
    stub.next('hang');
    const { client, retries } = sdk();
    const error = await client.payments.create(visa, { signal: AbortSignal.timeout(200) }).catch((e: unknown) => e);
    // Was the signal's bare DOMException: no key, so a retry made a new one and could charge twice.
    expect(error).toBeInstanceOf(PaymentsError);
    expect(error).toBeInstanceOf(PaymentsConnectionError);
    expect(error).toBeInstanceOf(PaymentsAbortError);
    expect(stub.seen).toHaveLength(1);
    expect(stub.seen[0]!.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    const aborted = error as PaymentsAbortError;
    expect(aborted.idempotencyKey).toBe(stub.seen[0]!.idempotencyKey);
    // And the X-Request-Id of the request it cut short, which the service logs it under.
    expect(aborted.requestId).toBe(stub.seen[0]!.requestId);
    expect(aborted.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(aborted).toMatchObject({ name: 'PaymentsAbortError', attempts: 1, message: expect.stringMatching(/^POST http:\/\/\S+\/v1\/payments aborted by the caller's signal \(1 attempt\)$/) });
    expect((aborted.cause as Error).name).toBe('TimeoutError');
    expect(retries).toEqual([]);

    // The merchant's retry with the key it was handed: one payment under that key.
    const payment = await client.payments.create(visa, { idempotencyKey: aborted.idempotencyKey });
    expect(payment.idempotency_key).toBe(aborted.idempotencyKey);
    expect(await t.sql('SELECT id FROM payments WHERE idempotency_key = $1', [aborted.idempotencyKey])).toHaveLength(1);
  });

  it('a signal aborted before the call rejects the same way, with nothing sent (attempts 0) and the key it would have sent', async () => {
    stub.reset();
    const { client } = sdk();
    const controller = new AbortController();
    controller.abort();
    const error = await client.refunds.create({ payment_id: '00000000-0000-4000-8000-000000000000' }, { signal: controller.signal, idempotencyKey: 'refund-early-abort' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsAbortError);
    expect(error).toMatchObject({ attempts: 0, idempotencyKey: 'refund-early-abort', requestId: null, message: expect.stringMatching(/^POST http:\/\/\S+\/v1\/refunds aborted by the caller's signal before anything was sent$/) });
    expect(((error as Error).cause as Error).name).toBe('AbortError');
    expect(stub.seen).toEqual([]);
  });
});

describe('answers the service never gives: a redirect, a 2xx without the success envelope', () => {
  const html = (status: number, headers: Record<string, string> = {}): Scripted => ({
    status,
    headers: { 'content-type': 'text/html; charset=utf-8', ...headers },
    body: '<!doctype html><html><body>Sign in to continue</body></html>',
  });

  it('a 200 HTML page (an SSO proxy, a wrong baseUrl) rejects with UNEXPECTED_RESPONSE, maybe done for a write', async () => {
    const { client, retries } = sdk();
    const writes: [string, () => Promise<unknown>][] = [
      ['PUT', () => client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_retry_0001' } })],
      ['DELETE', () => client.cards.delete('00000000-0000-4000-8000-000000000000')],
      ['PUT', () => client.merchant.setWebhook('https://shop.example.com/hook')],
      ['POST', () => client.payments.create(visa)],
      ['POST', () => client.refunds.create({ payment_id: '00000000-0000-4000-8000-000000000000' })],
    ];
    for (const [method, call] of writes) {
      stub.reset();
      stub.next(html(200));
      // Resolved with undefined before: the merchant took the card as deleted, the credentials as stored.
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PaymentsApiError);
      expect(error).toMatchObject({ status: 200, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true, body: expect.stringContaining('Sign in') });
      expect((error as Error).message).toContain('text/html');
      expect(stub.seen.map((r) => r.method)).toEqual([method]);
    }
    // A read changed nothing; JSON that is not the envelope is refused the same way.
    for (const step of [html(200), { status: 200, body: { id: 'm_1' } }, { status: 200, body: { success: true } }] as Scripted[]) {
      stub.reset();
      stub.next(step);
      const error = await client.merchant.get().catch((e: unknown) => e);
      expect(error).toMatchObject({ status: 200, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: false });
    }
    stub.reset();
    stub.next({ status: 200, body: { data: [] } });
    expect(await client.payments.list().catch((e: unknown) => e)).toMatchObject({ code: 'UNEXPECTED_RESPONSE' });
    expect(retries).toEqual([]);
  });

  it('a 302 on payments.create is not followed: no GET of the list, the create rejects and was not done', async () => {
    stub.reset();
    stub.next({ status: 302, headers: { location: '/v1/payments' }, body: '' });
    const { client, retries } = sdk();
    // Followed before: the POST came back as GET /v1/payments and create resolved with the list's array.
    const error = await client.payments.create(visa).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PaymentsApiError);
    // The service never redirects: whatever answered 302 did not forward the request, so nothing was done.
    expect(error).toMatchObject({ status: 302, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: false, idempotencyKey: stub.seen[0]!.idempotencyKey });
    expect((error as Error).message).toMatch(/HTTP 302 redirect to \/v1\/payments/);
    expect(stub.seen.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1/payments']);
    expect(retries).toEqual([]);
  });

  it('an http:// baseUrl redirected to https:// fails every call, writes included, as not done: use the https address', async () => {
    const { client, retries } = sdk();
    const writes: (() => Promise<unknown>)[] = [
      () => client.payments.create(visa),
      () => client.refunds.create({ payment_id: '00000000-0000-4000-8000-000000000000' }),
      () => client.merchant.setWebhook('https://shop.example.com/hook'),
      () => client.cards.delete('00000000-0000-4000-8000-000000000000'),
    ];
    for (const call of writes) {
      stub.reset();
      stub.next({ status: 301, headers: { location: 'https://payments.example.com/v1/payments' }, body: '' });
      const error = await call().catch((e: unknown) => e);
      expect(error).toMatchObject({ status: 301, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: false, earlierAttemptMayHaveSucceeded: false });
      expect((error as Error).message).toContain('use the https:// address');
      expect(stub.seen).toHaveLength(1);
    }
    expect(retries).toEqual([]);
  });

  it("a browser's opaque redirect (status 0) on a write is not done either; a 2xx without the envelope still may be", async () => {
    // What fetch with redirect: 'manual' gives in a browser: type 'opaqueredirect', status 0, no headers.
    class OpaqueRedirect extends Response {
      override get type(): ResponseType {
        return 'opaqueredirect';
      }
      override get status() {
        return 0;
      }
    }
    const answers: Response[] = [];
    const client = createPaymentsClient({ baseUrl: 'http://payments.test', apiKey, maxRetries: 0, fetch: async () => answers.shift()! });
    answers.push(new OpaqueRedirect(null, { status: 200 }));
    const redirected = await client.payments.create(visa).catch((e: unknown) => e);
    expect(redirected).toMatchObject({ status: 0, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: false });
    expect((redirected as Error).message).toContain('a redirect, which the SDK does not follow');
    answers.push(new Response('<html>Sign in</html>', { status: 200, headers: { 'content-type': 'text/html' } }));
    expect(await client.payments.create(visa).catch((e: unknown) => e)).toMatchObject({ status: 200, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true });
  });

  it('a 307 to another host is not followed: X-API-Key and Idempotency-Key never reach it', async () => {
    const elsewhere: http.IncomingHttpHeaders[] = [];
    const other = http.createServer((req, res) => {
      elsewhere.push(req.headers);
      req.resume();
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ success: true, data: { id: 'p_elsewhere' } }));
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
      const { client } = sdk();
      stub.reset();
      stub.next({ status: 307, headers: { location: `${otherUrl}/v1/payments` }, body: '' });
      const created = await client.payments.create(visa).catch((e: unknown) => e);
      expect(created).toMatchObject({ status: 307, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: false });
      stub.reset();
      stub.next({ status: 307, headers: { location: `${otherUrl}/v1/merchant` }, body: '' });
      const read = await client.merchant.get().catch((e: unknown) => e);
      expect(read).toMatchObject({ status: 307, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: false });
      // fetch's redirect kept X-API-Key (only Authorization is dropped across origins) and the key.
      expect(elsewhere.map((h) => h['x-api-key'])).toEqual([]);
      expect(elsewhere).toEqual([]);
    } finally {
      other.closeAllConnections();
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  });
});

describe("the service's error envelope is read one way: success false, error.code and error.message", () => {
  const card = '00000000-0000-4000-8000-000000000000';

  it("a 503 is the service's own refusal (not done) only in its whole envelope; otherwise maybe done, and never named with the service's code", async () => {
    const { client } = sdk({ maxRetries: 0 });
    const cases: [unknown, { code: string; mayHaveSucceeded: boolean }][] = [
      [{ success: false, error: { code: 'INTERNAL_ERROR', message: 'Temporarily unavailable', request_id: 'r1' } }, { code: 'INTERNAL_ERROR', mayHaveSucceeded: false }],
      // No message: the retry logic took it for the service's 503 (not done) while the error called it not the envelope.
      [{ success: false, error: { code: 'INTERNAL_ERROR' } }, { code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true }],
      // No success: false (a proxy's JSON): the error carried the service's code while the retry logic called it a proxy's.
      [{ error: { code: 'INTERNAL_ERROR', message: 'upstream reset' } }, { code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true }],
    ];
    for (const [body, expected] of cases) {
      stub.reset();
      stub.next({ status: 503, body });
      expect({ body, error: await client.payments.create(visa).catch((e: unknown) => e) }).toMatchObject({ body, error: { status: 503, ...expected } });
    }
  });

  it("a 502 that only looks like PROVIDER_ERROR (no success: false) is a proxy's: retried, and a write's is maybe done", async () => {
    stub.reset();
    const lookalike: Scripted = { status: 502, body: { error: { code: 'PROVIDER_ERROR', message: 'bad gateway' } } };
    stub.next(lookalike);
    const { client, retries } = sdk({ maxRetries: 1 });
    await expect(client.merchant.get()).resolves.toMatchObject({ name: 'Retry Shop' });
    expect(retries.map((r) => r.status)).toEqual([502]);
    stub.reset();
    stub.next(lookalike);
    const error = await sdk({ maxRetries: 0 }).client.payments.create(visa).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 502, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true });
  });

  it("a DELETE's retry resolves as already deleted only on the service's own 404 NOT_FOUND envelope", async () => {
    const lost: Scripted = { status: 500, body: { success: false, error: { code: 'INTERNAL_ERROR', message: 'lost', request_id: 'r500' } } };
    const { client } = sdk({ maxRetries: 1 });
    stub.reset();
    stub.next(lost, { status: 404, body: { success: false, error: { code: 'NOT_FOUND', message: 'Card not found', request_id: 'r404' } } });
    await expect(client.cards.delete(card)).resolves.toEqual({ id: card, deleted: true });
    stub.reset();
    stub.next(lost, { status: 404, body: { error: { code: 'NOT_FOUND' } } });
    expect(await client.cards.delete(card).catch((e: unknown) => e)).toMatchObject({ status: 404, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true });
  });
});

describe('without AbortSignal.any (Node before 20.3; the package supports 18.18)', () => {
  const any = AbortSignal.any;
  beforeAll(() => {
    delete (AbortSignal as { any?: unknown }).any;
  });
  afterAll(() => {
    AbortSignal.any = any;
  });

  it("a caller's signal still cancels the call, and each attempt still times out", async () => {
    stub.reset();
    stub.next(unavailable('20'));
    const controller = new AbortController();
    const aborting = createPaymentsClient({ baseUrl: stubUrl, apiKey, onRetry: () => controller.abort(new Error('caller gave up')) });
    const aborted = await aborting.merchant.get({ signal: controller.signal }).catch((e: unknown) => e);
    expect(aborted).toBeInstanceOf(PaymentsAbortError);
    expect(aborted).toMatchObject({ attempts: 1, cause: new Error('caller gave up') });

    stub.reset();
    stub.next('hang');
    const { client } = sdk({ timeoutMs: 200, maxRetries: 0 });
    const timedOut = await client.merchant.get({ signal: new AbortController().signal }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(PaymentsConnectionError);
    expect((timedOut as Error).message).toContain('timed out');
  });
});

describe('client options', () => {
  it('a bad timeoutMs, maxRetries, retry delay or baseUrl is a TypeError up front, for the client and per call, and nothing is sent', async () => {
    let calls = 0;
    const fakeFetch: typeof fetch = async () => {
      calls += 1;
      return new Response(JSON.stringify({ success: true, data: { id: 'm_1' } }), { status: 200, headers: { 'content-type': 'application/json' } });
    };
    const base = { baseUrl: 'http://payments.test', apiKey: 'pk_test', fetch: fakeFetch, initialRetryDelayMs: 1 };
    // Used to be a PaymentsConnectionError after every retry (AbortSignal.timeout refused the value each attempt).
    for (const timeoutMs of [1.5, 0, -1, Infinity, NaN, 2 ** 31]) {
      expect(() => createPaymentsClient({ ...base, timeoutMs })).toThrow(TypeError);
    }
    for (const maxRetries of [-1, 1.5, Infinity]) {
      expect(() => createPaymentsClient({ ...base, maxRetries })).toThrow(TypeError);
    }
    // A NaN or negative delay made every backoff 0 ms (a retry storm) or setTimeout's 1 ms.
    for (const delay of [-1, 1.5, NaN, Infinity, 2 ** 31, '500' as unknown as number]) {
      expect(() => createPaymentsClient({ ...base, initialRetryDelayMs: delay })).toThrow(TypeError);
      expect(() => createPaymentsClient({ ...base, maxRetryDelayMs: delay })).toThrow(TypeError);
    }
    for (const baseUrl of ['localhost:3000', 'payments.test', 'ftp://payments.test', '']) {
      expect(() => createPaymentsClient({ ...base, baseUrl })).toThrow(TypeError);
    }

    const client = createPaymentsClient({ ...base, timeoutMs: 2 ** 31 - 1 });
    await expect(client.merchant.get({ timeoutMs: 1500.5 })).rejects.toThrow(TypeError);
    await expect(client.merchant.get({ maxRetries: -1 })).rejects.toThrow(TypeError);
    expect(calls).toBe(0);
    // The limits themselves are fine.
    expect(await client.merchant.get({ timeoutMs: 1, maxRetries: 0 })).toEqual({ id: 'm_1' });
    expect(calls).toBe(1);
  });
});

describe('retry helpers', () => {
  it('parses Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-11-22T10:00:00Z');
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter('0.5', now)).toBe(500);
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:00:07 GMT', now)).toBe(7000);
    expect(parseRetryAfter('Sun, 22 Nov 2026 09:59:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });

  it('backs off exponentially with jitter, capped', () => {
    expect([0, 1, 2, 3].map((n) => backoffDelay(n, 500, 3000, () => 0))).toEqual([250, 500, 1000, 1500]);
    expect([0, 1, 2, 3].map((n) => backoffDelay(n, 500, 3000, () => 1))).toEqual([500, 1000, 2000, 3000]);
  });
});
