import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

/**
 * A payment's `metadata`: the merchant's own key-value pairs (an order number, a customer id), given at
 * creation and returned as given on every read, for each provider. It is part of the request an
 * Idempotency-Key stands for, and a bad one is refused with the field named and nothing written.
 */
let t: TestService;
let key: string;
let n = 0;
const idem = () => `meta-${Date.now()}-${++n}`;
const create = (body: Record<string, unknown>, idempotencyKey = idem()) =>
  t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idempotencyKey).send(body);
const card = (metadata?: unknown) => ({ provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa', ...(metadata === undefined ? {} : { metadata }) });
const paymentCount = async () => (await t.sql<{ n: number }>('SELECT count(*)::int AS n FROM payments'))[0]!.n;

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key } = await t.createMerchant('Metadata Shop'));
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_metadata_0001' } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key)
    .send({ provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'metadata-client', client_secret: 'metadata-secret' } }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({
    provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'metadata-key', consumer_secret: 's', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' },
  }).expect(200);
});
afterAll(async () => {
  await t.stop();
});

describe('payment metadata', () => {
  it('is returned as given by the create answer, GET and the list, for every provider; {} when none was given', async () => {
    const metadata = { order_id: '1042', 'customer.email-hash': 'a1b2', note: 'gift: wrap it' };
    const created = [
      await create(card(metadata)),
      await create({ provider: 'walletpay', amount: '25.00', currency: 'USD', return_url: 'https://shop.example.com/r', cancel_url: 'https://shop.example.com/c', metadata }),
      await create({ provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149', metadata }),
    ];
    for (const res of created) {
      expect(res.status).toBe(201);
      expect(res.body.data.metadata).toEqual(metadata);
      const got = await t.http.get(`/v1/payments/${res.body.data.id}`).set('X-API-Key', key).expect(200);
      expect(got.body.data.metadata).toEqual(metadata);
    }
    const plain = await create(card());
    expect(plain.body.data.metadata).toEqual({});
    const list = await t.http.get('/v1/payments').set('X-API-Key', key).expect(200);
    const byId = new Map(list.body.data.map((p: { id: string; metadata: unknown }) => [p.id, p.metadata]));
    expect(created.map((r) => byId.get(r.body.data.id))).toEqual([metadata, metadata, metadata]);
    expect(byId.get(plain.body.data.id)).toEqual({});
  });

  it('is part of the request an Idempotency-Key stands for: the same pairs in any order replay, other pairs conflict', async () => {
    const k = idem();
    const first = await create(card({ order_id: '7', lane: 'b' }), k);
    expect(first.status).toBe(201);
    const again = await create(card({ lane: 'b', order_id: '7' }), k);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data.id).toBe(first.body.data.id);
    const other = await create(card({ order_id: '8', lane: 'b' }), k);
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ success: false, error: { code: 'CONFLICT' } });
    const without = await create(card(), k);
    expect(without.status).toBe(409);
  });

  it('a bad one is refused (422) with the field named, and no payment is written', async () => {
    const before = await paymentCount();
    const tooMany = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
    const cases: [unknown, RegExp][] = [
      [tooMany, /at most 50 keys/],
      [{ ['k'.repeat(41)]: 'v' }, /keys must be 1-40/],
      [{ 'has space': 'v' }, /keys must be 1-40/],
      // Was 201 with the pair silently dropped (an object cannot hold it as its own key when rebuilt).
      [{ ['__proto__']: 'v' }, /__proto__ is not allowed/],
      [{ order_id: 'x'.repeat(501) }, /500/],
      [{ order_id: 1042 }, /string/i],
      [{ nested: { a: 'b' } }, /string/i],
      [['order_id', '1042'], /object|record/i],
      ['order_id=1042', /object|record/i],
    ];
    for (const [metadata, issue] of cases) {
      const res = await create(card(metadata));
      expect(res.status).toBe(422);
      expect(res.body.success).toBe(false);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      const detail = (res.body.error.details as { field: string; issue: string }[]).find((d) => d.field.startsWith('metadata'));
      expect(detail?.issue).toMatch(issue);
    }
    // 50 keys of 40 characters with 500-character values is the most allowed.
    const largest = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`${String(i).padStart(2, '0')}${'k'.repeat(38)}`, 'v'.repeat(500)]));
    const ok = await create(card(largest));
    expect(ok.status).toBe(201);
    expect(ok.body.data.metadata).toEqual(largest);
    expect(await paymentCount()).toBe(before + 1);
  });
});
