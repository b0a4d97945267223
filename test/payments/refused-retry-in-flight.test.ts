import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A retry with the Idempotency-Key of a request that is still charging (the provider slow), made after the
 * merchant deleted the credentials: the first request goes on and charges. A 422 "credentials not configured"
 * would look final, and a merchant's retry with a new key would charge again; so the retry waits for the
 * first answer (decisions.md: up to 10 s), or gets the passing 409 with Retry-After — never the 422.
 */
let t: TestService;
let key: string;

const cardpayCredentials = { provider: 'cardpay', cardpay: { secret_key: 'sk_test_refused_retry', webhook_secret: 'whsec_refused_retry' } };
const cardBody = { provider: 'cardpay', amount: '12.00', currency: 'USD', payment_method: 'pm_card_visa' };

beforeAll(async () => {
  // Every simulator answer takes 2 s: the first request is still at the provider when the retry comes.
  t = await startTestService({ SANDBOX_LATENCY_MS: '2000' });
  ({ apiKey: key } = await t.createMerchant('Refused Retry Shop'));
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

const storeCredentials = () => t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send(cardpayCredentials).expect(200);
/**
 * Deletes the credentials and resolves once their row is gone — not when DELETE answers: its clean-up at the
 * (slow) provider comes after, and the first request must still be at the provider when the retry comes.
 */
async function deleteCredentials(): Promise<() => Promise<unknown>> {
  const deleting = t.http.delete('/v1/merchant/credentials/cardpay').set('X-API-Key', key).then((res) => res);
  await eventually(async () => (await t.sql("SELECT 1 FROM provider_credentials WHERE provider = 'cardpay'")).length === 0, 10_000, 'the credentials deleted');
  return async () => expect((await deleting).status).toBe(200);
}
const keyRow = (scope: string, idem: string) => t.sql('SELECT 1 FROM idempotency_keys WHERE scope = $1 AND key = $2', [scope, idem]);

function expectWaitedOrPassingConflict(res: { status: number; headers: Record<string, string>; body: { data?: { id: string } } }, firstId: () => string) {
  expect([200, 201, 409]).toContain(res.status);
  if (res.status === 409) expect(res.headers['retry-after']).toBeDefined();
  else expect(res.body.data!.id).toBe(firstId());
}

/**
 * Sends a first request with `idem`, deletes the credentials while it is still at the provider, then retries
 * with the key: the first answers 201, and the retry waits for that answer (the same id) or gets the passing 409.
 */
async function retryWhileFirstRuns(scope: string, idem: string, send: () => Promise<{ status: number; headers: Record<string, string>; body: { data?: { id: string } } }>) {
  await storeCredentials();
  const first = send();
  await eventually(async () => (await keyRow(scope, idem)).length === 1, 10_000, 'the first request\'s key');
  const deleted = await deleteCredentials();

  const retry = await send();
  const firstRes = await first;
  await deleted();
  expect(firstRes.status).toBe(201);
  expectWaitedOrPassingConflict(retry, () => firstRes.body.data!.id);
}

describe('a retry with the key of a request still running, after the credentials were deleted', () => {
  it('a payment: waits for the first answer (the same payment) or 409 with Retry-After, never 422', async () => {
    const idem = `refused-payment-${Date.now()}`;
    await retryWhileFirstRuns('payment.create', idem, () => t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem).send(cardBody).then((res) => res));
    // A new key is refused: nothing configured.
    const fresh = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', `${idem}-new`).send(cardBody);
    expect(fresh.status).toBe(422);
  }, 60_000);

  it('a payment whose first request died (its lease ran out): the payment as it is, not 422; the key is left for a retry with credentials', async () => {
    await storeCredentials();
    const idem = `refused-dead-${Date.now()}`;
    const first = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem).send(cardBody);
    expect(first.status).toBe(201);
    // As if its process had died before recording the answer: unfinished, its lease run out.
    await t.sql(
      "UPDATE idempotency_keys SET recovery_point = 'provider_call', answer = NULL, lease_token = gen_random_uuid(), locked_until = now() - interval '1 second' WHERE scope = 'payment.create' AND key = $1",
      [idem],
    );
    await (await deleteCredentials())();

    const retry = await t.http.post('/v1/payments').set('X-API-Key', key).set('Idempotency-Key', idem).send(cardBody);
    // The key held no answer: the payment is a first answer (201, not a replay).
    expect([retry.status, retry.headers['idempotent-replayed'], retry.body.data?.id]).toEqual([201, undefined, first.body.data.id]);
    // Not resumed without credentials, nor held: the next retry (credentials back) resumes at once.
    expect(await t.sql("SELECT recovery_point, lease_token FROM idempotency_keys WHERE scope = 'payment.create' AND key = $1", [idem])).toEqual([{ recovery_point: 'provider_call', lease_token: null }]);
  }, 60_000);

  it('a saved card: waits for the first answer (the same card) or 409 with Retry-After, never 422', async () => {
    const idem = `refused-card-${Date.now()}`;
    await retryWhileFirstRuns('card.create', idem, () => t.http.post('/v1/payments/cards').set('X-API-Key', key).set('Idempotency-Key', idem).send({ payment_method_id: 'pm_card_visa' }).then((res) => res));
  }, 60_000);
});
