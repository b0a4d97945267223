import { randomUUID } from 'node:crypto';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { rawRequest, type RawResponse } from '../support/raw-http.js';
import { inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';

// Hostile bodies, encodings, headers and amounts: each is refused in the error envelope with the
// right status, names the field where there is one, and writes nothing.

let t: TestService;
let key: string;
let port: number;
let n = 0;

const send = (method: string, target: string, body: Buffer | string | undefined, headers: [string, string][] = []): Promise<RawResponse> =>
  rawRequest(port, { method, target, headers: [['X-API-Key', key], ['Content-Type', 'application/json'], ...headers], body });
const createPayment = (json: string, idempotencyKey = `input-${++n}`) => send('POST', '/v1/payments', json, [['Idempotency-Key', idempotencyKey]]);
const parsed = (res: RawResponse) => JSON.parse(res.body) as { success: boolean; data?: any; error?: { code: string; message: string; details?: { field: string; issue: string }[]; request_id: string } };
const counts = async () => (await t.sql('SELECT (SELECT count(*) FROM payments)::int AS payments, (SELECT count(*) FROM refunds)::int AS refunds'))[0];

function expectRefusal(res: RawResponse, status: number, code: string, field?: string) {
  const body = parsed(res);
  expect({ status: res.status, success: body.success, code: body.error?.code }).toEqual({ status, success: false, code });
  expect(body.error!.request_id).toBe(res.headers['x-request-id']);
  if (field) {
    expect(body.error!.details?.[0]?.field).toBe(field);
    expect(body.error!.message).toContain(field);
  }
}

beforeAll(async () => {
  t = await startTestService();
  port = Number(new URL(t.baseUrl).port);
  ({ apiKey: key } = await t.createMerchant('Strict input'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_hostile_0001' } }).expect(200);
});
afterAll(async () => t?.stop());

describe('text PostgreSQL cannot store', () => {
  it('refuses a lone surrogate in a field, a nested field or a key with 422 naming it, and writes nothing', async () => {
    const before = await counts();
    const field = await createPayment('{"provider":"cardpay","amount":"1.00","currency":"USD","payment_method":"pm_\\ud800"}');
    expectRefusal(field, 422, 'VALIDATION_ERROR', 'payment_method');
    const low = await createPayment('{"provider":"cardpay","amount":"1.00","currency":"USD","payment_method":"pm_\\udfffx"}');
    expectRefusal(low, 422, 'VALIDATION_ERROR', 'payment_method');
    const nested = await send('PUT', '/v1/merchant/credentials', '{"provider":"cardpay","cardpay":{"secret_key":"sk_test_\\ud83d"}}');
    expectRefusal(nested, 422, 'VALIDATION_ERROR', 'cardpay.secret_key');
    const key2 = await send('POST', '/v1/refunds', '{"payment_id":"0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21","\\udc00":1}');
    expectRefusal(key2, 422, 'VALIDATION_ERROR');
    // A well-formed pair is an ordinary character.
    const pair = await send('PUT', '/v1/merchant/webhook', '{"webhook_url":"https://shop.example.com/\\ud83d\\ude00"}');
    expect(pair.status).toBe(200);
    expect(await counts()).toEqual(before);
  });

  it('logs a database error as its class and SQLSTATE only: no statement, no parameters, no request data', async () => {
    const phone = '254711987654';
    const { logger, orm } = t.service.container;
    let dbError: unknown;
    try {
      // What a lone surrogate once did: PostgreSQL refuses the jsonb, and the error quotes the statement and its values.
      await orm.em.getConnection().execute('SELECT ?::jsonb AS body', [`{"phone":"${phone}","payment_method":"pm_\\ud800"}`]);
    } catch (err) {
      dbError = err;
    }
    expect(String((dbError as Error).message)).toContain(phone);
    logger.error({ err: dbError }, 'unhandled error');
    // The `{ type, message }` shape older call sites (jobs, delivery) log goes through the same serializer.
    logger.error({ err: { type: (dbError as Error).name, message: (dbError as Error).message } }, 'job failed');
    const lines = readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>);
    const logged = lines.filter((l) => l.msg === 'unhandled error' || l.msg === 'job failed');
    expect(logged).toHaveLength(2);
    for (const line of logged) {
      expect(JSON.stringify(line)).not.toContain(phone);
      expect(JSON.stringify(line).toLowerCase()).not.toContain('select');
      expect(line.err.message).toMatch(/^database error/);
    }
    expect(logged[0]!.err.code).toMatch(/^[0-9A-Z]{5}$/);
  });
});

describe('bodies that cannot be read', () => {
  const json = '{"webhook_url":"https://shop.example.com/gz"}';

  it('answers 400 in the envelope for a body that does not match its Content-Encoding', async () => {
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const res = await send('PUT', '/v1/merchant/webhook', 'this is not compressed', [['Content-Encoding', encoding]]);
      expectRefusal(res, 400, 'BAD_REQUEST');
      expect(parsed(res).error!.message).toMatch(/Content-Encoding/);
    }
    const truncated = gzipSync(json).subarray(0, 20);
    expectRefusal(await send('PUT', '/v1/merchant/webhook', truncated, [['Content-Encoding', 'gzip']]), 400, 'BAD_REQUEST');
    expectRefusal(await send('PUT', '/v1/merchant/webhook', json, [['Content-Encoding', 'x-evil']]), 400, 'BAD_REQUEST');
  });

  it('reads gzip and deflate bodies; br is refused as unsupported, not failed on', async () => {
    expect((await send('PUT', '/v1/merchant/webhook', gzipSync(json), [['Content-Encoding', 'gzip']])).status).toBe(200);
    expect((await send('PUT', '/v1/merchant/webhook', deflateSync(json), [['Content-Encoding', 'deflate']])).status).toBe(200);
    const br = await send('PUT', '/v1/merchant/webhook', brotliCompressSync(json), [['Content-Encoding', 'br']]);
    expectRefusal(br, 400, 'BAD_REQUEST');
    expect(parsed(br).error!.message).toBe('Unsupported Content-Encoding; use gzip, deflate or identity');
  });

  it('answers 400 for a charset other than UTF-8, bytes that are not UTF-8, duplicate keys and deep nesting', async () => {
    const latin1 = await rawRequest(port, {
      method: 'PUT', target: '/v1/merchant/webhook', headers: [['X-API-Key', key], ['Content-Type', 'application/json; charset=latin1']], body: json,
    });
    expectRefusal(latin1, 400, 'BAD_REQUEST');
    expectRefusal(await send('PUT', '/v1/merchant/webhook', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])), 400, 'BAD_REQUEST');
    expectRefusal(await send('PUT', '/v1/merchant/webhook', '{"webhook_url":"https://a.example/1","webhook_url":"https://b.example/2"}'), 400, 'BAD_REQUEST');
    expectRefusal(await send('PUT', '/v1/merchant/webhook', `{"x":${'['.repeat(5000)}${']'.repeat(5000)}}`), 400, 'BAD_REQUEST');
  });
});

describe('Idempotency-Key', () => {
  it('refuses a key that is not 1–255 printable ASCII characters with 422 naming the header, and writes nothing', async () => {
    const before = await counts();
    const body = '{"provider":"cardpay","amount":"1.00","currency":"USD","payment_method":"pm_card_visa"}';
    for (const bad of ['ключ-🔑', 'order-\u00e9', 'x'.repeat(256), 'tab\there']) {
      const res = await createPayment(body, bad);
      expectRefusal(res, 422, 'VALIDATION_ERROR', 'idempotency-key');
    }
    expect(await counts()).toEqual(before);
  });

  it('accepts 255 printable ASCII characters, echoes the key exactly and finds it by search', async () => {
    const longKey = `${'k'.repeat(200)} ~!#$%&'*+-.^_|:;<=>?@[]{}/`.padEnd(255, 'z');
    const res = await createPayment('{"provider":"cardpay","amount":"2.00","currency":"USD","payment_method":"pm_card_visa"}', longKey);
    expect(res.status).toBe(201);
    expect(parsed(res).data.idempotency_key).toBe(longKey);
    const found = await t.http.get('/v1/payments').query({ search: longKey }).set('X-API-Key', key);
    expect(found.body.data.map((p: { id: string }) => p.id)).toEqual([parsed(res).data.id]);
  });
});

describe('strict money input', () => {
  it('refuses padded amounts, non-monetary currencies and JSON numbers more precise than the currency', async () => {
    const before = await counts();
    const pay = (amount: string, currency = 'USD') => createPayment(`{"provider":"cardpay","amount":${amount},"currency":"${currency}","payment_method":"pm_card_visa"}`);
    for (const amount of ['"  5 "', '" 5"', '"5\\t"', '"+5"', '"5."', '"1e2"', '19.999999999999999', '1.001', '0.30000000000000004', '1e400', '1E-7']) {
      expectRefusal(await pay(amount), 422, 'VALIDATION_ERROR', 'amount');
    }
    expectRefusal(await pay('100.5', 'JPY'), 422, 'VALIDATION_ERROR', 'amount');
    // Decimal places are counted as written (decisions.md), trailing zeros included, as a string or a JSON number.
    for (const [amount, currency] of [['"10.000"', 'USD'], ['10.000', 'USD'], ['19.990', 'USD'], ['"1500.0"', 'JPY'], ['1500.0', 'JPY'], ['"5.2500"', 'KWD']] as const) {
      const refused = await pay(amount, currency);
      expectRefusal(refused, 422, 'VALIDATION_ERROR', 'amount');
      expect(parsed(refused).error?.details?.[0]?.issue).toContain('decimal places');
    }
    for (const code of ['XXX', 'XAU', 'XAG', 'XPT', 'XPD', 'XTS', 'XDR', 'XBA', 'XBD', 'XSU', 'XUA', 'USN', 'CLF']) {
      expectRefusal(await pay('"5"', code), 422, 'VALIDATION_ERROR', 'currency');
    }
    expect(await counts()).toEqual(before);
  });

  it('reads JSON-number amounts exactly as written', async () => {
    const pay = (amount: string, currency = 'USD') => createPayment(`{"provider":"cardpay","amount":${amount},"currency":"${currency}","payment_method":"pm_card_visa"}`);
    expect(parsed(await pay('19.99')).data.amount).toBe('19.99');
    expect(parsed(await pay('19.90')).data.amount).toBe('19.90');
    expect(parsed(await pay('"5.250"', 'KWD')).data.amount).toBe('5.250');
    expect(parsed(await pay('1500', 'JPY')).data.amount).toBe('1500');
    // cardpay's largest USD amount (Stripe takes eight digits of cents).
    expect(parsed(await pay('999999.99')).data.amount).toBe('999999.99');
    // Twenty significant digits: the nearest double is 100000000, the merchant sent more decimals than USD has.
    const refusedNotRounded = await pay('99999999.999999999999');
    expectRefusal(refusedNotRounded, 422, 'VALIDATION_ERROR', 'amount');
  });

  it('still answers a key whose first request an earlier release took with trailing zeros (it read "10.000" as 10.00)', async () => {
    // The hash is the value's, as it was: a retry across the upgrade finds its key and its payment or refund,
    // where a new key with the same body is 422.
    const key1 = `trailing-${randomUUID()}`;
    const first = parsed(await createPayment('{"provider":"cardpay","amount":"10.00","currency":"USD","payment_method":"pm_card_visa"}', key1));
    expect(first.data.status).toBe('completed');
    const before = await counts();
    const retried = await createPayment('{"provider":"cardpay","amount":"10.000","currency":"USD","payment_method":"pm_card_visa"}', key1);
    expect({ status: retried.status, replayed: retried.headers['idempotent-replayed'], id: parsed(retried).data?.id }).toEqual({ status: 200, replayed: 'true', id: first.data.id });
    const refundKey = `trailing-refund-${randomUUID()}`;
    const refund = await send('POST', '/v1/refunds', `{"payment_id":"${first.data.id}","amount":"5.00"}`, [['Idempotency-Key', refundKey]]);
    expect(refund.status).toBe(201);
    const refundRetried = await send('POST', '/v1/refunds', `{"payment_id":"${first.data.id}","amount":"5.000"}`, [['Idempotency-Key', refundKey]]);
    expect({ replayed: refundRetried.headers['idempotent-replayed'], id: parsed(refundRetried).data?.id }).toEqual({ replayed: 'true', id: parsed(refund).data.id });
    expect(await counts()).toEqual({ payments: before!.payments, refunds: Number(before!.refunds) + 1 });
    expectRefusal(await send('POST', '/v1/refunds', `{"payment_id":"${first.data.id}","amount":"5.000"}`, [['Idempotency-Key', `trailing-new-${randomUUID()}`]]), 422, 'VALIDATION_ERROR', 'amount');
  });

  it('applies the same rule to refunds and to list filters', async () => {
    const paid = parsed(await createPayment('{"provider":"cardpay","amount":"10.00","currency":"USD","payment_method":"pm_card_visa"}')).data;
    expect(paid.status).toBe('completed');
    const before = await counts();
    for (const amount of ['" 5"', '"5 "', '5.000000000000000001', '1.001', '"5.000"', '5.000']) {
      expectRefusal(await send('POST', '/v1/refunds', `{"payment_id":"${paid.id}","amount":${amount}}`), 422, 'VALIDATION_ERROR', 'amount');
    }
    expect(await counts()).toEqual(before);
    for (const [query, field] of [['min_amount=%205', 'min_amount'], ['max_amount=5%20', 'max_amount'], ['min_amount=1e2', 'min_amount'], ['currency=JPY&min_amount=5.5', 'min_amount'], ['currency=USD&max_amount=5.001', 'max_amount'], ['currency=USD&min_amount=5.000', 'min_amount'], ['currency=JPY&max_amount=5.0', 'max_amount']] as const) {
      expectRefusal(await rawRequest(port, { method: 'GET', target: `/v1/payments?${query}`, headers: [['X-API-Key', key]] }), 422, 'VALIDATION_ERROR', field);
    }
    const ok = await t.http.get('/v1/payments').query({ currency: 'USD', min_amount: '9.50', max_amount: '10.00' }).set('X-API-Key', key);
    expect(ok.body.data.map((p: { id: string }) => p.id)).toContain(paid.id);
  });
});

describe('unauthenticated callbacks and the log', () => {
  it('an unsigned callback with a 90 KB event id or type writes no log line longer than 2 KB', async () => {
    const huge = 'x'.repeat(90_000);
    const unknownIntent = { object: 'payment_intent', id: 'pi_unknown_to_us', amount: 100, currency: 'usd', status: 'succeeded', metadata: {} };
    for (const event of [
      { id: `evt_${huge}`, object: 'event', type: 'payment_intent.succeeded', data: { object: unknownIntent } },
      { id: 'evt_huge_type', object: 'event', type: `payment_intent.${huge}`, data: { object: unknownIntent } },
    ]) {
      const res = await rawRequest(port, { method: 'POST', target: '/v1/webhooks/cardpay', headers: [['Content-Type', 'application/json']], body: JSON.stringify(event) });
      expect(res.status).toBe(200); // acknowledged: an unknown reference, or a type not used
    }
    const longest = Math.max(...readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').map((line) => line.length));
    expect(longest).toBeLessThan(2048);
  });
});
