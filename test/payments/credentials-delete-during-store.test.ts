import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * A merchant revoking compromised credentials while a store of them is still talking to the provider: the
 * DELETE's answer must be what then holds. Deleted and answered 200 while the store ran, the store's write
 * put the credentials back a moment later. A deletion meanwhile is refused as a second store is (409 with
 * Retry-After, nothing changed), and succeeds once the store has finished.
 */
let t: TestService;
let key: string;
let merchantId: string;

const credentials = {
  cardpay: { provider: 'cardpay', cardpay: { secret_key: 'sk_test_delete_during_store' } },
  walletpay: { provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'delete-during-store', client_secret: 'delete-during-store-secret' } },
} as const;

beforeAll(async () => {
  // Every simulator answer takes 1.5 s: a store registering its callback URL runs for several seconds.
  t = await startTestService({ SANDBOX_LATENCY_MS: '1500' });
  ({ apiKey: key, merchantId } = await t.createMerchant('Delete During Store Shop'));
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

const store = (provider: keyof typeof credentials) => t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send(credentials[provider]);
const remove = (provider: string) => t.http.delete(`/v1/merchant/credentials/${provider}`).set('X-API-Key', key);
const configured = async () => ((await t.http.get('/v1/merchant/credentials').set('X-API-Key', key).expect(200)).body.data as { provider: string }[]).map((c) => c.provider);

describe.each(['cardpay', 'walletpay'] as const)('DELETE of %s credentials while a store of them runs', (provider) => {
  it('is 409 with Retry-After and deletes nothing; the credentials listed afterwards are what DELETE answered', async () => {
    expect((await store(provider)).status).toBe(200);
    const storing = store(provider).then((res) => res);
    // The store holds its lease while it talks to the provider.
    await eventually(async () => (await t.sql('SELECT 1 FROM refresh_leases WHERE name = $1 AND until > now()', [`credentials:${merchantId}:${provider}`])).length === 1, 10_000, 'the store running');

    const deleted = await remove(provider);
    expect((await storing).status).toBe(200);
    if (deleted.status === 200) expect(await configured()).not.toContain(provider);
    expect([deleted.status, deleted.body.error?.code, deleted.headers['retry-after']]).toEqual([409, 'CONFLICT', '1']);
    expect(await configured()).toContain(provider);

    // Once the store has finished, the deletion runs and holds.
    expect((await remove(provider)).status).toBe(200);
    expect(await configured()).not.toContain(provider);
  }, 60_000);
});
