import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPaymentsClient, PaymentsApiError, PaymentsConnectionError, responseOf, type RetryInfo } from '../../client/index.js';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * The SDK's transport against a scripted fetch (its own injection point): what a merchant is told when
 * an attempt may have been carried out, and what the SDK refuses to send at all.
 */
type Step = { status: number; headers?: Record<string, string>; body?: unknown } | { fail: string } | 'hang';

const envelope = (code: string, message: string) => ({ success: false, error: { code, message, request_id: `fake-${code}` } });
const stillProcessing: Step = { status: 409, headers: { 'retry-after': '0' }, body: envelope('CONFLICT', 'A request with this Idempotency-Key is still being processed; retry shortly') };
const storeRunning: Step = {
  status: 409,
  headers: { 'retry-after': '0' },
  body: envelope('CONFLICT', "another store or deletion of this merchant's cardpay credentials is still running; retry once it has finished"),
};
/** undici's shape: TypeError('fetch failed') with the socket error, and its code, as the cause. */
const failure = (code: string) => new TypeError('fetch failed', { cause: Object.assign(new Error(`socket: ${code}`), { code }) });

function scripted(...steps: Step[]) {
  const sent: { method: string; url: string; headers: Headers }[] = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const request = { method: init?.method ?? 'GET', url: String(input), headers: new Headers() };
    sent.push(request);
    // As fetch does: a header value that is no ByteString throws "Cannot convert argument to a ByteString".
    request.headers = new Headers(init?.headers);
    const step = steps.shift() ?? { status: 500, body: envelope('INTERNAL_ERROR', 'unscripted request') };
    if (step === 'hang') {
      return new Promise<Response>((_, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal!.reason), { once: true }));
    }
    if ('fail' in step) throw failure(step.fail);
    return new Response(JSON.stringify(step.body ?? {}), { status: step.status, headers: { 'content-type': 'application/json', ...step.headers } });
  };
  const retries: RetryInfo[] = [];
  const client = createPaymentsClient({ baseUrl: 'http://payments.test', apiKey: 'pk_test_fake', fetch, initialRetryDelayMs: 1, onRetry: (r) => retries.push(r) });
  return { client, sent, retries };
}

const visa = { provider: 'cardpay', amount: '20.00', currency: 'USD', payment_method: 'pm_card_visa' } as const;
const caught = (promise: Promise<unknown>) => promise.then(
  () => { throw new Error('expected the call to fail'); },
  (e: unknown) => e,
);

describe('a call that may have happened is never reported as one that did not', () => {
  it('a create whose retries end on "still being processed" throws an inProgress error carrying its key, not a final CONFLICT', async () => {
    // The api process died mid-create: attempt 1 lost its connection; the server's lease then holds the key.
    const { client, sent } = scripted({ fail: 'ECONNRESET' }, stillProcessing, stillProcessing);
    const error = await caught(client.payments.create(visa, { idempotencyKey: 'order-1042' }));
    expect(sent).toHaveLength(3);
    expect(error).toBeInstanceOf(PaymentsApiError);
    expect(error).toMatchObject({ status: 409, code: 'CONFLICT', inProgress: true, mayHaveSucceeded: true, earlierAttemptMayHaveSucceeded: true, idempotencyKey: 'order-1042' });

    // The same answer on the first attempt (another request with the key is running): in progress too.
    const first = scripted(stillProcessing);
    const firstError = await caught(first.client.payments.create(visa, { idempotencyKey: 'order-1043', maxRetries: 0 }));
    expect(firstError).toMatchObject({ inProgress: true, mayHaveSucceeded: true, earlierAttemptMayHaveSucceeded: false, idempotencyKey: 'order-1043' });

    // Every other conflict is final and says this call did nothing.
    const reused = scripted({ status: 409, body: envelope('CONFLICT', 'This Idempotency-Key was already used with a different request body') });
    const final = await caught(reused.client.payments.create(visa, { idempotencyKey: 'order-1042' }));
    expect(reused.sent).toHaveLength(1);
    expect(final).toMatchObject({ status: 409, code: 'CONFLICT', inProgress: false, mayHaveSucceeded: false, earlierAttemptMayHaveSucceeded: false });
  });

  it('connection errors say whether any attempt may have been carried out', async () => {
    const refused = scripted({ fail: 'ECONNREFUSED' }, { fail: 'ENOTFOUND' }, { fail: 'ECONNREFUSED' });
    const neverSent = await caught(refused.client.payments.create(visa));
    expect(neverSent).toBeInstanceOf(PaymentsConnectionError);
    expect(neverSent).toMatchObject({ attempts: 3, mayHaveSucceeded: false });

    const reset = scripted({ fail: 'ECONNREFUSED' }, { fail: 'ECONNRESET' }, { status: 503, body: envelope('SERVICE_UNAVAILABLE', 'busy') });
    const lost = await caught(reset.client.payments.create(visa));
    // The last answer is a 503 (nothing done by it), but attempt 2 reached the service and lost its answer.
    expect(lost).toMatchObject({ status: 503, mayHaveSucceeded: true, earlierAttemptMayHaveSucceeded: true });
  });

  it('setWebhook is not repeated after an attempt that may have registered a secret, and says the webhook may have been re-registered', async () => {
    const reRegistered = /the webhook may have been re-registered .* call setWebhook again/;
    for (const lostAttempt of [{ fail: 'ECONNRESET' }, 'hang', { status: 500, body: envelope('INTERNAL_ERROR', 'Internal server error') }, { status: 504, body: 'Gateway Timeout' }] as Step[]) {
      const { client, sent, retries } = scripted(lostAttempt, { status: 200, body: { success: true, data: { webhook_url: 'https://shop.test/hook', webhook_secret: 'whsec_B' } } });
      const error = await caught(client.merchant.setWebhook('https://shop.test/hook', { timeoutMs: 50 }));
      expect(sent).toHaveLength(1);
      expect(retries).toEqual([]);
      expect(error).toMatchObject({ mayHaveSucceeded: true, message: expect.stringMatching(reRegistered) });
    }
    // The same through the raw ts-rest client.
    const viaRaw = scripted({ fail: 'ECONNRESET' });
    await expect(viaRaw.client.raw.merchant.setWebhook({ body: { webhook_url: 'https://shop.test/hook' } })).rejects.toThrow(reRegistered);
    expect(viaRaw.sent).toHaveLength(1);
    // Attempts that provably did nothing are retried as before.
    const { client, sent } = scripted(
      { fail: 'ECONNREFUSED' },
      { status: 503, headers: { 'retry-after': '0' }, body: envelope('SERVICE_UNAVAILABLE', 'busy') },
      { status: 200, body: { success: true, data: { webhook_url: 'https://shop.test/hook', webhook_secret: 'whsec_A' } } },
    );
    expect(await client.merchant.setWebhook('https://shop.test/hook')).toEqual({ webhook_url: 'https://shop.test/hook', webhook_secret: 'whsec_A' });
    expect(sent.map((r) => r.method)).toEqual(['PUT', 'PUT', 'PUT']);
    // Refused every time: nothing registered, and the message says no more than that.
    const refused = scripted({ status: 429, headers: { 'retry-after': '0' }, body: envelope('RATE_LIMITED', 'Slow down') }, ...Array(2).fill({ fail: 'ECONNREFUSED' }));
    const refusedError = await caught(refused.client.merchant.setWebhook('https://shop.test/hook'));
    expect(refused.sent).toHaveLength(3);
    expect(refusedError).toMatchObject({ mayHaveSucceeded: false });
    expect((refusedError as Error).message).not.toMatch(reRegistered);
  });

  it("storeCredentials whose retry meets its own first attempt's lease throws an inProgress error, not a final CONFLICT", async () => {
    const { client, sent } = scripted({ fail: 'ECONNRESET' }, storeRunning, storeRunning);
    const error = await caught(client.merchant.storeCredentials({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_0001' } }));
    expect(sent.map((r) => r.method)).toEqual(['PUT', 'PUT', 'PUT']);
    expect(error).toMatchObject({ status: 409, code: 'CONFLICT', inProgress: true, mayHaveSucceeded: true, earlierAttemptMayHaveSucceeded: true });
  });

  it('retries any 5xx but 501, 505 and PROVIDER_ERROR, and counts them as maybe done', async () => {
    const cdn = scripted({ status: 520, body: 'Web server returned an unknown error' }, { status: 522, body: 'Connection timed out' }, { status: 524, body: 'A timeout occurred' });
    const error = await caught(cdn.client.payments.create(visa));
    expect(cdn.sent).toHaveLength(3);
    expect(new Set(cdn.sent.map((r) => r.headers.get('idempotency-key'))).size).toBe(1);
    expect(error).toMatchObject({ status: 524, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true, earlierAttemptMayHaveSucceeded: true });

    for (const status of [501, 505]) {
      const final = scripted({ status, body: 'no' });
      expect(await caught(final.client.payments.create(visa))).toMatchObject({ status, mayHaveSucceeded: false });
      expect(final.sent).toHaveLength(1);
    }

    // A DELETE after a CDN's 522 may have been done: the retry's 404 is the delete done.
    const del = scripted({ status: 522, body: 'Connection timed out' }, { status: 404, body: envelope('NOT_FOUND', 'Card not found') });
    const gone = await del.client.cards.delete('card_1');
    expect(gone).toEqual({ id: 'card_1', deleted: true });
    expect(responseOf(gone)).toMatchObject({ status: 404, alreadyDeleted: true });
  });
});

/**
 * A proxy in front of the real service that forwards every request, drops the service's answer and
 * answers 503 text/html with Retry-After: 1 itself, as Heroku does for H12/H13 or Envoy for a reset
 * before headers: the request was carried out, the merchant is told "Service Unavailable".
 */
class StubProxy extends ForwardingStub {
  /** The service's answers the proxy kept from the client. */
  readonly dropped: { method: string; path: string; status: number }[] = [];

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    const answer = await forward();
    this.dropped.push({ method: req.method, path: req.url, status: answer.status });
    return {
      status: 503,
      headers: { 'content-type': 'text/html; charset=utf-8', 'retry-after': '1' },
      body: '<!DOCTYPE html><html><body><h1>Application Error</h1><p>H12 Request timeout</p></body></html>',
    };
  }
}

describe("a 503 without the service's error envelope (a proxy's, after forwarding the request)", () => {
  let service: TestService;
  let proxy: StubProxy;
  let proxyUrl: string;
  let apiKey: string;

  beforeAll(async () => {
    service = await startTestService();
    proxy = new StubProxy();
    proxyUrl = await proxy.start();
    proxy.target = service.baseUrl;
    ({ apiKey } = await service.createMerchant('Proxy 503 Shop'));
    await service.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_proxy_0001' } }).expect(200);
  });
  afterAll(async () => {
    await proxy.stop();
    await service.stop();
  });

  it('leaves a create mayHaveSucceeded: the service created the payment behind it', async () => {
    const client = createPaymentsClient({ baseUrl: proxyUrl, apiKey });
    const error = await caught(client.payments.create(visa, { maxRetries: 0 }));
    expect(proxy.dropped).toEqual([{ method: 'POST', path: '/v1/payments', status: 201 }]);
    expect(error).toBeInstanceOf(PaymentsApiError);
    const key = (error as PaymentsApiError).idempotencyKey;
    // Was mayHaveSucceeded: false ("nothing happened"): a merchant would void the order, or retry with a new key and charge twice.
    expect(error).toMatchObject({ status: 503, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true });
    expect(await service.sql('SELECT status FROM payments WHERE idempotency_key = $1', [key])).toEqual([{ status: 'completed' }]);
    // Retried with its key, straight to the service: the same payment, not a second charge.
    const direct = createPaymentsClient({ baseUrl: service.baseUrl, apiKey });
    const payment = await direct.payments.create(visa, { idempotencyKey: key });
    expect(responseOf(payment)?.replayed).toBe(true);
    expect(await service.sql('SELECT id FROM payments WHERE idempotency_key = $1', [key])).toEqual([{ id: payment.id }]);
  });
});

describe("the service's own 503 and a proxy's, by a scripted fetch", () => {
  const proxyPage: Step = { status: 503, headers: { 'content-type': 'text/html', 'retry-after': '0' }, body: 'Service Unavailable' };
  const refused: Step = { status: 503, headers: { 'retry-after': '0' }, body: envelope('SERVICE_UNAVAILABLE', 'busy') };

  it('only the enveloped 503 says nothing was done', async () => {
    const own = scripted(refused);
    expect(await caught(own.client.payments.create(visa, { maxRetries: 0 }))).toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE', mayHaveSucceeded: false });
    const html = scripted(proxyPage);
    expect(await caught(html.client.payments.create(visa, { maxRetries: 0 }))).toMatchObject({ status: 503, code: 'UNEXPECTED_RESPONSE', mayHaveSucceeded: true });
    // Retried with the same key, and the earlier attempt stays maybe done.
    const retried = scripted(proxyPage, refused, refused);
    const error = await caught(retried.client.payments.create(visa));
    expect(retried.sent).toHaveLength(3);
    expect(new Set(retried.sent.map((r) => r.headers.get('idempotency-key'))).size).toBe(1);
    expect(error).toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE', mayHaveSucceeded: true, earlierAttemptMayHaveSucceeded: true });
  });

  it('setWebhook is not repeated after a proxy 503, and a DELETE retried after one reads a 404 as done', async () => {
    const webhook = scripted(proxyPage, { status: 200, body: { success: true, data: { webhook_url: 'https://shop.test/hook', webhook_secret: 'whsec_B' } } });
    const error = await caught(webhook.client.merchant.setWebhook('https://shop.test/hook'));
    expect(webhook.sent).toHaveLength(1);
    expect(error).toMatchObject({ status: 503, mayHaveSucceeded: true, message: expect.stringMatching(/the webhook may have been re-registered/) });

    const del = scripted(proxyPage, { status: 404, body: envelope('NOT_FOUND', 'Card not found') });
    const gone = await del.client.cards.delete('card_1');
    expect(gone).toEqual({ id: 'card_1', deleted: true });
    expect(responseOf(gone)).toMatchObject({ status: 404, alreadyDeleted: true });
  });
});

describe('a capture the provider did not answer', () => {
  const paymentId = '00000000-0000-4000-8000-000000000000';
  const notAnswered = 'walletpay capture failed: walletpay did not answer within 10000 ms';

  it('a 502 marked Payments-Outcome: unknown may have succeeded, and says to retry with its key or read the payment', async () => {
    const { client, sent } = scripted({ status: 502, headers: { 'payments-outcome': 'unknown' }, body: envelope('PROVIDER_ERROR', notAnswered) });
    const error = await caught(client.payments.capture(paymentId));
    expect(error).toBeInstanceOf(PaymentsApiError);
    const key = sent[0]!.headers.get('idempotency-key');
    expect(error).toMatchObject({ status: 502, code: 'PROVIDER_ERROR', mayHaveSucceeded: true, earlierAttemptMayHaveSucceeded: false, idempotencyKey: key });
    expect((error as PaymentsApiError).message).toBe(
      `${notAnswered}; the provider did not say whether it was done, so it may have been carried out: retry with the same idempotencyKey (${key}) or read its current state, and do not treat it as refused`,
    );
    expect(sent).toHaveLength(1);
  });

  it('a 502 the provider refused (no Payments-Outcome) changed nothing', async () => {
    const refused = 'walletpay capture failed: walletpay refused the credentials';
    const { client, sent } = scripted({ status: 502, body: envelope('PROVIDER_ERROR', refused) });
    const error = await caught(client.payments.capture(paymentId));
    expect(error).toMatchObject({ status: 502, code: 'PROVIDER_ERROR', mayHaveSucceeded: false, message: refused });
    expect(sent).toHaveLength(1);
  });
});

describe('a create the provider charged whose answer the service could not record', () => {
  const unrecorded: Step = {
    status: 500,
    headers: { 'payments-outcome': 'unknown' },
    body: envelope('INTERNAL_ERROR', 'The provider may have acted on this request, but the service could not record its outcome: do not treat it as refused, nor send it again without the same Idempotency-Key; retry with the same key if it had one, otherwise read the resource (GET) before doing anything'),
  };
  const paid = { id: '00000000-0000-4000-8000-000000000001', status: 'completed' };

  it('is retried with the same key, whose answer is the payment; once retries run out it may have succeeded, and says why', async () => {
    const resumed = scripted(unrecorded, { status: 200, headers: { 'idempotent-replayed': 'true' }, body: { success: true, data: paid } });
    const payment = await resumed.client.payments.create(visa, { idempotencyKey: 'order-2001' });
    expect(payment).toMatchObject(paid);
    expect(resumed.sent.map((r) => r.headers.get('idempotency-key'))).toEqual(['order-2001', 'order-2001']);
    expect(responseOf(payment)).toMatchObject({ status: 200, replayed: true, idempotencyKey: 'order-2001' });

    const { client, sent } = scripted(unrecorded, unrecorded);
    const error = await caught(client.payments.create(visa, { idempotencyKey: 'order-2002', maxRetries: 1 }));
    expect(sent).toHaveLength(2);
    expect(error).toMatchObject({ status: 500, code: 'INTERNAL_ERROR', mayHaveSucceeded: true, idempotencyKey: 'order-2002' });
    expect((error as PaymentsApiError).message).toContain(
      '; the service could not record whether the provider did it, so it may have been carried out: retry with the same idempotencyKey (order-2002) or read its current state, and do not treat it as refused',
    );
  });
});

describe('what fetch cannot send is refused before sending', () => {
  it('an Idempotency-Key outside 1–255 printable ASCII is a TypeError and nothing is sent', async () => {
    const { client, sent } = scripted();
    for (const idempotencyKey of ['заказ-1042', 'order\n1042', 'x'.repeat(256), '']) {
      await expect(client.payments.create(visa, { idempotencyKey })).rejects.toThrow(TypeError);
      await expect(client.refunds.create({ payment_id: '00000000-0000-4000-8000-000000000000' }, { idempotencyKey })).rejects.toThrow(TypeError);
      await expect(client.raw.payments.create({ body: visa, headers: { 'idempotency-key': idempotencyKey } })).rejects.toThrow(TypeError);
    }
    expect(sent).toEqual([]);
    // The limits themselves are sent.
    const edge = scripted({ status: 201, body: { success: true, data: { id: 'p_1' } } });
    await edge.client.payments.create(visa, { idempotencyKey: `!~${'k'.repeat(253)}` });
    expect(edge.sent[0]!.headers.get('idempotency-key')).toHaveLength(255);
  });

  it('an Idempotency-Key with a leading or trailing space (fetch strips it) is a TypeError and nothing is sent; inner spaces are sent as they are', async () => {
    // fetch trims a header value: ' ' went out empty (the service's 422) and 'acme:order-1 ' was stored as
    // 'acme:order-1' while $response.idempotencyKey and err.idempotencyKey named the untrimmed key.
    expect(new Headers({ 'idempotency-key': 'acme:order-1 ' }).get('idempotency-key')).toBe('acme:order-1');
    const { client, sent } = scripted();
    for (const idempotencyKey of [' ', '   ', 'acme:order-1 ', ' acme:order-1']) {
      await expect(client.payments.create(visa, { idempotencyKey })).rejects.toThrow(/must not start or end with a space/);
      await expect(client.refunds.create({ payment_id: '00000000-0000-4000-8000-000000000000' }, { idempotencyKey })).rejects.toThrow(TypeError);
      await expect(client.raw.payments.create({ body: visa, headers: { 'idempotency-key': idempotencyKey } })).rejects.toThrow(TypeError);
    }
    expect(sent).toEqual([]);
    const inner = scripted({ status: 201, body: { success: true, data: { id: 'p_1' } } });
    const payment = await inner.client.payments.create(visa, { idempotencyKey: 'acme order 1' });
    expect(inner.sent[0]!.headers.get('idempotency-key')).toBe('acme order 1');
    expect(responseOf(payment)?.idempotencyKey).toBe('acme order 1');
  });

  it('webhooks.recover rejects a missing window or an invalid Date with a TypeError, never throwing synchronously, and sends nothing', async () => {
    // It threw (RangeError "Invalid time value", or reading `since` of undefined) before returning a promise,
    // escaping a `.catch` on the call, unlike every other method.
    const { client, sent } = scripted();
    const invalid = await client.webhooks.recover({ since: new Date('not a date') }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(TypeError);
    expect((invalid as Error).message).toContain('since must be a valid Date');
    const badUntil = await client.webhooks.recover({ since: new Date(), until: new Date(NaN) }).catch((e: unknown) => e);
    expect(badUntil).toBeInstanceOf(TypeError);
    const missing = await client.webhooks.recover(undefined as never).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(TypeError);
    expect(sent).toEqual([]);
  });

  it('a baseUrl with credentials (user:password@) is a TypeError at createPaymentsClient that does not show the password, and no SDK message quotes a URL\'s credentials', async () => {
    // It was accepted; Node's fetch then refused every request before connecting ("Request cannot be constructed
    // from a URL that includes credentials: https://user:s3cret@…"), an error without a code, so the SDK counted
    // it as possibly sent: retried twice, then mayHaveSucceeded: true for a create never sent, the password in
    // the message and in onRetry's url. Default fetch: nothing here reaches the network.
    const outcome = async (baseUrl: string) => {
      const urls: string[] = [];
      let client;
      try {
        client = createPaymentsClient({ baseUrl, apiKey: 'pk_test_fake', initialRetryDelayMs: 1, onRetry: (r) => urls.push(r.url) });
      } catch (e) {
        return { constructed: false, name: (e as Error).constructor.name, message: (e as Error).message };
      }
      const error = (await caught(client.payments.create(visa))) as PaymentsConnectionError;
      return { constructed: true, message: error.message, attempts: error.attempts, mayHaveSucceeded: error.mayHaveSucceeded, urls };
    };
    for (const baseUrl of ['https://user:s3cret@payments.internal', 'http://:s3cret@payments.internal:3000/', 'https://s3cret@payments.internal', 'ftp://user:s3cret@payments.internal']) {
      const result = await outcome(baseUrl);
      expect(result).toMatchObject({ constructed: false, name: 'TypeError' });
      expect(result.message).not.toContain('s3cret');
      expect(result.message).toContain('baseUrl');
    }
    // A fetch's own error that quotes a URL with credentials (a custom fetch's proxy, say) is quoted without them.
    const quoting = (async () => {
      throw new TypeError('Request cannot be constructed from a URL that includes credentials: https://user:s3cret@proxy.internal/');
    }) as typeof fetch;
    const quoted = await caught(createPaymentsClient({ baseUrl: 'https://payments.internal', apiKey: 'pk_test_fake', fetch: quoting, maxRetries: 0 }).payments.get('p_1'));
    expect(quoted).toBeInstanceOf(PaymentsConnectionError);
    expect((quoted as Error).message).toContain('https://***@proxy.internal/');
  });

  it('an apiKey fetch cannot send is a TypeError at createPaymentsClient', () => {
    const base = { baseUrl: 'http://payments.test', fetch: (async () => new Response('{}')) as typeof fetch };
    for (const apiKey of ['pk_тест', 'pk test', '', ' \n', undefined as unknown as string, 42 as unknown as string]) {
      expect(() => createPaymentsClient({ ...base, apiKey })).toThrow(TypeError);
    }
    expect(() => createPaymentsClient({ ...base, apiKey: 'pk_test_abc-123\n' })).not.toThrow();
  });
});
