import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/** The cardpay simulator's wire protocol, spoken by hand: form bodies, auth, errors, idempotency, tenancy. */
let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t.stop());

const newKey = () => `sk_test_${randomUUID().replace(/-/g, '')}`;
const base = '/sandbox/cardpay';
const post = (key: string, path: string, form: Record<string, string>) =>
  t.http.post(`${base}${path}`).set('Authorization', `Bearer ${key}`).type('form').send(form);
const get = (key: string, path: string) => t.http.get(`${base}${path}`).set('Authorization', `Bearer ${key}`);
/** A form body exactly as written (e.g. what `new URLSearchParams(obj)` makes of an array: `a=x`, no brackets). */
const postRaw = (key: string, path: string, body: string) =>
  t.http.post(`${base}${path}`).set('Authorization', `Bearer ${key}`).set('Content-Type', 'application/x-www-form-urlencoded').send(body);

/** The simulator's page `url` (absolute, as answered) with `query` added, as a path for t.http. */
const withQuery = (url: string, query: string) => {
  const u = new URL(url);
  return `${u.pathname}${u.search ? `${u.search}&` : '?'}${query}`;
};

const visaForm = (extra: Record<string, string> = {}) => ({
  amount: '2000',
  currency: 'USD',
  payment_method: 'pm_card_visa',
  confirm: 'true',
  'automatic_payment_methods[enabled]': 'true',
  'automatic_payment_methods[allow_redirects]': 'never',
  ...extra,
});

describe('authentication', () => {
  it('takes the key as Bearer or as the Basic username', async () => {
    const key = newKey();
    const created = await post(key, '/v1/payment_intents', visaForm()).expect(200);
    const basic = Buffer.from(`${key}:`).toString('base64');
    const read = await t.http.get(`${base}/v1/payment_intents/${created.body.id}`).set('Authorization', `Basic ${basic}`).expect(200);
    expect(read.body.id).toBe(created.body.id);
  });

  it('answers 401 in Stripe’s error shape without a key or with a refused one', async () => {
    const none = await t.http.post(`${base}/v1/payment_intents`).type('form').send(visaForm()).expect(401);
    expect(none.body).toEqual({ error: { type: 'invalid_request_error', message: expect.stringContaining('You did not provide an API key') } });
    const bad = await post('sk_test_revoked_key_revoked', '/v1/payment_intents', visaForm()).expect(401);
    expect(bad.body.error.message).toMatch(/^Invalid API Key provided: sk_test_\*\*\*\*/);
    expect(JSON.stringify(bad.body)).not.toContain('sk_test_revoked_key_revoked');
  });

  it('objects belong to the key that made them', async () => {
    const created = await post(newKey(), '/v1/payment_intents', visaForm()).expect(200);
    const other = await get(newKey(), `/v1/payment_intents/${created.body.id}`).expect(404);
    expect(other.body.error).toMatchObject({ type: 'invalid_request_error', code: 'resource_missing', param: 'id' });
  });
});

describe('payment intents', () => {
  it('decodes bracket syntax and keeps values with quotes and question marks intact', async () => {
    const key = newKey();
    const res = await post(key, '/v1/payment_intents', {
      ...visaForm(),
      'metadata[payment_id]': 'p-1',
      'metadata[note]': "it's ? a 'test'",
      description: 'What?',
    }).expect(200);
    expect(res.body).toMatchObject({
      object: 'payment_intent',
      amount: 2000,
      currency: 'usd',
      status: 'succeeded',
      description: 'What?',
      metadata: { payment_id: 'p-1', note: "it's ? a 'test'" },
      automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
      latest_charge: expect.stringMatching(/^ch_/),
    });
    expect(res.body.client_secret).toMatch(new RegExp(`^${res.body.id}_secret_`));
    expect(res.headers['request-id']).toMatch(/^req_/);
  });

  it('refuses unknown and missing parameters with 400 naming the parameter', async () => {
    const key = newKey();
    const unknown = await post(key, '/v1/payment_intents', visaForm({ colour: 'red' })).expect(400);
    expect(unknown.body.error).toMatchObject({ type: 'invalid_request_error', code: 'parameter_unknown', param: 'colour' });
    const { amount: _a, ...noAmount } = visaForm();
    const missing = await post(key, '/v1/payment_intents', noAmount).expect(400);
    expect(missing.body.error).toMatchObject({ code: 'parameter_missing', param: 'amount' });
    const redirects = await post(key, '/v1/payment_intents', { ...visaForm(), 'automatic_payment_methods[allow_redirects]': 'always' }).expect(400);
    expect(redirects.body.error.param).toBe('return_url');
  });

  it('a decline is 402 card_error with the intent in requires_payment_method', async () => {
    const res = await post(newKey(), '/v1/payment_intents', visaForm({ payment_method: 'pm_card_visa_chargeDeclined' })).expect(402);
    expect(res.body.error).toMatchObject({
      type: 'card_error',
      code: 'card_declined',
      decline_code: 'generic_decline',
      message: 'Your card was declined.',
      charge: expect.stringMatching(/^ch_/),
      payment_intent: { status: 'requires_payment_method', payment_method: null, last_payment_error: { code: 'card_declined' } },
    });
  });

  it('an off-session 3-D Secure charge is declined with authentication_required', async () => {
    const key = newKey();
    const customer = await post(key, '/v1/customers', { email: 'a@example.com' }).expect(200);
    const pm = await post(key, '/v1/payment_methods/pm_card_threeDSecure2Required/attach', { customer: customer.body.id }).expect(200);
    const res = await post(key, '/v1/payment_intents', visaForm({ payment_method: pm.body.id, customer: customer.body.id, off_session: 'true' })).expect(402);
    expect(res.body.error).toMatchObject({ code: 'authentication_required', decline_code: 'authentication_required' });
    // Using the attached method without its customer is refused.
    await post(key, '/v1/payment_intents', visaForm({ payment_method: pm.body.id })).expect(400);
  });

  it('the 3-D Secure page answers only its URL with the secret: the public pi_… id alone neither shows nor settles the payment', async () => {
    const key = newKey();
    const threeDs = () => post(key, '/v1/payment_intents', visaForm({ payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r', 'automatic_payment_methods[allow_redirects]': 'always' })).expect(200);
    const pending = await threeDs();
    // Whoever saw the provider_ref (GET /v1/payments, a webhook, the dashboard) has the id, not the secret.
    const byId = `${base}/3ds/${pending.body.id}`;
    await t.http.get(`${byId}?auto=complete`).expect(404);
    await t.http.get(`${byId}?auto=fail`).expect(404);
    await t.http.get(byId).expect(404);
    await t.http.post(`${byId}/complete`).expect(404);
    await t.http.post(`${byId}/fail?client_secret=src_client_secret_${'x'.repeat(24)}`).expect(404);
    // Another intent's secret opens only that intent's page.
    const other = new URL((await threeDs()).body.next_action.redirect_to_url.url).searchParams.get('client_secret');
    await t.http.get(`${byId}?auto=complete&client_secret=${other}`).expect(404);
    expect((await get(key, `/v1/payment_intents/${pending.body.id}`)).body.status).toBe('requires_action');

    // Stripe's shape: …/authenticate/src_…?client_secret=src_client_secret_…
    const answered = new URL(pending.body.next_action.redirect_to_url.url);
    expect(answered.pathname).toBe(`${base}/3ds/${pending.body.id}`);
    expect(answered.searchParams.get('client_secret')).toMatch(/^src_client_secret_[A-Za-z0-9]{24}$/);
    expect(other).not.toBe(answered.searchParams.get('client_secret'));

    const page = await t.http.get(`${answered.pathname}${answered.search}`).expect(200);
    expect(page.text).toContain(`action="${pending.body.id}/complete?client_secret=${answered.searchParams.get('client_secret')}"`);
    const done = await t.http.get(withQuery(answered.toString(), 'auto=complete')).expect(302);
    expect(done.headers.location).toMatch(/^https:\/\/shop\.example\.com\/r\?payment_intent=/);
    expect((await get(key, `/v1/payment_intents/${pending.body.id}`)).body.status).toBe('succeeded');
  });

  it('cancels an intent awaiting 3-D Secure; a succeeded one cannot be canceled', async () => {
    const key = newKey();
    const pending = await post(key, '/v1/payment_intents', visaForm({ payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/r', 'automatic_payment_methods[allow_redirects]': 'always' })).expect(200);
    expect(pending.body.status).toBe('requires_action');
    const canceled = await post(key, `/v1/payment_intents/${pending.body.id}/cancel`, { cancellation_reason: 'abandoned' }).expect(200);
    expect(canceled.body).toMatchObject({ status: 'canceled', cancellation_reason: 'abandoned', canceled_at: expect.any(Number), next_action: null });
    // The 3-D Secure page no longer settles it.
    await t.http.get(withQuery(pending.body.next_action.redirect_to_url.url, 'auto=complete')).expect(302);
    expect((await get(key, `/v1/payment_intents/${pending.body.id}`)).body.status).toBe('canceled');

    const done = await post(key, '/v1/payment_intents', visaForm()).expect(200);
    const refused = await post(key, `/v1/payment_intents/${done.body.id}/cancel`, {}).expect(400);
    expect(refused.body.error.code).toBe('payment_intent_unexpected_state');
  });

  it('an unknown route and an unknown 3-D Secure page are 404s', async () => {
    const route = await get(newKey(), '/v1/nothing_here').expect(404);
    expect(route.body.error.type).toBe('invalid_request_error');
    await t.http.get(`${base}/3ds/pi_unknown`).expect(404);
  });
});

describe('idempotency', () => {
  it('replays the stored answer with Idempotent-Replayed; other parameters are an idempotency_error', async () => {
    const key = newKey();
    const idem = randomUUID();
    const first = await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(200);
    const again = await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(200);
    expect(again.body).toEqual(first.body);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const different = await post(key, '/v1/payment_intents', visaForm({ amount: '2001' })).set('Idempotency-Key', idem).expect(400);
    expect(different.body.error.type).toBe('idempotency_error');
    // Keys are per secret key: another key may use the same one.
    const otherKey = await post(newKey(), '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(200);
    expect(otherKey.body.id).not.toBe(first.body.id);
    // A key over 255 characters: Stripe's invalid_request_error, no code, nothing created.
    const long = await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', 'k'.repeat(256)).expect(400);
    expect(long.body.error).toEqual({ type: 'invalid_request_error', message: expect.stringMatching(/^Idempotent key length is 256, which is outside accepted lengths\. Idempotent Keys must be 1-255 characters long\./) });
  });

  it('identical concurrent requests with one key do the work once: the others are 409 idempotency_key_in_use or, arriving after, the replay', async () => {
    const key = newKey();
    const idem = randomUUID();
    // A create only writes: the first to commit stores its answer; the others fail on the key.
    const creates = await Promise.all(Array.from({ length: 5 }, () => post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem)));
    expect(creates.filter((r) => r.status === 200 && r.headers['idempotent-replayed'] !== 'true')).toHaveLength(1);
    for (const r of creates) {
      if (r.status === 409) expect(r.body.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_key_in_use' });
      else expect(r.status).toBe(200);
    }
    const intentId = creates.find((r) => r.status === 200)!.body.id;
    expect(new Set(creates.filter((r) => r.status === 200).map((r) => r.body.id))).toEqual(new Set([intentId]));
    expect((await get(key, '/v1/payment_intents').expect(200)).body.data).toHaveLength(1);
    // Once it is done, the key answers what the first did.
    expect((await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(200)).body.id).toBe(intentId);
  });

  it('a request whose key another request is still using is answered 409 at once (not made to wait) and stores nothing; a retry after gets the first answer', async () => {
    const key = newKey();
    const intent = await post(key, '/v1/payment_intents', visaForm({ amount: '3000' })).expect(200);
    const refundKey = randomUUID();
    // The first refund is kept in progress: something else holds its intent's row, which a refund locks.
    const holder = new pg.Client({ connectionString: t.databaseUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sandbox_cardpay_intents WHERE id = $1 FOR UPDATE', [intent.body.id]);
      const first = post(key, '/v1/refunds', { payment_intent: intent.body.id, amount: '500' }).set('Idempotency-Key', refundKey).then((r) => r);
      await eventually(
        async () => (await t.sql(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM sandbox_cardpay_intents%FOR UPDATE%'`)).length > 0,
        10_000,
        'the first refund to wait on the intent',
      );
      let second: { status: number; body: { error?: unknown } } | null = null;
      void post(key, '/v1/refunds', { payment_intent: intent.body.id, amount: '500' }).set('Idempotency-Key', refundKey).then((r) => (second = r));
      await eventually(() => second !== null, 10_000, 'the second request to be answered while the first is still running');
      expect(second!.status).toBe(409);
      expect(second!.body).toEqual({
        error: {
          type: 'idempotency_error',
          code: 'idempotency_key_in_use',
          doc_url: expect.stringContaining('idempotency-key-in-use'),
          message: `There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): ${refundKey}. Please try again later.`,
        },
      });
      await holder.query('COMMIT');
      const done = await first;
      expect(done.status).toBe(200);
      const retry = await post(key, '/v1/refunds', { payment_intent: intent.body.id, amount: '500' }).set('Idempotency-Key', refundKey).expect(200);
      expect(retry.body.id).toBe(done.body.id);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect((await get(key, `/v1/refunds?payment_intent=${intent.body.id}`).expect(200)).body.data).toHaveLength(1);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  });

  it('a confirmed create with a test card costs the simulator two round trips to PostgreSQL (db_round_trips_total)', async () => {
    const sandboxTrips = async () => Number(/^db_round_trips_total\{pool="sandbox"\} (\S+)$/m.exec((await t.http.get('/metrics').expect(200)).text)?.[1] ?? 0);
    const key = newKey();
    const before = await sandboxTrips();
    await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', randomUUID()).expect(200);
    // One statement reads the switches and the key's stored answer; one writes everything and commits.
    expect((await sandboxTrips()) - before).toBe(2);
  });

  it('a request that failed validation is not stored: the key can be used again', async () => {
    const key = newKey();
    const idem = randomUUID();
    await post(key, '/v1/payment_intents', visaForm({ payment_method: 'pm_nope' })).set('Idempotency-Key', idem).expect(400);
    const ok = await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(200);
    expect(ok.body.status).toBe('succeeded');
  });
});

/**
 * Stripe saves the status code and body of the first request with a key once the endpoint began to run,
 * whether it succeeded or failed: repeats with the key get the same answer, a 500 too, until the key is
 * pruned (24 h); what failed validation before running is not saved (docs.stripe.com/api/idempotent_requests).
 * The api-errors control makes an account's next requests that change something fail so: carried out and
 * committed, then answered 500 api_error, and that 500 stored under the key.
 */
describe('a 500 after the request ran (the api-errors control)', () => {
  const arm = (key: string, count: number) => t.http.post(`${base}/_control/api-errors`).set('Authorization', `Bearer ${key}`).send({ count });
  const API_ERROR = { error: { type: 'api_error', message: 'An unknown error occurred.' } };

  it('is stored under the idempotency key: repeats get the same 500 until the key expires; a new key runs', async () => {
    const key = newKey();
    const idem = randomUUID();
    expect((await arm(key, 1).expect(200)).body).toEqual({ provider: 'cardpay', api_errors: 1 });
    // Failing validation, a request never began to run: answered 400, not stored, the countdown not spent.
    const invalid = randomUUID();
    await post(key, '/v1/payment_intents', visaForm({ payment_method: 'pm_nope' })).set('Idempotency-Key', invalid).expect(400);
    // Another account's requests are not failed.
    await post(newKey(), '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(200);
    const first = await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(500);
    expect(first.body).toEqual(API_ERROR);
    // It ran: the intent was made and the card charged, as a Stripe 500 leaves possible.
    const [made, ...others] = (await get(key, '/v1/payment_intents').expect(200)).body.data as { id: string; status: string; amount: number }[];
    expect(others).toEqual([]);
    expect(made).toMatchObject({ status: 'succeeded', amount: 2000 });
    // The same key: the same 500, replayed, nothing run again (the countdown is spent, so this is the stored answer).
    const again = await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(500);
    expect(again.body).toEqual(API_ERROR);
    expect(again.headers['idempotent-replayed']).toBe('true');
    // Other parameters with the key: still Stripe's idempotency_error.
    expect((await post(key, '/v1/payment_intents', visaForm({ amount: '2001' })).set('Idempotency-Key', idem).expect(400)).body.error.type).toBe('idempotency_error');
    // The key that failed validation stored nothing: it runs now.
    expect((await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', invalid).expect(200)).body.status).toBe('succeeded');
    // A new key runs normally.
    const fresh = await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', randomUUID()).expect(200);
    expect(fresh.body.id).not.toBe(made!.id);
    // A day later the key is pruned (by the account's next request with a key): the same request then runs as a new one.
    await t.sql(`UPDATE sandbox_cardpay_idempotency SET created_at = created_at - interval '25 hours' WHERE idempotency_key = $1`, [idem]);
    await post(key, '/v1/customers', {}).set('Idempotency-Key', randomUUID()).expect(200);
    const later = await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', idem).expect(200);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect((await get(key, '/v1/payment_intents').expect(200)).body.data).toHaveLength(4);
  });

  it('counts down the next n requests that change something, with or without a key; {"count": 0} switches it off', async () => {
    const key = newKey();
    await arm(key, 2).expect(200);
    await post(key, '/v1/customers', {}).expect(500);
    await post(key, '/v1/payment_intents', visaForm()).set('Idempotency-Key', randomUUID()).expect(500);
    await post(key, '/v1/customers', {}).expect(200);
    await arm(key, 3).expect(200);
    await arm(key, 0).expect(200, { provider: 'cardpay', api_errors: 0 });
    await post(key, '/v1/customers', {}).expect(200);
    // Reads are never failed.
    await arm(key, 1).expect(200);
    await get(key, '/v1/payment_intents').expect(200);
    await arm(key, 0).expect(200);
  });

  it('is refused without a valid secret key (it names the account) or a whole count', async () => {
    await t.http.post(`${base}/_control/api-errors`).send({ count: 1 }).expect(401);
    await arm('sk_test_invalid_key_0001', 1).expect(401);
    await arm(newKey(), -1).expect(400);
    await arm(newKey(), 1.5).expect(400);
  });
});

describe('payment methods attached to no customer are single-use', () => {
  const singleUse = {
    type: 'invalid_request_error',
    code: 'payment_method_unexpected_state',
    param: 'payment_method',
    message:
      'The provided PaymentMethod was previously used with a PaymentIntent without Customer attachment, shared with a connected account without Customer attachment, or was detached from a Customer. It may not be used again. To use a PaymentMethod multiple times, you must attach it to a Customer first.',
  };

  it('a PaymentMethod confirmed with one intent cannot be used with another, nor attached to a customer: 400, nothing created', async () => {
    const key = newKey();
    const first = await post(key, '/v1/payment_intents', visaForm()).expect(200);
    const pm = first.body.payment_method as string;
    expect(pm).toMatch(/^pm_/);
    const again = await post(key, '/v1/payment_intents', visaForm({ payment_method: pm })).expect(400);
    expect(again.body.error).toMatchObject(singleUse);
    // Nor by setting it on an open intent and confirming that.
    const open = await post(key, '/v1/payment_intents', { amount: '1000', currency: 'usd', 'automatic_payment_methods[enabled]': 'true', 'automatic_payment_methods[allow_redirects]': 'never' }).expect(200);
    expect((await post(key, `/v1/payment_intents/${open.body.id}/confirm`, { payment_method: pm }).expect(400)).body.error).toMatchObject(singleUse);
    const customer = await post(key, '/v1/customers', { email: 'once@example.com' }).expect(200);
    const attach = await post(key, `/v1/payment_methods/${pm}/attach`, { customer: customer.body.id }).expect(400);
    expect(attach.body.error).toMatchObject({ type: singleUse.type, code: singleUse.code, message: singleUse.message });
    expect((await get(key, '/v1/payment_intents').expect(200)).body.data.map((i: { id: string }) => i.id).sort()).toEqual([first.body.id, open.body.id].sort());
    expect((await get(key, `/v1/payment_intents/${open.body.id}`).expect(200)).body.status).toBe('requires_payment_method');
  });

  it('set on an intent and not yet confirmed, it is not used up: another intent may be confirmed with it, and then the first may not', async () => {
    const key = newKey();
    const pm = (await post(key, '/v1/payment_intents', visaForm({ confirm: 'false', 'automatic_payment_methods[allow_redirects]': 'never' })).expect(200)).body;
    expect(pm.status).toBe('requires_confirmation');
    const other = await post(key, '/v1/payment_intents', visaForm({ payment_method: pm.payment_method })).expect(200);
    expect(other.body.status).toBe('succeeded');
    expect((await post(key, `/v1/payment_intents/${pm.id}/confirm`, {}).expect(400)).body.error).toMatchObject(singleUse);
  });

  it('test tokens make a fresh PaymentMethod each time, and one attached to a customer is charged again and again', async () => {
    const key = newKey();
    const a = await post(key, '/v1/payment_intents', visaForm()).expect(200);
    const b = await post(key, '/v1/payment_intents', visaForm()).expect(200);
    expect(a.body.payment_method).not.toBe(b.body.payment_method);
    const customer = await post(key, '/v1/customers', { email: 'saved@example.com' }).expect(200);
    const saved = await post(key, '/v1/payment_methods/pm_card_visa/attach', { customer: customer.body.id }).expect(200);
    for (let i = 0; i < 2; i++) {
      const charged = await post(key, '/v1/payment_intents', visaForm({ customer: customer.body.id, payment_method: saved.body.id, off_session: 'true' }));
      expect(charged.status).toBe(200);
      expect(charged.body.status).toBe('succeeded');
    }
  });
});

describe('refunds and charges', () => {
  it('concurrent refunds with different keys never refund more than the charge', async () => {
    const key = newKey();
    const intent = await post(key, '/v1/payment_intents', visaForm({ amount: '1000' })).expect(200);
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => post(key, '/v1/refunds', { payment_intent: intent.body.id, amount: '300' }).set('Idempotency-Key', randomUUID())),
    );
    // 1000 refunds as three 300s; the other five are refused as too large, whichever request came first.
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 400, 400, 400, 400, 400]);
    expect(answers.filter((a) => a.status === 400).map((a) => a.body.error.code)).toEqual(Array(5).fill('amount_too_large'));
    const charge = await get(key, `/v1/charges/${intent.body.latest_charge}`).expect(200);
    expect(charge.body).toMatchObject({ object: 'charge', amount: 1000, amount_refunded: 900, refunded: false, payment_intent: intent.body.id });
    // Since API 2022-11-15 a charge does not embed its refunds: list them by charge, or expand.
    expect(charge.body).not.toHaveProperty('refunds');
    const listed = await get(key, `/v1/refunds?charge=${intent.body.latest_charge}`).expect(200);
    expect(listed.body).toMatchObject({ object: 'list', has_more: false, url: '/v1/refunds' });
    expect(listed.body.data).toHaveLength(3);
    const expanded = await get(key, `/v1/charges/${intent.body.latest_charge}?expand[]=refunds`).expect(200);
    expect(expanded.body.refunds.data).toHaveLength(3);
  });

  it('refunds by charge id; no amount refunds the remainder', async () => {
    const key = newKey();
    const intent = await post(key, '/v1/payment_intents', visaForm({ amount: '500' })).expect(200);
    const refund = await post(key, '/v1/refunds', { charge: intent.body.latest_charge, reason: 'requested_by_customer' }).expect(200);
    expect(refund.body).toMatchObject({ object: 'refund', amount: 500, status: 'succeeded', charge: intent.body.latest_charge, payment_intent: intent.body.id, reason: 'requested_by_customer' });
    expect((await get(key, `/v1/refunds/${refund.body.id}`).expect(200)).body.id).toBe(refund.body.id);
    const again = await post(key, '/v1/refunds', { payment_intent: intent.body.id }).expect(400);
    expect(again.body.error.code).toBe('charge_already_refunded');
  });
});

describe('webhook endpoints', () => {
  it('creates (secret shown once), lists, reads and deletes endpoints', async () => {
    const key = newKey();
    const created = await post(key, '/v1/webhook_endpoints', { url: 'https://shop.example.com/hook', 'enabled_events[0]': 'payment_intent.succeeded', 'enabled_events[1]': 'charge.refunded' }).expect(200);
    expect(created.body).toMatchObject({ object: 'webhook_endpoint', url: 'https://shop.example.com/hook', enabled_events: ['payment_intent.succeeded', 'charge.refunded'], status: 'enabled' });
    expect(created.body.secret).toMatch(/^whsec_/);
    const read = await get(key, `/v1/webhook_endpoints/${created.body.id}`).expect(200);
    expect(read.body).not.toHaveProperty('secret');
    const list = await get(key, '/v1/webhook_endpoints').expect(200);
    expect(list.body.data.map((e: { id: string }) => e.id)).toEqual([created.body.id]);
    await t.http.delete(`${base}/v1/webhook_endpoints/${created.body.id}`).set('Authorization', `Bearer ${key}`).expect(200, { id: created.body.id, object: 'webhook_endpoint', deleted: true });
    await get(key, `/v1/webhook_endpoints/${created.body.id}`).expect(404);
    const bad = await post(key, '/v1/webhook_endpoints', { url: 'ftp://x', 'enabled_events[0]': '*' }).expect(400);
    expect(bad.body.error.param).toBe('url');
  });

  it("keeps an endpoint's api_version (the version its events are rendered in) and shows it on every read; none given is null (the account's default)", async () => {
    const key = newKey();
    const pinned = await post(key, '/v1/webhook_endpoints', { url: 'https://shop.example.com/pinned', 'enabled_events[0]': '*', api_version: '2024-06-20' }).expect(200);
    expect(pinned.body.api_version).toBe('2024-06-20');
    expect((await get(key, `/v1/webhook_endpoints/${pinned.body.id}`).expect(200)).body.api_version).toBe('2024-06-20');
    const unpinned = await post(key, '/v1/webhook_endpoints', { url: 'https://shop.example.com/default', 'enabled_events[0]': '*' }).expect(200);
    expect(unpinned.body.api_version).toBeNull();
    const list = await get(key, '/v1/webhook_endpoints').expect(200);
    expect(Object.fromEntries(list.body.data.map((e: { id: string; api_version: string | null }) => [e.id, e.api_version]))).toEqual({
      [pinned.body.id]: '2024-06-20', [unpinned.body.id]: null,
    });
  });
});

describe('array parameters sent without brackets', () => {
  // Stripe refuses `enabled_events=charge.succeeded` (a client that form-encoded an array with URLSearchParams)
  // and `expand=latest_invoice` (stripe-cli 0.2.2) with this exact error; a merchant's broken encoder must fail here too.
  const invalidArray = (param: string) => ({ error: { type: 'invalid_request_error', message: 'Invalid array', param } });

  it('a webhook endpoint with enabled_events=<one event> is 400 Invalid array and is not created', async () => {
    const key = newKey();
    const res = await postRaw(key, '/v1/webhook_endpoints', 'url=https%3A%2F%2Fshop.example.com%2Fhook&enabled_events=payment_intent.succeeded').expect(400);
    expect(res.body).toEqual(invalidArray('enabled_events'));
    expect((await get(key, '/v1/webhook_endpoints').expect(200)).body.data).toEqual([]);
    // With brackets, the same registration succeeds.
    await postRaw(key, '/v1/webhook_endpoints', 'url=https%3A%2F%2Fshop.example.com%2Fhook&enabled_events[]=payment_intent.succeeded').expect(200);
  });

  it('payment_method_types=card and expand=latest_charge are 400 Invalid array; nothing is created', async () => {
    const key = newKey();
    const form = 'amount=2000&currency=usd&payment_method=pm_card_visa&confirm=true';
    const types = await postRaw(key, '/v1/payment_intents', `${form}&payment_method_types=card`).expect(400);
    expect(types.body).toEqual(invalidArray('payment_method_types'));
    const expandOnCreate = await postRaw(key, '/v1/payment_intents', `${form}&payment_method_types[]=card&expand=latest_charge`).expect(400);
    expect(expandOnCreate.body).toEqual(invalidArray('expand'));
    expect((await get(key, '/v1/payment_intents').expect(200)).body.data).toEqual([]);

    const created = await postRaw(key, '/v1/payment_intents', `${form}&payment_method_types[]=card&expand[]=latest_charge`).expect(200);
    expect(created.body.latest_charge).toMatchObject({ object: 'charge' });
    const read = await get(key, `/v1/payment_intents/${created.body.id}?expand=latest_charge`).expect(400);
    expect(read.body).toEqual(invalidArray('expand'));
    expect((await get(key, `/v1/payment_intents/${created.body.id}?expand[0]=latest_charge`).expect(200)).body.latest_charge).toMatchObject({ object: 'charge' });
  });
});

describe('customers and payment methods of another type', () => {
  it("finds customers by metadata with search; a deleted customer is gone, its payment methods detached", async () => {
    const key = newKey();
    const ours = (await post(key, '/v1/customers', { 'metadata[saved_card_id]': 'card-1', email: 'a@example.com' }).expect(200)).body;
    await post(key, '/v1/customers', { 'metadata[saved_card_id]': 'card-2' }).expect(200);
    const found = await get(key, `/v1/customers/search?query=${encodeURIComponent("metadata['saved_card_id']:'card-1'")}`).expect(200);
    expect(found.body).toMatchObject({ object: 'search_result', data: [{ id: ours.id, metadata: { saved_card_id: 'card-1' } }], has_more: false });
    // Another key's account does not see it.
    expect((await get(newKey(), `/v1/customers/search?query=${encodeURIComponent("metadata['saved_card_id']:'card-1'")}`).expect(200)).body.data).toEqual([]);
    expect((await get(key, `/v1/customers/search?query=${encodeURIComponent('name~"x"')}`).expect(400)).body.error.param).toBe('query');

    const pm = (await post(key, '/v1/payment_methods/pm_card_visa/attach', { customer: ours.id }).expect(200)).body;
    expect((await t.http.delete(`${base}/v1/customers/${ours.id}`).set('Authorization', `Bearer ${key}`).expect(200)).body).toEqual({ id: ours.id, object: 'customer', deleted: true });
    expect((await get(key, `/v1/payment_methods/${pm.id}`).expect(200)).body.customer).toBeNull();
    await get(key, `/v1/customers/${ours.id}`).expect(404);
    expect((await get(key, `/v1/customers/search?query=${encodeURIComponent("metadata['saved_card_id']:'card-1'")}`).expect(200)).body.data).toEqual([]);
    await t.http.delete(`${base}/v1/customers/${ours.id}`).set('Authorization', `Bearer ${key}`).expect(404);
  });

  it('pm_usBankAccount_success reads as a us_bank_account, attaches as one (listed by its type, not as a card), and no intent takes it', async () => {
    const key = newKey();
    const read = (await get(key, '/v1/payment_methods/pm_usBankAccount_success').expect(200)).body;
    expect(read).toMatchObject({ type: 'us_bank_account', customer: null, us_bank_account: { last4: '6789', routing_number: '110000000' } });
    expect(read.card).toBeUndefined();
    const customer = (await post(key, '/v1/customers', {}).expect(200)).body;
    const attached = (await post(key, '/v1/payment_methods/pm_usBankAccount_success/attach', { customer: customer.id }).expect(200)).body;
    expect(attached).toMatchObject({ id: expect.stringMatching(/^pm_/), type: 'us_bank_account', customer: customer.id });
    expect((await get(key, `/v1/customers/${customer.id}/payment_methods?type=card`).expect(200)).body.data).toEqual([]);
    expect((await get(key, `/v1/customers/${customer.id}/payment_methods?type=us_bank_account`).expect(200)).body.data.map((m: { id: string }) => m.id)).toEqual([attached.id]);
    expect((await get(key, `/v1/customers/${customer.id}/payment_methods`).expect(200)).body.data.map((m: { id: string }) => m.id)).toEqual([attached.id]);
    const charge = await post(key, '/v1/payment_intents', visaForm({ payment_method: attached.id, customer: customer.id })).expect(400);
    expect(charge.body.error.message).toContain('us_bank_account');
  });
});
