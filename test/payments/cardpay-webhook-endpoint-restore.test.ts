import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { CARDPAY_API_VERSION, CardpayClients } from '../../server/providers/cardpay/client.js';
import { ForwardingStub, jsonAnswer, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';

/**
 * Storing cardpay credentials again without a webhook_secret registers a new webhook endpoint for the
 * merchant. The endpoint the stored credentials use must keep delivering until the new secret is stored:
 * a registration that fails at the provider must leave the merchant receiving the provider's events.
 */

/**
 * In front of the simulator: answers POST /v1/webhook_endpoints 500 while `failCreate`, a DELETE of one 500
 * while `failDelete`; with `failNextCreate`, the next creation is answered 500 and, as Stripe keeps the
 * answer of a request that started (a 500 included) under its Idempotency-Key, so is every later one
 * with that key. While `holdList` is set, a listing of the endpoints (the clean-up's first call) waits for
 * it, and `listHeld` is called. A listing with the key `refuseListFor` is refused 403, as Stripe refuses
 * a restricted key without the webhook endpoints permission. Forwards the rest. `listings` names the
 * secret key of every listing of the endpoints, in order.
 */
class EndpointCreateFailure extends ForwardingStub {
  failCreate = false;
  failDelete = false;
  failNextCreate = false;
  holdList: Promise<void> | null = null;
  refuseListFor: string | null = null;
  listHeld: () => void = () => undefined;
  readonly listings: string[] = [];
  private readonly failedKeys = new Set<string>();

  protected override async intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (req.method === 'GET' && req.url.startsWith('/sandbox/cardpay/v1/webhook_endpoints?')) {
      this.listings.push(String(req.headers.authorization ?? '').replace(/^Bearer /, ''));
    }
    const creation = req.method === 'POST' && req.url === '/sandbox/cardpay/v1/webhook_endpoints';
    const key = String(req.headers['idempotency-key'] ?? '');
    if (creation && this.failNextCreate) {
      this.failNextCreate = false;
      this.failedKeys.add(key);
    }
    const failed =
      (creation && (this.failCreate || this.failedKeys.has(key))) ||
      (this.failDelete && req.method === 'DELETE' && req.url.startsWith('/sandbox/cardpay/v1/webhook_endpoints/'));
    if (failed) return jsonAnswer(500, { error: { type: 'api_error', message: 'An unknown error occurred' } });
    if (this.refuseListFor && req.method === 'GET' && req.url.startsWith('/sandbox/cardpay/v1/webhook_endpoints?') && req.headers.authorization === `Bearer ${this.refuseListFor}`) {
      return jsonAnswer(403, {
        error: { type: 'invalid_request_error', message: "The provided key does not have the required permissions for this endpoint. Having the 'rak_webhook_read' permission would allow this request to continue." },
      });
    }
    const hold = this.holdList;
    if (hold && req.method === 'GET' && req.url.startsWith('/sandbox/cardpay/v1/webhook_endpoints?')) {
      this.listHeld();
      await hold;
    }
    return forward();
  }
}

const SECRET_KEY = `sk_test_restore_${randomUUID().replace(/-/g, '')}`;
let t: TestService;
let stub: EndpointCreateFailure;
let receiver: WebhookReceiver;
let key: string;
let merchantId: string;

beforeAll(async () => {
  stub = new EndpointCreateFailure();
  const stubUrl = await stub.start();
  // The status sync would not learn of a dashboard refund anyway; only the provider's events tell of it.
  t = await startTestService({ CARDPAY_BASE_URL: `${stubUrl}/sandbox/cardpay`, STATUS_SYNC_SCHEDULE: '1h' });
  stub.target = t.baseUrl;
  receiver = await new WebhookReceiver().start();
  ({ apiKey: key, merchantId } = await t.createMerchant('Re-storing Shop'));
  await t.http.put('/v1/merchant/webhook').set('X-API-Key', key).send({ webhook_url: receiver.url }).expect(200);
  await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: SECRET_KEY } }).expect(200);
});
beforeEach(() => {
  stub.holdList = null;
  stub.failCreate = false;
  stub.failNextCreate = false;
  stub.failDelete = false;
  stub.refuseListFor = null;
});
afterAll(async () => {
  await stub.stop();
  await t.stop();
  await receiver.stop();
});

const storeAgain = () => t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: SECRET_KEY } });
const endpointsOfMerchant = async () => {
  const res = await t.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${SECRET_KEY}`).expect(200);
  return (res.body.data as { id: string; url: string; api_version: string | null }[]).filter((e) => new URL(e.url).searchParams.get('merchant') === merchantId);
};

async function paid(): Promise<{ id: string; provider_ref: string }> {
  const res = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', randomUUID())
    .send({ provider: 'cardpay', amount: '20.00', currency: 'USD', payment_method: 'pm_card_visa' });
  expect(res.status).toBe(201);
  expect(res.body.data.status).toBe('completed');
  return res.body.data;
}

/** A refund made in the provider's dashboard: only the provider's events tell the service of it. */
async function dashboardRefundIsRecorded(p: { id: string; provider_ref: string }, amount: number, refunded: string) {
  await t.http.post('/sandbox/cardpay/dashboard/refunds').set('Authorization', `Bearer ${SECRET_KEY}`).type('form')
    .send({ payment_intent: p.provider_ref, amount: String(amount) }).expect(200);
  const event = await eventually(
    () => receiver.events('payment.refunded').find((e) => e.json.data.payment_id === p.id && e.json.data.amount_refunded === refunded),
    15_000,
    `payment.refunded (${refunded})`,
  );
  expect(event.json.data).toMatchObject({ payment_id: p.id, amount_refunded: refunded });
}

describe('storing cardpay credentials again', () => {
  it("the endpoint the service registers is pinned to the adapter's API version, so its events keep the shape the adapter reads whatever the account's default", async () => {
    const [endpoint, ...others] = await endpointsOfMerchant();
    expect(others).toHaveLength(0);
    expect(endpoint).toMatchObject({ api_version: CARDPAY_API_VERSION });
    // As the provider's SDK reads it.
    const read = await new CardpayClients().for(`${t.baseUrl}/sandbox/cardpay`, SECRET_KEY, 5000).webhookEndpoints.retrieve(endpoint!.id);
    expect(read.api_version).toBe(CARDPAY_API_VERSION);
  });

  it("a registration the provider refuses (502) leaves the merchant's endpoint in place: a dashboard refund is still recorded and sent", async () => {
    const p = await paid();
    const before = await endpointsOfMerchant();
    expect(before).toHaveLength(1);

    stub.failCreate = true;
    const res = await storeAgain();
    stub.failCreate = false;
    expect(res.status).toBe(502);

    await dashboardRefundIsRecorded(p, 300, '3.00');
    expect(await endpointsOfMerchant()).toEqual(before);
  });

  it('a registration that succeeds leaves exactly one endpoint for the merchant, and its events are verified with the new secret', async () => {
    const p = await paid();
    const before = await endpointsOfMerchant();
    await storeAgain().expect(200);
    const after = await endpointsOfMerchant();
    expect(after).toHaveLength(1);
    expect(after[0]!.id).not.toBe(before[0]!.id);

    await dashboardRefundIsRecorded(p, 500, '5.00');
  });

  it('an older endpoint that cannot be deleted leaves the PUT 200 with the new secret in use; the next store deletes it', async () => {
    const p = await paid();
    const before = await endpointsOfMerchant();
    stub.failDelete = true;
    await storeAgain().expect(200);
    stub.failDelete = false;
    const both = await endpointsOfMerchant();
    expect(both.map((e) => e.id)).toEqual(expect.arrayContaining([before[0]!.id]));
    expect(both).toHaveLength(2);
    // The new endpoint's events verify with the stored secret (the old one's fail verification and are sent again).
    await dashboardRefundIsRecorded(p, 400, '4.00');

    await storeAgain().expect(200);
    const after = await endpointsOfMerchant();
    expect(after).toHaveLength(1);
    expect(both.map((e) => e.id)).not.toContain(after[0]!.id);
  });

  it('a registration the provider answered 500 once is not held to that answer: the store goes on with a new request, 200', async () => {
    const p = await paid();
    const before = await endpointsOfMerchant();
    // Stripe replays a saved 500 to every request with its key: with one key per PUT, every repeat of the
    // merchant's PUT was 502 for the key's 24 h.
    stub.failNextCreate = true;
    await storeAgain().expect(200);
    const after = await endpointsOfMerchant();
    expect(after).toHaveLength(1);
    expect(after[0]!.id).not.toBe(before[0]!.id);
    await dashboardRefundIsRecorded(p, 600, '6.00');
  });

  it('no database connection is held while the provider deletes the replaced endpoint, and a second store meanwhile is 409, changing nothing', async () => {
    const p = await paid();
    let release!: () => void;
    stub.holdList = new Promise<void>((resolve) => (release = resolve));
    const held = new Promise<void>((resolve) => (stub.listHeld = resolve));
    const first = storeAgain().then((res) => res);
    await held;
    try {
      // The new secret is stored; the clean-up is waiting for the provider. An open transaction (a row lock)
      // would pin a pooled connection until the provider answers, and a second store would wait on it.
      const open = await t.sql<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
      );
      expect(open[0]!.n).toBe(0);
      const second = await storeAgain();
      expect([second.status, second.body.error?.code, second.body.error?.message]).toEqual([
        409,
        'CONFLICT',
        "another store or deletion of this merchant's cardpay credentials is still running; retry once it has finished",
      ]);
      // Passing, not final: Retry-After, as on an Idempotency-Key still being processed (clients retry it).
      expect(second.headers['retry-after']).toBe('1');
      expect(await endpointsOfMerchant()).toHaveLength(2);
    } finally {
      release();
    }
    expect((await first).status).toBe(200);
    expect(await endpointsOfMerchant()).toHaveLength(1);
    await dashboardRefundIsRecorded(p, 700, '7.00');
    // The lease is given back: the next store runs.
    await storeAgain().expect(200);
  });
});

describe("storing cardpay credentials with a dashboard endpoint's webhook_secret", () => {
  it('the account\'s endpoints are listed once: the registered endpoint is deleted, the dashboard one stays', async () => {
    const { apiKey, merchantId: shop } = await t.createMerchant('Dashboard Secret Shop');
    const secretKey = `sk_test_restore_dashboard_${randomUUID().replace(/-/g, '')}`;
    const store = (cardpay: object) => t.http.put('/v1/merchant/credentials').set('X-API-Key', apiKey).send({ provider: 'cardpay', cardpay }).expect(200);
    const endpointIds = async () => ((await t.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${secretKey}`).expect(200))
      .body.data as { id: string; url: string }[]).filter((e) => new URL(e.url).searchParams.get('merchant') === shop).map((e) => e.id);
    await store({ secret_key: secretKey });
    const [registered] = await endpointIds();
    const own = await t.http.post('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${secretKey}`).type('form')
      .send({ url: `${t.baseUrl}/v1/webhooks/cardpay?merchant=${shop}`, 'enabled_events[]': ['payment_intent.succeeded', 'refund.updated'] })
      .expect(200);

    const listedBefore = stub.listings.length;
    await store({ secret_key: secretKey, webhook_secret: own.body.secret });
    // Listed once to tell the merchant's endpoint from ours, and cleaned up from that listing (was listed twice).
    expect(stub.listings.slice(listedBefore)).toEqual([secretKey]);
    expect(await endpointIds()).toEqual([own.body.id]);
    expect(registered).not.toBe(own.body.id);
  });
});

describe('storing cardpay credentials of another account with a webhook_secret (run last: the merchant keeps them)', () => {
  it("a restricted key that may not list endpoints: the endpoint registered on the replaced key's account is still deleted, with the replaced key", async () => {
    expect(await endpointsOfMerchant()).toHaveLength(1);
    const restricted = `rk_test_restore_${randomUUID().replace(/-/g, '')}`;
    // The merchant's own endpoint, made in the dashboard of the other account.
    const own = await t.http.post('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${restricted}`).type('form')
      .send({ url: `${t.baseUrl}/v1/webhooks/cardpay?merchant=${merchantId}`, 'enabled_events[]': ['payment_intent.succeeded', 'refund.updated'] })
      .expect(200);
    stub.refuseListFor = restricted;
    await t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: restricted, webhook_secret: own.body.secret } }).expect(200);
    expect(await endpointsOfMerchant()).toEqual([]);
    const ofRestricted = await t.http.get('/sandbox/cardpay/v1/webhook_endpoints').set('Authorization', `Bearer ${restricted}`).expect(200);
    expect(ofRestricted.body.data.map((e: { id: string }) => e.id)).toEqual([own.body.id]);
  });
});
