import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DOCUMENTED_ERRORS, OUTBOUND_WEBHOOK_EVENTS, WEBHOOK_EVENT_TYPES } from '../../contract/index.js';
import { openApiDocument } from '../../server/http/openapi.js';
import { missingExamplePath } from '../../server/http/openapi-polish.js';
import { formatMinorUnits, toMinorUnits } from '../../server/domain/money/money.js';
import { startTestService, type TestService } from '../support/service.js';
import { DEFAULT_RATE_LIMIT_PER_SECOND } from '../../server/config/config.js';
import { describeRule } from '../../server/domain/auth/rate-limiter.js';
import { ERROR_MESSAGES, ROUTE_ERROR_EXAMPLES } from '../../contract/errors.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

const run = promisify(execFile);
type Json = Record<string, any>;

const doc = JSON.parse(JSON.stringify(openApiDocument())) as Json;
const operations = Object.entries(doc.paths as Record<string, Json>).flatMap(([p, item]) =>
  Object.entries(item).map(([method, op]) => ({ name: `${method.toUpperCase()} ${p}`, op: op as Json })),
);

describe('openapi.json quality', () => {
  it('documents every operation: summary, description, a declared tag, an operationId and its security', () => {
    const tags = new Set((doc.tags as Json[]).map((t) => t.name));
    expect(operations.length).toBeGreaterThan(20);
    for (const { name, op } of operations) {
      expect([name, typeof op.summary, typeof op.description]).toEqual([name, 'string', 'string']);
      expect([name, op.tags.every((t: string) => tags.has(t))]).toEqual([name, true]);
      expect([name, typeof op.operationId]).toEqual([name, 'string']);
      const isCallback = op.tags.includes('Provider callbacks') || op.tags.includes('Operations');
      expect([name, op.security]).toEqual([name, isCallback ? [] : [{ ApiKey: [] }]]);
      if (!isCallback) expect([name, op['x-required-scope']]).toEqual([name, expect.stringMatching(/^[a-z]+:(read|write)$/)]);
    }
    expect(new Set(operations.map((o) => o.op.operationId)).size).toBe(operations.length);
  });

  it('gives every body an example and every error response its code in the envelope', () => {
    for (const { name, op } of operations) {
      for (const media of Object.values(op.requestBody?.content ?? {}) as Json[]) {
        expect([name, 'request', media.example !== undefined || media.examples !== undefined]).toEqual([name, 'request', true]);
      }
      const statuses = Object.keys(op.responses);
      // The probes answer 200 or 503, nothing else (.redocly.lint-ignore.yaml).
      const probe = name === 'GET /healthz' || name === 'GET /readyz';
      expect([name, statuses.some((s) => s.startsWith('2')), statuses.some((s) => s.startsWith('4'))]).toEqual([name, true, !probe]);
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        expect([name, status, response.description !== status]).toEqual([name, status, true]);
        expect(response.headers['X-Request-Id']).toBeDefined();
        const media = response.content['application/json'] ?? response.content['text/plain'];
        expect([name, status, media.example !== undefined || media.examples !== undefined]).toEqual([name, status, true]);
        if (Number(status) >= 400 && media.schema?.$ref === '#/components/schemas/Error') expect(media.example).toMatchObject({ success: false, error: { code: expect.any(String), request_id: expect.any(String) } });
      }
    }
  });

  it('takes every example from the contract: no body lacks one, nothing is made up by the generator', () => {
    // The generator only assembles examples from what the contract declares; a part without one shows here.
    const missing: string[] = [];
    for (const { name, op } of operations) {
      for (const media of Object.values(op.requestBody?.content ?? {}) as Json[]) {
        if (media.example === undefined && media.examples === undefined) missing.push(`${name} request: ${missingExamplePath(media.schema, doc.components.schemas)}`);
      }
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        for (const media of Object.values(response.content ?? {}) as Json[]) {
          if (media.example === undefined && media.examples === undefined) missing.push(`${name} ${status}: ${missingExamplePath(media.schema, doc.components.schemas)}`);
        }
      }
    }
    expect(missing).toEqual([]);
    // A placeholder the old generator made up for fields without an example.
    expect(JSON.stringify(doc.paths)).not.toMatch(/"example":\s*"string"/);
  });

  it('marks every body the route needs as required, and only those', () => {
    const required = operations.filter(({ op }) => op.requestBody?.required === true).map((o) => o.name);
    const optional = operations.filter(({ op }) => op.requestBody && op.requestBody.required !== true).map((o) => o.name);
    expect(required).toEqual(expect.arrayContaining(['POST /v1/payments', 'POST /v1/refunds', 'PUT /v1/merchant/webhook', 'PUT /v1/merchant/credentials', 'POST /v1/payments/cards']));
    expect(optional).toEqual(expect.arrayContaining(['POST /v1/payments/mobilemoney/reconcile']));
  });

  it('names no fixed host: servers is relative, so /docs "Try it out" calls wherever the service runs', () => {
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
    expect(JSON.stringify(doc)).not.toContain('localhost:3000');
  });

  it('documents amount as the server accepts it: a decimal string or a JSON number, with no contradicting type', () => {
    const amount = doc.components.schemas.CreateCardpayPayment.properties.amount;
    expect(amount.type).toBeUndefined();
    expect(amount.oneOf.map((s: Json) => s.type).sort()).toEqual(['number', 'string']);
  });

  it("states each provider's create rules on its own schema: the amounts it takes, and cardpay's one-of card fields", () => {
    // The server's rules: payment-request.ts (999,999,999.99), mobilemoney/provider.ts (whole KES, 250,000), cardpay/provider.ts (one of the two).
    const schemas = doc.components.schemas;
    const amount = (name: string) => String(schemas[name].properties.amount.description);
    for (const name of ['CreateCardpayPayment', 'CreateMobilemoneyPayment', 'CreateWalletpayPayment']) expect([name, schemas[name].properties.amount.oneOf.length]).toEqual([name, 2]);
    expect(amount('CreateMobilemoneyPayment')).toMatch(/whole number of KES/);
    expect(amount('CreateMobilemoneyPayment')).toContain('at most 250,000 KES');
    expect(amount('CreateMobilemoneyPayment')).not.toContain("currency's minor-unit digits");
    expect(amount('CreateCardpayPayment')).toContain('at most 999,999,999.99');
    expect(amount('CreateCardpayPayment')).toContain('999,999.99 USD');
    expect(amount('CreateWalletpayPayment')).toContain('at most 999,999,999.99');
    expect(amount('CreateWalletpayPayment')).toContain('HUF, JPY and TWD');
    expect(schemas.CreateCardpayPayment.description).toMatch(/Exactly one of payment_method .* or saved_card_id .* is required/);
    expect(schemas.CreateCardpayPayment.required).toEqual(['provider', 'amount', 'currency']);
  });

  it('documents the cardpay callback header as Cardpay-Signature', () => {
    const names = (doc.paths['/v1/webhooks/cardpay'].post.parameters as Json[]).filter((p) => p.in === 'header').map((p) => String(p.name).toLowerCase());
    expect(names).toEqual(['cardpay-signature']);
  });

  it('describes the outbound webhooks: every event type, the X-Payments-* headers and the Event body', () => {
    const hooks = doc['x-webhooks'] as Record<string, Json>;
    expect(Object.keys(hooks).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    for (const [type, item] of Object.entries(hooks)) {
      const headers = (item.post.parameters as Json[]).map((p) => p.name);
      expect([type, headers]).toEqual([type, expect.arrayContaining(['X-Event-Type', 'X-Payments-Signature', 'X-Payments-Timestamp', 'X-Webhook-Id'])]);
      const media = item.post.requestBody.content['application/json'];
      expect(media.schema).toEqual({ $ref: '#/components/schemas/Event' });
      expect(media.example).toEqual(OUTBOUND_WEBHOOK_EVENTS[type as keyof typeof OUTBOUND_WEBHOOK_EVENTS].example);
      expect(media.example.type).toBe(type);
    }
  });

  it("shows every amount the service sends as it sends it: formatted with the currency's minor-unit digits", () => {
    // Responses and outbound webhooks (request examples may be written any way the service accepts).
    const amounts: { where: string; value: unknown; currency: string }[] = [];
    const collect = (node: unknown, where: string): void => {
      if (Array.isArray(node)) return node.forEach((item, i) => collect(item, `${where}[${i}]`));
      if (!node || typeof node !== 'object') return;
      const obj = node as Json;
      if (typeof obj.currency === 'string') {
        for (const field of ['amount', 'amount_refunded']) if (field in obj) amounts.push({ where: `${where}.${field}`, value: obj[field], currency: obj.currency });
      }
      for (const [key, value] of Object.entries(obj)) collect(value, `${where}.${key}`);
    };
    for (const { name, op } of operations) collect(op.responses, name);
    collect(doc['x-webhooks'], 'x-webhooks');
    expect(amounts.filter((a) => a.where.startsWith('x-webhooks')).map((a) => a.currency)).toEqual(expect.arrayContaining(['USD', 'KES']));
    const misformatted = amounts.filter(({ value, currency }) => typeof value !== 'string' || formatMinorUnits(toMinorUnits(value, currency), currency) !== value);
    expect(misformatted).toEqual([]);
  });

  it('describes refunds as the service settles them (test/payments/refund-sync and mobilemoney-payments show the behaviour)', () => {
    // A cardpay or walletpay refund can stay pending (the provider answers pending, or does not answer: 201 pending, not 502).
    const create = doc.paths['/v1/refunds'].post.description as string;
    expect(create).not.toContain('complete at once');
    expect(create).toContain('stays pending until the provider');
    expect(create).toContain('does not answer (a timeout or outage: the outcome is unknown), is answered 201 with status pending');
    expect(doc.paths['/v1/refunds'].post.responses['502'].description).toMatch(/^The provider refused the refund/);
    // A mobilemoney reversal that never reached the operator (provider-outages.test.ts) is 502 with the refund failed;
    // only a request whose outcome is unknown is 201 pending.
    const refund502 = doc.paths['/v1/refunds'].post.responses['502'].description as string;
    for (const said of [create, refund502]) {
      expect(said).toMatch(/never reached (it|the provider)/);
      expect(said).toMatch(/could not be reached/);
      expect(said).toMatch(/outcome is\s+unknown/);
      expect(said).not.toMatch(/only when the provider refused/);
      expect(said).not.toMatch(/A provider that does not answer is no error/);
    }
    // A queue-timeout notice of a reversal is no final outcome: the refund stays pending, never fails on it.
    const timeout = doc.paths['/v1/webhooks/mobilemoney/reversal/timeout'].post.description as string;
    expect(timeout).toContain('the refund stays pending');
    expect(timeout).not.toContain('the refund fails');
    // Both reports on a reversal (its result, its queue timeout) are confirmed alike (InboundPipeline.confirmReversal): either can be 502.
    const early = (sub: string) => doc.paths[`/v1/webhooks/mobilemoney/reversal/${sub}`].post.responses['502']?.content['application/json'].example.error;
    expect(early('timeout')).toEqual(early('result'));
    expect(early('timeout')).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringContaining('before its request was recorded') });
  });

  it('says how long a refund\'s Idempotency-Key protects a retry: refund keys are deleted IDEMPOTENCY_KEY_RETENTION (24 h) after their last change', () => {
    const create = doc.paths['/v1/refunds'].post as Json;
    const header = (create.parameters as Json[]).find((p) => p.in === 'header' && String(p.name).toLowerCase() === 'idempotency-key')!;
    const said = String(header.description ?? header.schema?.description);
    expect(said).toMatch(/24 hours/);
    expect(said).toContain('IDEMPOTENCY_KEY_RETENTION');
    expect(said).not.toMatch(/never acts twice/);
    expect(create.description).toMatch(/within 24 hours/);
    expect(create.description).not.toMatch(/never refunds twice/);
  });

  it('keeps no route error example for an answer its route does not document (a leftover no test provokes)', () => {
    const unused = Object.entries(ROUTE_ERROR_EXAMPLES).flatMap(([name, byStatus]) => {
      const [method, p] = name.split(' ') as [string, string];
      return Object.keys(byStatus).filter((status) => !doc.paths[p]?.[method.toLowerCase()]?.responses[status]).map((status) => `${status} ${name}`);
    });
    expect(unused).toEqual([]);
  });

  it('documents /healthz, /readyz and /metrics', () => {
    expect(doc.paths['/healthz'].get.responses['200']).toBeDefined();
    expect(Object.keys(doc.paths['/readyz'].get.responses)).toEqual(expect.arrayContaining(['200', '503']));
    expect(doc.paths['/metrics'].get.responses['200'].content['text/plain']).toBeDefined();
  });

  it('links the README quick start from the description shown on /docs', () => {
    expect(doc.info.description).toContain('README.md#quick-start');
    expect(doc.info.description).toContain('README.md#sdk');
  });

  it('passes redocly lint (redocly.yaml) with no errors', async () => {
    const cli = path.resolve('node_modules/@redocly/cli/bin/cli.js');
    const { stdout, stderr } = await run(process.execPath, [cli, 'lint', 'openapi.json', '--format=stylish'], { env: { ...process.env, NODE_OPTIONS: '' } });
    expect(`${stdout}\n${stderr}`).toContain('Your API description is valid');
  }, 60_000);
});

describe('openapi.json error examples are what the server sends', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService();
  });
  afterAll(async () => {
    await t?.stop();
  });
  const example = (path: string, method: string, status: string) => doc.paths[path][method].responses[status].content['application/json'].example.error;

  it('400, 401, 403, 404, 413 and 422 answer with the documented code and message', async () => {
    const { apiKey } = await t.createMerchant('Docs Shop', ['payments:read']);
    // The key and its scope are checked before the body is read: 400 and 413 need a key that may write.
    const { apiKey: writer } = await t.createMerchant('Docs Shop Writer');
    const cases: [string, Promise<{ status: number; body: Json }>][] = [
      ['400', t.http.post('/v1/payments').set('X-API-Key', writer).set('Content-Type', 'application/json').send('{"amount":')],
      ['401', t.http.get('/v1/payments')],
      ['403', t.http.post('/v1/payments').set('X-API-Key', apiKey).send({})],
      ['413', t.http.post('/v1/payments').set('X-API-Key', writer).set('Content-Type', 'application/json').send(JSON.stringify({ pad: 'x'.repeat(200 * 1024) }))],
    ];
    for (const [status, pending] of cases) {
      const res = await pending;
      const documented = example('/v1/payments', status === '401' ? 'get' : 'post', status);
      expect([status, res.status, res.body.error.code, res.body.error.message]).toEqual([status, Number(status), documented.code, status === '403' ? expect.any(String) : documented.message]);
    }
    // 403 names the scope the operation needs, as its example does.
    const forbidden = await t.http.post('/v1/payments').set('X-API-Key', apiKey).send({});
    expect(forbidden.body.error.message).toBe(example('/v1/payments', 'post', '403').message);
    const missing = await t.http.get('/v1/payments/00000000-0000-4000-8000-000000000000').set('X-API-Key', apiKey);
    expect(missing.body.error).toMatchObject({ code: 'NOT_FOUND', message: example('/v1/payments/{id}', 'get', '404').message });
    // An id that does not even parse names no resource: the generic 404 of the table.
    const unparsable = await t.http.get('/v1/payments/not-a-uuid').set('X-API-Key', apiKey);
    expect(unparsable.body.error).toMatchObject({ code: 'NOT_FOUND', message: DOCUMENTED_ERRORS['404']!.message });
  });

  it('a 422 names its first field detail in the message, as the example does', async () => {
    const { apiKey } = await t.createMerchant('Docs Shop 2');
    const res = await t.http.post('/v1/refunds').set('X-API-Key', apiKey).send({ payment_id: 'nope' });
    expect(res.status).toBe(422);
    const documented = example('/v1/refunds', 'post', '422');
    expect(documented.message).toBe(`Invalid request: ${documented.details[0].field} ${documented.details[0].issue}`);
    expect(res.body.error.message).toBe(`Invalid request: ${res.body.error.details[0].field} ${res.body.error.details[0].issue}`);
  });
});

describe('openapi.json documents the rate limit the server applies', () => {
  let t: TestService;
  beforeAll(async () => {
    // A budget small enough to exhaust one request at a time: a burst past 100 a second is not certain on a loaded host.
    t = await startTestService({ RATE_LIMIT_PER_MINUTE: '3', CALLBACK_RATE_LIMIT_PER_MINUTE: '100' });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('a counted answer carries X-RateLimit-Limit/-Remaining, and the 429 says what its example says', async () => {
    const { apiKey } = await t.createMerchant('Docs Limits');
    const answers: { status: number; headers: Record<string, string>; body: Json }[] = [];
    // One window holds 3; should the minute turn between two requests, the next window fills by the 7th.
    while (answers.length < 7 && !answers.some((a) => a.status === 429)) answers.push(await t.http.get('/v1/payments').set('X-API-Key', apiKey));
    const ok = answers.find((a) => a.status === 200)!;
    const limited = answers.find((a) => a.status === 429)!;
    const example = doc.paths['/v1/payments'].get.responses['429'].content['application/json'].example.error.message as string;
    // The example quotes the production default; the server says the same with its own budget.
    const productionDefault = describeRule({ limit: DEFAULT_RATE_LIMIT_PER_SECOND, windowMs: 1000 });
    expect(example).toBe(ERROR_MESSAGES.rateLimited('for this API key', productionDefault));
    expect(limited.body.error.message).toBe(example.replace(productionDefault, '3 a minute'));
    expect([ok.headers['x-ratelimit-limit'], limited.headers['x-ratelimit-limit'], limited.headers['x-ratelimit-remaining']]).toEqual(['3', '3', '0']);
    expect(Number(ok.headers['x-ratelimit-remaining'])).toBeLessThan(3);

    const documented = (status: string) => Object.keys(doc.paths['/v1/payments'].get.responses[status].headers);
    expect(documented('200')).toEqual(expect.arrayContaining(['X-RateLimit-Limit', 'X-RateLimit-Remaining']));
    expect(documented('429')).toEqual(expect.arrayContaining(['Retry-After', 'X-RateLimit-Limit', 'X-RateLimit-Remaining']));
    // No key, no budget: a 401 is answered before counting.
    expect(documented('401')).not.toContain('X-RateLimit-Limit');
    expect(doc.components.headers['X-RateLimit-Limit'].description).toContain(productionDefault);
  });

  it('a body too large is read after the key is counted: the 413 carries the headers, as documented; a callback is counted before its 401', async () => {
    const { apiKey } = await t.createMerchant('Docs Limits Large Body');
    const large = await t.http.post('/v1/payments').set('X-API-Key', apiKey).set('Content-Type', 'application/json').send(JSON.stringify({ pad: 'x'.repeat(200 * 1024) }));
    expect([large.status, large.headers['x-ratelimit-limit'], large.headers['x-ratelimit-remaining']]).toEqual([413, '3', '2']);
    const documented = (p: string, method: string, status: string) => Object.keys(doc.paths[p][method].responses[status].headers);
    expect(documented('/v1/payments', 'post', '413')).toEqual(expect.arrayContaining(['X-RateLimit-Limit', 'X-RateLimit-Remaining']));

    // Provider callbacks are counted per source address before anything is verified.
    const unverified = await t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json').send('{}');
    expect([unverified.status, unverified.headers['x-ratelimit-limit']]).toEqual([401, '100']);
    expect(documented('/v1/webhooks/walletpay', 'post', '401')).toEqual(expect.arrayContaining(['X-RateLimit-Limit', 'X-RateLimit-Remaining']));
    // A merchant route's 401 and 403 come before counting, and say nothing of the budget.
    const forbidden = await t.http.post('/v1/payments').set('X-API-Key', (await t.createMerchant('Docs Limits Reader', ['payments:read'])).apiKey).send({});
    expect([forbidden.status, forbidden.headers['x-ratelimit-limit']]).toEqual([403, undefined]);
    expect(documented('/v1/payments', 'post', '403')).not.toContain('X-RateLimit-Limit');
  });

  it("says the open-requests bound's 429 (test events, manual retries) keeps the key's budget in X-RateLimit-Remaining", () => {
    // test/delivery/open-requests-bound.test.ts provokes that 429 and checks the header.
    for (const [p, op] of [['/v1/webhooks/test', 'post'], ['/v1/webhooks/logs/{id}/retry', 'post']] as const) {
      expect(doc.paths[p][op].responses['429'].description).toMatch(/open at once.*X-RateLimit-Remaining is the key's budget either way: 0 only when the budget refused/);
    }
    expect(doc.paths['/v1/payments'].get.responses['429'].description).toBe(DOCUMENTED_ERRORS['429']!.description);
    expect(doc.components.headers['X-RateLimit-Remaining'].description).toContain('POST /v1/webhooks/test and POST /v1/webhooks/logs/{id}/retry have a second 429');
  });
});

/**
 * A 404, 409, 422 or 502 says something about the route that sends it: its example must be a message
 * that route really answers. Each documented one is provoked here, against the real service and its
 * provider simulators, and compared word for word (ids aside).
 */
describe('openapi.json route-specific error examples are what each route answers', () => {
  let t: TestService;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    t = await startTestService();
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    for (const p of ['cardpay', 'walletpay', 'mobilemoney']) await t?.http.post(`/sandbox/${p}/_control/outage`).send({ mode: 'ok' });
    await t?.stop();
    await receiver?.stop();
  });

  const UNKNOWN = '00000000-0000-4000-8000-000000000000';
  const ROUTE_SPECIFIC = ['404', '409', '422', '502'];
  const errorOf = (name: string, status: string) => {
    const [method, p] = name.split(' ') as [string, string];
    return doc.paths[p][method.toLowerCase()].responses[status]?.content['application/json'].example.error as Json | undefined;
  };
  /** Ids differ from run to run. */
  const withoutIds = (message: string) => message.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<id>');
  const outage = (provider: string, mode: 'ok' | 'error' | 'captures_error') => t.http.post(`/sandbox/${provider}/_control/outage`).send({ mode }).expect(200);
  async function during<T>(provider: string, fn: () => Promise<T>, mode: 'error' | 'captures_error' = 'error'): Promise<T> {
    await outage(provider, mode);
    try {
      return await fn();
    } finally {
      await outage(provider, 'ok');
    }
  }

  // check-status's {code} is a value asked about (a receipt or CheckoutRequestID), not a resource's id.
  const CHECK_STATUS = 'POST /v1/payments/mobilemoney/check-status/{code}';
  const operationsWithPathId = operations.filter(({ name }) => /\{[a-z_]+\}/.test(name) && !name.includes('/v1/webhooks/mobilemoney') && name !== CHECK_STATUS);

  it('a path id that does not parse is 404, documented, and no 422 example names a path parameter', async () => {
    const { apiKey } = await t.createMerchant('Docs Ids');
    for (const { name, op } of operationsWithPathId) {
      const [method, p] = name.split(' ') as [string, string];
      const res = await (t.http as any)[method.toLowerCase()](p.replace(/\{[a-z_]+\}/, 'x%20y')).set('X-API-Key', apiKey);
      expect([name, res.status, res.body.error?.code]).toEqual([name, 404, 'NOT_FOUND']);
      expect([name, Object.keys(op.responses)]).toEqual([name, expect.arrayContaining(['404'])]);
      const pathParams = (op.parameters as Json[] ?? []).filter((q) => q.in === 'path').map((q) => q.name);
      const unprocessable = errorOf(name, '422');
      expect([name, pathParams.includes(unprocessable?.details?.[0]?.field)]).toEqual([name, false]);
      for (const param of pathParams) expect([name, unprocessable?.message ?? '']).not.toEqual([name, expect.stringContaining(`Invalid request: ${param} `)]);
    }
  });

  it('a check-status code that is neither a receipt nor a CheckoutRequestID is 422 naming code, documented with its pattern', async () => {
    const { apiKey } = await t.createMerchant('Docs Codes');
    const res = await t.http.post('/v1/payments/mobilemoney/check-status/x%20y').set('X-API-Key', apiKey);
    expect([res.status, res.body.error?.code, res.body.error?.details?.[0]?.field]).toEqual([422, 'VALIDATION_ERROR', 'code']);
    const op = operations.find(({ name }) => name === CHECK_STATUS)!.op;
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['422']));
    const code = (op.parameters as Json[]).find((q) => q.in === 'path')!;
    expect(code.name).toBe('code');
    // The documented pattern takes a receipt and a CheckoutRequestID (its prefix in any case) and refuses what was 422 above.
    const pattern = new RegExp(code.schema.pattern);
    expect(['QWE1RT2YUI', 'ws_CO_29112026000000000404', 'WS_CO_29112026000000000404', 'x y', 'ABC_DEF-123'].map((c) => pattern.test(c))).toEqual([true, true, true, false, false]);
  });

  it('documents no request body as nullable: a JSON null body is refused 400 before any route reads it', async () => {
    const { apiKey } = await t.createMerchant('Docs Null');
    for (const { name, op } of operations) {
      const schema = op.requestBody?.content?.['application/json']?.schema;
      const resolved = schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema;
      expect([name, resolved?.nullable ?? false]).toEqual([name, false]);
    }
    const res = await t.http.post(`/v1/payments/${UNKNOWN}/capture`).set('X-API-Key', apiKey).set('Content-Type', 'application/json').send('null');
    expect([res.status, res.body.error]).toEqual([400, expect.objectContaining({ code: 'BAD_REQUEST', message: 'Request body must be a JSON object' })]);
  });

  it('documents every status a provider callback answers to a body that is not an object, malformed JSON or an over-long query', async () => {
    const callbacks = operations.filter(({ op }) => op.tags.includes('Provider callbacks'));
    expect(callbacks.length).toBe(7);
    const answered: string[] = [];
    for (const { name, op } of callbacks) {
      const p = name.split(' ')[1]!;
      const query = (op.parameters as Json[] ?? []).find((q) => q.in === 'query')?.name as string | undefined;
      const probes: [string, string, string][] = [['[]', '', ''], ['{', '', ''], ...(query ? [['{}', query, 'x'.repeat(200)] as [string, string, string]] : [])];
      for (const [body, param, value] of probes) {
        const res = await t.http.post(param ? `${p}?${param}=${value}` : p).set('Content-Type', 'application/json').send(body);
        answered.push(`${name} ${body}${param ? ` ?${param}` : ''}: ${res.status}`);
        const documented = Object.keys(op.responses).includes(String(res.status));
        expect([name, body, param, res.status, documented, res.body.success]).toEqual([name, body, param, res.status, true, false]);
      }
    }
    // The statuses they answer today: 422 for [] and a long query, 400 for malformed JSON.
    expect(answered.filter((a) => !/\[\]: 422$|\{: 400$|\?(merchant|ref): 422$/.test(a))).toEqual([]);
  });

  it('documents 422 only where a route reads a body, a query or a header', () => {
    for (const { name, op } of operations) {
      const inputs = Boolean(op.requestBody) || (op.parameters as Json[] ?? []).some((q) => q.in !== 'path');
      if (!inputs) expect([name, Object.keys(op.responses)]).toEqual([name, expect.not.arrayContaining(['422'])]);
    }
  });

  it('a route documented without 422 (it reads no body, query or header) ignores a stray query or body, a NUL or lone surrogate in it included', async () => {
    const { apiKey } = await t.createMerchant('Docs Stray Input');
    const withoutInput = operations.filter(({ op }) => !Object.keys(op.responses).includes('422'));
    expect(withoutInput.map((o) => o.name)).toEqual(expect.arrayContaining(['GET /v1/payments/{id}', 'DELETE /v1/payments/cards/{id}', 'POST /v1/webhooks/logs/{id}/retry']));
    const answered: unknown[] = [];
    for (const { name, op } of withoutInput) {
      const [method, p] = name.split(' ') as [string, string];
      const target = p.replace('{provider}', 'cardpay').replace(/\{[a-z_]+\}/, UNKNOWN);
      // PostgreSQL stores neither; a route that reads the part refuses it 422 (server/http/middleware/reject-nul.ts).
      for (const [query, body] of [['x=%00', undefined], ['%00=1', undefined], ['', '{"x":"\\u0000"}'], ['', '{"\\ud800":1}']] as const) {
        const r = (t.http as any)[method.toLowerCase()](query ? `${target}?${query}` : target).set('X-API-Key', apiKey);
        const res = await (body === undefined ? r : r.set('Content-Type', 'application/json').send(body));
        answered.push([name, query || body, res.status, Object.keys(op.responses).includes(String(res.status))]);
      }
    }
    expect(answered.filter(([, , status, documented]: any) => status === 422 || !documented)).toEqual([]);
  });

  it('documents the callback headers the verification needs as required, and a callback without one is 401, never a validation 422', async () => {
    const declared = (p: string) => Object.fromEntries((doc.paths[p].post.parameters as Json[]).filter((q) => q.in === 'header').map((q) => [q.name, q.required === true]));
    expect(declared('/v1/webhooks/walletpay')).toEqual({
      'Walletpay-Transmission-Id': true, 'Walletpay-Transmission-Time': true, 'Walletpay-Transmission-Sig': true, 'Walletpay-Cert-Url': true,
      'Walletpay-Auth-Algo': false, 'Walletpay-Webhook-Id': false,
    });
    expect(declared('/v1/webhooks/cardpay')).toEqual({ 'Cardpay-Signature': true });
    // Well-formed headers (server/providers/walletpay/webhook.ts walletpayHeaderProblem), each left out in turn.
    const walletpay: Record<string, string> = {
      'Walletpay-Transmission-Id': 'b2d1f0a0-docs-0001', 'Walletpay-Transmission-Time': new Date().toISOString(),
      'Walletpay-Transmission-Sig': 'c2lnbmF0dXJlLW9mLWRvY3MtdGVzdA==', 'Walletpay-Cert-Url': `${t.baseUrl}/sandbox/walletpay/v1/notifications/certs/CERT-DOCS`,
    };
    const answers: unknown[] = [];
    for (const missing of Object.keys(walletpay)) {
      const r = t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json');
      for (const [name, value] of Object.entries(walletpay)) if (name !== missing) r.set(name, value);
      const res = await r.send({ id: 'WH-DOCS', event_type: 'PAYMENT.CAPTURE.COMPLETED', resource: { id: 'CAP-DOCS' } });
      answers.push([missing, res.status, res.body.error?.code, res.body.error?.message]);
    }
    // A cardpay event about one of our payments (one about an unknown reference is acknowledged unverified: no secret to check it with).
    const shop = await t.createMerchant('Docs Callback Headers');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', shop.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_docs_headers_0001' } }).expect(200);
    const paid = (await t.http.post('/v1/payments').set('X-API-Key', shop.apiKey).set('Idempotency-Key', 'docs-headers')
      .send({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201)).body.data;
    const event = { id: 'evt_docs_headers', object: 'event', type: 'payment_intent.succeeded', data: { object: { object: 'payment_intent', id: paid.provider_ref, status: 'succeeded' } } };
    const cardpay = await t.http.post('/v1/webhooks/cardpay').set('Content-Type', 'application/json').send(event);
    answers.push(['Cardpay-Signature', cardpay.status, cardpay.body.error?.code, cardpay.body.error?.message]);
    expect(answers).toEqual([
      ...Object.keys(walletpay).map((h) => [h, 401, 'UNAUTHORIZED', expect.stringContaining(`${h} is missing`)]),
      ['Cardpay-Signature', 401, 'UNAUTHORIZED', doc.paths['/v1/webhooks/cardpay'].post.responses['401'].content['application/json'].example.error.message],
    ]);
  });

  it('every documented 404, 409, 422 and 502 example is a message its route sends', async () => {
    const shop = await t.createMerchant('Docs Routes');
    const bare = await t.createMerchant('Docs Bare');
    const key = shop.apiKey;
    const as = (apiKey: string) => ({
      get: (p: string) => t.http.get(p).set('X-API-Key', apiKey),
      post: (p: string, body?: unknown, idem?: string) => {
        const r = t.http.post(p).set('X-API-Key', apiKey);
        if (idem) r.set('Idempotency-Key', idem);
        return body === undefined ? r : r.send(body as object);
      },
      put: (p: string, body: unknown) => t.http.put(p).set('X-API-Key', apiKey).send(body as object),
      delete: (p: string) => t.http.delete(p).set('X-API-Key', apiKey),
    });
    const api = as(key);
    await api.put('/v1/merchant/webhook', { webhook_url: receiver.url }).expect(200);
    await api.put('/v1/merchant/credentials', { provider: 'cardpay', cardpay: { secret_key: 'sk_test_docs_routes_0001' } }).expect(200);
    await api.put('/v1/merchant/credentials', { provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'docs-client', client_secret: 'docs-secret' } }).expect(200);
    await api.put('/v1/merchant/credentials', {
      provider: 'mobilemoney',
      mobilemoney: { env: 'sandbox', consumer_key: 'ck', consumer_secret: 'cs-docs-0001', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' },
    }).expect(200);

    const card = { provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' };
    const wallet = { provider: 'walletpay', amount: '25.00', currency: 'USD', return_url: 'https://shop.example.com/return', cancel_url: 'https://shop.example.com/cancel' };
    const paid = (await api.post('/v1/payments', card, 'docs-paid').expect(201)).body.data;
    expect(paid.status).toBe('completed');
    const awaiting = (await api.post('/v1/payments', wallet, 'docs-wallet').expect(201)).body.data;
    const test = (await api.post('/v1/webhooks/test').expect(200)).body.data;
    // The operator's certificate and a token are fetched and kept, as in a running service: an outage then meets the request itself.
    await api.post('/v1/payments/mobilemoney/check-status/NLJ7RT61SV').expect(200);

    type Answer = { status: number; body: Json; headers?: Record<string, string> };
    const cases: Record<string, () => Promise<Answer>> = {
      '422 PUT /v1/merchant/webhook': () => api.put('/v1/merchant/webhook', { webhook_url: 'not a url' }),
      '422 PUT /v1/merchant/credentials': () => api.put('/v1/merchant/credentials', { provider: 'paypal' }),
      '502 PUT /v1/merchant/credentials': () => as(bare.apiKey).put('/v1/merchant/credentials', { provider: 'cardpay', cardpay: { secret_key: 'sk_test_invalid_docs' } }),
      '409 PUT /v1/merchant/credentials': async () => {
        const lease = `credentials:${shop.merchantId}:cardpay`;
        await t.sql("INSERT INTO refresh_leases (name, holder, until) VALUES ($1, gen_random_uuid(), now() + interval '1 minute')", [lease]);
        try {
          return await api.put('/v1/merchant/credentials', { provider: 'cardpay', cardpay: { secret_key: 'sk_test_docs_routes_0001' } });
        } finally {
          await t.sql('DELETE FROM refresh_leases WHERE name = $1', [lease]);
        }
      },
      '404 DELETE /v1/merchant/credentials/{provider}': () => as(bare.apiKey).delete('/v1/merchant/credentials/cardpay'),
      '409 DELETE /v1/merchant/credentials/{provider}': async () => {
        const lease = `credentials:${shop.merchantId}:cardpay`;
        await t.sql("INSERT INTO refresh_leases (name, holder, until) VALUES ($1, gen_random_uuid(), now() + interval '1 minute')", [lease]);
        try {
          return await api.delete('/v1/merchant/credentials/cardpay');
        } finally {
          await t.sql('DELETE FROM refresh_leases WHERE name = $1', [lease]);
        }
      },
      '409 POST /v1/payments/cards': async () => {
        await api.post('/v1/payments/cards', { payment_method_id: 'pm_card_visa' }, 'docs-card').expect(201);
        return api.post('/v1/payments/cards', { payment_method_id: 'pm_card_mastercard' }, 'docs-card');
      },
      '422 POST /v1/payments/cards': () => api.post('/v1/payments/cards', {}),
      // The customer made and then answered 500 (the outcome unknown), not the read of the payment method before it.
      '502 POST /v1/payments/cards': async () => {
        await t.http.post('/sandbox/cardpay/_control/api-errors').set('Authorization', 'Bearer sk_test_docs_routes_0001').send({ count: 1 }).expect(200);
        return api.post('/v1/payments/cards', { payment_method_id: 'pm_card_visa' });
      },
      '422 GET /v1/payments/cards': () => api.get('/v1/payments/cards?page=0'),
      '404 DELETE /v1/payments/cards/{id}': () => api.delete(`/v1/payments/cards/${UNKNOWN}`),
      '404 POST /v1/payments/mobilemoney/check-status/{code}': () => api.post('/v1/payments/mobilemoney/check-status/ws_CO_29112026000000000404'),
      '422 POST /v1/payments/mobilemoney/check-status/{code}': () => as(bare.apiKey).post('/v1/payments/mobilemoney/check-status/NLJ7RT61SV'),
      '502 POST /v1/payments/mobilemoney/check-status/{code}': () => during('mobilemoney', () => api.post('/v1/payments/mobilemoney/check-status/NLJ7RT61SV')),
      '422 POST /v1/payments/mobilemoney/reconcile': () => api.post('/v1/payments/mobilemoney/reconcile', { since: 'yesterday' }),
      '502 POST /v1/payments/mobilemoney/reconcile': () => during('mobilemoney', () => api.post('/v1/payments/mobilemoney/reconcile', {})),
      '422 POST /v1/payments/mobilemoney/register-pull': () => api.post('/v1/payments/mobilemoney/register-pull', { nominated_number: '0712' }),
      '502 POST /v1/payments/mobilemoney/register-pull': () => during('mobilemoney', () => api.post('/v1/payments/mobilemoney/register-pull', { nominated_number: '254708374149' })),
      '409 POST /v1/payments': () => api.post('/v1/payments', { ...card, amount: '26.00' }, 'docs-paid'),
      '422 POST /v1/payments': () => api.post('/v1/payments', { ...card, amount: '0' }, 'docs-zero'),
      '502 POST /v1/payments': () => api.post('/v1/payments', { ...card, payment_method: 'pm_docs_unknown' }, 'docs-unknown-card'),
      '422 GET /v1/payments': () => api.get('/v1/payments?status=paid'),
      '404 GET /v1/payments/{id}': () => api.get(`/v1/payments/${UNKNOWN}`),
      '404 GET /v1/payments/{id}/transitions': () => api.get(`/v1/payments/${UNKNOWN}/transitions`),
      '404 POST /v1/payments/{id}/capture': () => api.post(`/v1/payments/${UNKNOWN}/capture`),
      '409 POST /v1/payments/{id}/capture': () => api.post(`/v1/payments/${awaiting.id}/capture`),
      '422 POST /v1/payments/{id}/capture': () => api.post(`/v1/payments/${awaiting.id}/capture`, undefined, 'k'.repeat(256)),
      // The capture sent and not answered (its outcome unknown), not the read of the order before it.
      '502 POST /v1/payments/{id}/capture': () => during('walletpay', () => api.post(`/v1/payments/${awaiting.id}/capture`), 'captures_error'),
      '404 POST /v1/refunds': () => api.post('/v1/refunds', { payment_id: UNKNOWN }),
      '409 POST /v1/refunds': () => api.post('/v1/refunds', { payment_id: awaiting.id }),
      '422 POST /v1/refunds': () => api.post('/v1/refunds', { payment_id: paid.id, amount: '0' }),
      '502 POST /v1/refunds': async () => {
        // A definite refusal (the provider does not answer: 201 pending). A refund made in the provider's dashboard that has not
        // reached the service (its credentials carry their own webhook secret: no endpoint registered), then "the rest" asked for.
        const quiet = as((await t.createMerchant('Docs Quiet')).apiKey);
        await quiet.put('/v1/merchant/credentials', { provider: 'cardpay', cardpay: { secret_key: 'sk_test_docs_quiet_0001', webhook_secret: 'whsec_docs_quiet' } }).expect(200);
        const p = (await quiet.post('/v1/payments', card, 'docs-quiet').expect(201)).body.data;
        await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', 'Bearer sk_test_docs_quiet_0001').type('form')
          .send({ payment_intent: p.provider_ref, amount: '500' }).expect(200);
        return quiet.post('/v1/refunds', { payment_id: p.id });
      },
      '404 GET /v1/refunds': () => api.get(`/v1/refunds?payment_id=${UNKNOWN}`),
      '422 GET /v1/refunds': () => api.get('/v1/refunds?status=done'),
      '404 GET /v1/refunds/{id}': () => api.get(`/v1/refunds/${UNKNOWN}`),
      '422 GET /v1/webhooks/logs': () => api.get('/v1/webhooks/logs?status=sent'),
      '404 GET /v1/webhooks/logs/{id}': () => api.get(`/v1/webhooks/logs/${UNKNOWN}`),
      '404 POST /v1/webhooks/logs/{id}/retry': () => api.post(`/v1/webhooks/logs/${UNKNOWN}/retry`),
      '409 POST /v1/webhooks/logs/{id}/retry': () => api.post(`/v1/webhooks/logs/${test.delivery_id}/retry`),
      '409 POST /v1/webhooks/recover': () => as(bare.apiKey).post('/v1/webhooks/recover', { since: new Date(Date.now() - 3_600_000).toISOString() }),
      '422 POST /v1/webhooks/recover': () => api.post('/v1/webhooks/recover', { since: 'yesterday' }),
      '409 POST /v1/webhooks/test': () => as(bare.apiKey).post('/v1/webhooks/test'),
      '422 POST /v1/webhooks/test': () => api.post('/v1/webhooks/test', { url: receiver.url }),
      '422 GET /v1/events': () => api.get('/v1/events?type=payment.paid'),
      ...Object.fromEntries(
        operations.filter(({ op }) => op.tags.includes('Provider callbacks')).map(({ name }) => [
          `422 ${name}`,
          () => t.http.post(name.split(' ')[1]!).set('Content-Type', 'application/json').send('[]'),
        ]),
      ),
      '404 GET /v1/events/{id}': () => api.get(`/v1/events/${UNKNOWN}`),
      '502 POST /v1/webhooks/walletpay': async () => {
        // A genuine transmission (the capture's) naming a signing certificate this service has not fetched yet, sent
        // again while walletpay is down: neither the certificate nor the verify-webhook-signature postback can be had.
        const order = (await api.post('/v1/payments', wallet, 'docs-wallet-captured').expect(201)).body.data;
        await fetch(`${order.next_action.url}${order.next_action.url.includes('?') ? '&' : '?'}auto=approve`, { redirect: 'manual' });
        await api.post(`/v1/payments/${order.id}/capture`).expect(200);
        const [row] = await eventually(() =>
          t.sql<{ id: string; raw_body: string; transmission_time: string; signature: string; webhook_id: string }>(
            `SELECT tr.* FROM sandbox_walletpay_transmissions tr WHERE tr.status = 'delivered' AND tr.raw_body LIKE $1`, [`%${order.provider_ref}%`],
          ).then((rows) => (rows.length ? rows : null)), 10_000, 'delivered transmission');
        return during('walletpay', () => t.http.post('/v1/webhooks/walletpay').set('Content-Type', 'application/json')
          .set('Walletpay-Transmission-Id', row!.id).set('Walletpay-Transmission-Time', row!.transmission_time)
          .set('Walletpay-Transmission-Sig', row!.signature).set('Walletpay-Webhook-Id', row!.webhook_id).set('Walletpay-Auth-Algo', 'SHA256withRSA')
          .set('Walletpay-Cert-Url', `${t.baseUrl}/sandbox/walletpay/v1/notifications/certs/CERT-ROTATED`)
          .send(row!.raw_body));
      },
    };
    /**
     * Provider callbacks whose 409/502 need a provider to report a refund of a payment that is still pending
     * here: not provoked here; their messages are the ones server/domain/inbound/inbound-pipeline.ts
     * (settleBeforeRefunds) and server/domain/payments/status-writer.ts (providerRefund) send.
     */
    const notProvoked = [
      '409 POST /v1/webhooks/cardpay', '502 POST /v1/webhooks/cardpay', '409 POST /v1/webhooks/walletpay',
      // A live-env reversal result or timeout that overtakes its request's acknowledgement (InboundPipeline.confirmReversal).
      '502 POST /v1/webhooks/mobilemoney/reversal/result', '502 POST /v1/webhooks/mobilemoney/reversal/timeout',
    ];

    const documented = operations.flatMap(({ name, op }) => Object.keys(op.responses).filter((s) => ROUTE_SPECIFIC.includes(s)).map((s) => `${s} ${name}`));
    const answered: string[] = [];
    const mismatches: unknown[] = [];
    const undeclaredRetryAfter: string[] = [];
    for (const entry of documented) {
      const provoke = cases[entry];
      if (!provoke) continue;
      const [status, ...rest] = entry.split(' ');
      const example = errorOf(rest.join(' '), status!)!;
      const res = await provoke();
      answered.push(entry);
      // A response that documents Payments-Outcome (its example: the provider did not answer) carries it; no other does.
      const [method, p] = rest.join(' ').split(' ') as [string, string];
      const outcomeDoc = doc.paths[p][method.toLowerCase()].responses[status!]?.headers?.['Payments-Outcome'] as Json | undefined;
      const got = { status: res.status, code: res.body?.error?.code, message: withoutIds(String(res.body?.error?.message)), detail: res.body?.error?.details?.[0] ?? null, outcome: res.headers?.['payments-outcome'] ?? null };
      const want = { status: Number(status), code: example.code, message: withoutIds(example.message), detail: example.details?.[0] ?? null, outcome: outcomeDoc ? outcomeDoc.schema.enum[0] : null };
      if (JSON.stringify(got) !== JSON.stringify(want)) mismatches.push({ entry, got, want });
      // An answer that tells the client when to retry documents that header.
      const declared = Object.keys(doc.paths[p][method.toLowerCase()].responses[status!]?.headers ?? {});
      if (res.headers?.['retry-after'] !== undefined && !declared.includes('Retry-After')) undeclaredRetryAfter.push(entry);
    }
    expect(mismatches).toEqual([]);
    expect(undeclaredRetryAfter).toEqual([]);
    // Every route-specific error the document shows is provoked here, but for the callbacks named above.
    expect(documented.filter((e) => !answered.includes(e) && !notProvoked.includes(e))).toEqual([]);

    // A refused payment's key stands for the failed payment: its retry answers 200 with it, never the 502 replayed.
    const refused = doc.paths['/v1/payments'].post.responses['502'];
    expect(Object.keys(refused.headers)).not.toContain('Idempotent-Replayed');
    expect(refused.description).toContain('answers 200 with it (its failure_reason');
    // Only an error a retry with the key really replays documents Idempotent-Replayed: refusals before the key
    // is claimed keep no answer for it, and a creation's key never answers an error again.
    const replayedErrors = (p: string) =>
      Object.entries(doc.paths[p].post.responses as Record<string, { headers?: Record<string, unknown> }>)
        .filter(([status, r]) => !status.startsWith('2') && r.headers?.['Idempotent-Replayed'] !== undefined)
        .map(([status]) => status);
    expect(['/v1/payments', '/v1/payments/{id}/capture', '/v1/refunds', '/v1/payments/cards'].map((p) => [p, replayedErrors(p)])).toEqual([
      ['/v1/payments', []],
      ['/v1/payments/{id}/capture', ['502']],
      ['/v1/refunds', ['502']],
      ['/v1/payments/cards', ['422', '502']],
    ]);
    expect(doc.paths['/v1/payments'].post.responses['200'].headers['Idempotent-Replayed'].description).not.toContain('An error the first request ended with');
    const retry = await api.post('/v1/payments', { ...card, payment_method: 'pm_docs_unknown' }, 'docs-unknown-card');
    expect([retry.status, retry.headers['idempotent-replayed'], retry.body.data.status, retry.body.data.failure_reason])
      .toEqual([200, 'true', 'failed', expect.stringContaining("No such PaymentMethod: 'pm_docs_unknown'")]);
  }, 120_000);
});
