import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

let t: TestService;
let key: string;
let otherKey: string;

interface Seed { status: string; provider: string; currency: string; minor: number; amount: string; created: string; receipt?: string; key?: string }

// A fixed book of payments for one merchant (seeded directly: this file tests the read path).
const SEEDS: Seed[] = [
  { status: 'completed', provider: 'cardpay', currency: 'USD', minor: 1000, amount: '10.00', created: '2026-01-01T10:00:00Z', key: 'order-a' },
  { status: 'failed', provider: 'cardpay', currency: 'USD', minor: 2550, amount: '25.50', created: '2026-01-02T10:00:00Z' },
  { status: 'pending', provider: 'walletpay', currency: 'EUR', minor: 9999, amount: '99.99', created: '2026-01-03T10:00:00Z' },
  { status: 'completed', provider: 'mobilemoney', currency: 'KES', minor: 150000, amount: '1500.00', created: '2026-01-04T10:00:00Z', receipt: 'NLJ7RT61SV' },
  { status: 'reversed', provider: 'mobilemoney', currency: 'KES', minor: 5000, amount: '50.00', created: '2026-01-05T10:00:00Z', receipt: 'QWE1RT2YUI' },
  { status: 'refunded', provider: 'walletpay', currency: 'USD', minor: 500, amount: '5.00', created: '2026-01-06T10:00:00Z' },
  { status: 'completed', provider: 'cardpay', currency: 'JPY', minor: 1200, amount: '1200', created: '2026-01-07T10:00:00Z' },
];

async function seed(merchantId: string, rows: Seed[]) {
  for (const s of rows) {
    await t.sql(
      `INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash, receipt_number, provider_ref, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'seed', $10, $11, $12, $12)`,
      [randomUUID(), merchantId, s.provider, s.status, s.minor, s.currency, s.amount, randomUUID().slice(0, 12).toUpperCase(), s.key ?? randomUUID(), s.receipt ?? null, s.receipt ?? `ref-${randomUUID()}`, s.created],
    );
  }
}

const list = (query: Record<string, string | number>, apiKey = key) => t.http.get('/v1/payments').query(query).set('X-API-Key', apiKey);
const amounts = (res: { body: { data: { amount: string }[] } }) => res.body.data.map((p) => p.amount);

beforeAll(async () => {
  t = await startTestService();
  const a = await t.createMerchant('Lister');
  const b = await t.createMerchant('Other lister');
  key = a.apiKey;
  otherKey = b.apiKey;
  await seed(a.merchantId, SEEDS);
  await seed(b.merchantId, [{ status: 'completed', provider: 'cardpay', currency: 'USD', minor: 1000, amount: '10.00', created: '2026-01-01T11:00:00Z' }]);
});
afterAll(async () => t.stop());

describe('GET /v1/payments', () => {
  it('lists only the merchant’s payments, newest first, with meta', async () => {
    const res = await list({});
    expect(res.status).toBe(200);
    expect(res.body.meta).toEqual({ page: 1, page_size: 50, total: 7 });
    expect(amounts(res)).toEqual(['1200', '5.00', '50.00', '1500.00', '99.99', '25.50', '10.00']);
    expect(res.body.data[0]).not.toHaveProperty('provider_response');
  });

  it.each([
    [{ status: 'completed' }, ['1200', '1500.00', '10.00']],
    [{ status: 'reversed' }, ['50.00']],
    [{ status: 'refunded' }, ['5.00']],
    [{ provider: 'mobilemoney' }, ['50.00', '1500.00']],
    [{ currency: 'usd' }, ['5.00', '25.50', '10.00']],
    [{ min_amount: '25.50' }, ['1200', '50.00', '1500.00', '99.99', '25.50']],
    [{ max_amount: '10' }, ['5.00', '10.00']],
    [{ min_amount: '10.00', max_amount: '99.99' }, ['50.00', '99.99', '25.50', '10.00']],
    // since is exclusive (created after it): the row stamped exactly 10:00:00 is not listed, and is from a microsecond before.
    [{ since: '2026-01-05T10:00:00Z' }, ['1200', '5.00']],
    [{ since: '2026-01-05T09:59:59.999999Z' }, ['1200', '5.00', '50.00']],
    [{ until: '2026-01-02T10:00:00Z' }, ['10.00']],
    [{ since: '2026-01-02T00:00:00Z', until: '2026-01-05T00:00:00+00:00' }, ['1500.00', '99.99', '25.50']],
    // Beyond the millisecond (Python's isoformat sends microseconds): a row stamped 10:00:00.000 is before
    // 10:00:00.0005, so outside since and inside until (cut to .000, it was the other way round).
    [{ since: '2026-01-05T10:00:00.0005Z' }, ['1200', '5.00']],
    [{ until: '2026-01-02T10:00:00.000500+00:00' }, ['25.50', '10.00']],
    [{ search: 'NLJ7RT61SV' }, ['1500.00']],
    [{ search: 'nlj7rt61sv' }, ['1500.00']],
    [{ search: 'order-a' }, ['10.00']],
    [{ search: 'nothing-matches' }, []],
    [{ status: 'completed', provider: 'cardpay', currency: 'USD', min_amount: '5', since: '2025-12-31T00:00:00Z' }, ['10.00']],
    [{ status: 'pending', provider: 'cardpay' }, []],
    [{ since: '9999-12-31T23:59:59.9999999Z' }, []],
    // Rounded up past the last microsecond of year 9999: still a bound PostgreSQL reads.
    [{ until: '9999-12-31T23:59:59.9999999Z' }, ['1200', '5.00', '50.00', '1500.00', '99.99', '25.50', '10.00']],
  ])('filters %j', async (query, expected) => {
    const res = await list(query as Record<string, string>);
    expect(res.status).toBe(200);
    expect(amounts(res)).toEqual(expected);
    expect(res.body.meta.total).toBe(expected.length);
  });

  it('a payment is stamped at the instant its created_at shows: since or until set to it leaves it out (both exclusive)', async () => {
    const m = await t.createMerchant('Shown instants');
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: 'sk_test_shown_0001' } }).expect(200);
    const created = await t.http.post('/v1/payments').set('X-API-Key', m.apiKey).set('Idempotency-Key', `shown-${Date.now()}`)
      .send({ provider: 'cardpay', amount: '10.00', currency: 'USD', payment_method: 'pm_card_visa' });
    expect(created.status).toBe(201);
    const shown: string = created.body.data.created_at;
    const ms = new Date(shown).getTime();
    const cases: [Record<string, string>, number][] = [
      [{ since: shown }, 0],
      [{ until: shown }, 0],
      [{ since: new Date(ms - 1).toISOString() }, 1],
      [{ until: new Date(ms + 1).toISOString() }, 1],
    ];
    for (const [query, total] of cases) {
      const res = await list(query, m.apiKey);
      expect([query, res.status, res.body.meta?.total]).toEqual([query, 200, total]);
    }
    // The shown instant is the stored one, to the digit.
    const [stored] = await t.sql<{ same: boolean }>('SELECT created_at = $2::timestamptz AS same FROM payments WHERE id = $1', [created.body.data.id, shown]);
    expect(stored).toEqual({ same: true });
  });

  it('search matches a mobile-money receipt number, not a walletpay capture id kept in the same column (interface.md)', async () => {
    const m = await t.createMerchant('Receipts');
    await seed(m.merchantId, [
      { status: 'completed', provider: 'mobilemoney', currency: 'KES', minor: 10000, amount: '100.00', created: '2026-02-01T10:00:00Z', receipt: 'TKL3XY9ABC' },
      { status: 'completed', provider: 'walletpay', currency: 'USD', minor: 2000, amount: '20.00', created: '2026-02-02T10:00:00Z', receipt: '5TY05013RG002845M', key: 'wallet-order-1' },
    ]);
    const cases: [Record<string, string>, string[]][] = [
      [{ search: 'TKL3XY9ABC' }, ['100.00']],
      [{ search: 'tkl3xy9abc' }, ['100.00']],
      [{ search: '5TY05013RG002845M' }, []],
      [{ search: '5ty05013rg002845m' }, []],
      [{ search: 'wallet-order-1' }, ['20.00']],
    ];
    for (const [query, expected] of cases) {
      const res = await list(query, m.apiKey);
      expect([query, res.status, amounts(res), res.body.meta?.total]).toEqual([query, 200, expected, expected.length]);
    }
  });

  it('compares since and until at the microsecond rows are stamped with (payments, refunds, events)', async () => {
    // Payments created before Migration20261129140500 were stamped by now() (microseconds), and bounds may
    // carry them: a row at .mmm700 is after .mmm5 (.mmm500), and before .mmm7001.
    // Both bounds are exclusive; finer than a microsecond, since rounds down and until up (both exact).
    const m = await t.createMerchant('Microseconds');
    const ms = new Date(Date.now() - 3_600_000).toISOString().slice(0, 23); // recent: events are listed within retention
    const stamped = `${ms}700Z`;
    await seed(m.merchantId, [{ status: 'completed', provider: 'cardpay', currency: 'USD', minor: 1000, amount: '10.00', created: stamped }]);
    const [payment] = await t.sql<{ id: string }>('SELECT id FROM payments WHERE merchant_id = $1', [m.merchantId]);
    await t.sql("INSERT INTO refunds (id, payment_id, merchant_id, status, amount_minor, currency, created_at, updated_at) VALUES ($1, $2, $3, 'pending', 100, 'USD', $4, $4)", [randomUUID(), payment!.id, m.merchantId, stamped]);
    await t.sql("INSERT INTO events (id, merchant_id, type, payload, body, created_at) VALUES ($1, $2, 'payment.completed', '{}'::jsonb, '{}', $3)", [randomUUID(), m.merchantId, stamped]);
    const cases: [Record<string, string>, number][] = [
      [{ since: `${ms}5Z` }, 1],
      [{ until: `${ms}5Z` }, 0],
      [{ since: `${ms}500+00:00` }, 1],
      [{ since: stamped }, 0], // since is exclusive: a row stamped exactly at it is not listed
      [{ since: `${ms}699Z` }, 1], // a row a microsecond after since is
      [{ until: stamped }, 0],
      [{ since: `${ms}7001Z` }, 0],
      [{ until: `${ms}7001Z` }, 1],
      [{ since: `${ms}5Z`, until: `${ms}7001Z` }, 1],
      // Nine digits: the row (.mmm700) is after .mmm699500 (rounded up to .mmm700, since would exclude it)…
      [{ since: `${ms}699500Z` }, 1],
      [{ since: `${ms}700500Z` }, 0],
      // …and before .mmm700001 (rounded down to .mmm700, until would exclude it).
      [{ until: `${ms}700001Z` }, 1],
      [{ until: `${ms}699999Z` }, 0],
      [{ since: `${ms}699500Z`, until: `${ms}700001Z` }, 1],
    ];
    for (const [query, total] of cases) {
      for (const path of ['/v1/payments', '/v1/refunds', '/v1/events']) {
        const res = await t.http.get(path).query(query).set('X-API-Key', m.apiKey);
        expect([path, query, res.status, res.body.meta?.total]).toEqual([path, query, 200, total]);
      }
    }
  });

  it('paginates with page and page_size and reports the total', async () => {
    const first = await list({ page_size: 3 });
    const second = await list({ page_size: 3, page: 2 });
    const third = await list({ page_size: 3, page: 3 });
    const beyond = await list({ page_size: 3, page: 9 });
    expect(amounts(first)).toEqual(['1200', '5.00', '50.00']);
    expect(amounts(second)).toEqual(['1500.00', '99.99', '25.50']);
    expect(amounts(third)).toEqual(['10.00']);
    expect(beyond.body).toEqual({ success: true, data: [], meta: { page: 9, page_size: 3, total: 7 } });
  });

  it('an empty result is data [] and total 0', async () => {
    const res = await list({ currency: 'GBP' });
    expect(res.body).toEqual({ success: true, data: [], meta: { page: 1, page_size: 50, total: 0 } });
  });

  it.each([
    [{ page_size: 101 }, 'page_size'],
    [{ page_size: 0 }, 'page_size'],
    [{ page: 0 }, 'page'],
    [{ page: 'two' }, 'page'],
    [{ page: '100000000000000000000000' }, 'page'],
    [{ status: 'settled' }, 'status'],
    [{ provider: 'paypal' }, 'provider'],
    [{ currency: 'dollars' }, 'currency'],
    [{ currency: 'ZZZ' }, 'currency'],
    [{ min_amount: '-1' }, 'min_amount'],
    [{ since: 'yesterday' }, 'since'],
    [{ colour: 'red' }, 'colour'],
    [{ min_amount: '20', max_amount: '10' }, 'min_amount'],
    [{ since: '2026-02-01T00:00:00Z', until: '2026-01-01T00:00:00Z' }, 'since'],
    [{ since: '2026-01-01T00:00:00.0007Z', until: '2026-01-01T00:00:00.0005Z' }, 'since'],
    // Compared as sent, not as rounded (since down to .000700, until up to .000701).
    [{ since: '2026-01-01T00:00:00.0007005Z', until: '2026-01-01T00:00:00.0007003Z' }, 'since'],
  ])('refuses %j with 422 naming the field (never clamps)', async (query, field) => {
    const res = await list(query as Record<string, string>);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
  });

  it.each(['XXX', 'xts', 'XAU', 'XDR', 'USN'])('refuses currency=%s, a code no payment can have, with 422 as a create does', async (code) => {
    const res = await list({ currency: code });
    expect([res.status, res.body.error?.code, res.body.error?.details]).toEqual([
      422, 'VALIDATION_ERROR', [{ field: 'currency', issue: `must be a currency payments can be made in (${code.toUpperCase()} is not money)` }],
    ]);
    expect(res.body.error.message).toBe(`Invalid request: currency must be a currency payments can be made in (${code.toUpperCase()} is not money)`);
  });

  it('another merchant sees only its own payment', async () => {
    const res = await list({}, otherKey);
    expect(res.body.meta.total).toBe(1);
  });
});
