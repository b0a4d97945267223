import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EntityManager } from '@mikro-orm/postgresql';
import { CredentialsService, type CredentialCache } from '../../server/domain/merchants/credentials.service.js';
import { Leases } from '../../server/persistence/leases.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Two stores of a merchant's cardpay credentials back to back, through two api processes. The second
 * process has not heard of the first one's change yet (its credentials cache lags by up to the change
 * feed's freshness, ~1 s). Its store must still clean up the webhook endpoint the first store registered:
 * what it replaces is read from the database. Cleaned up from the lagging cache instead, the replaced
 * key was the one before (whose endpoint was already deleted), and the endpoint on the first store's
 * account stayed registered — receiving every event of that account, each refused here.
 */
let t: TestService;
let key: string;
let merchantId: string;

/** A second api process's credentials service, whose cache has not heard of the other process's store yet. */
function secondProcess(): CredentialsService {
  const { container } = t.service;
  const em = container.orm.em as unknown as EntityManager;
  const kept = new Map<string, unknown>();
  // Drops only on its own writes, as the real cache does before the other process's notification arrives.
  const lagging: CredentialCache = {
    get: async (k, load) => {
      if (!kept.has(k)) kept.set(k, await load());
      return kept.get(k) ?? null;
    },
    dropMerchant: () => kept.clear(),
  };
  return new CredentialsService(em, container.secrets, container.providers, {
    cache: lagging,
    leases: new Leases(em.getKnex()),
    storeLeaseMs: 60_000,
    publicBaseUrl: () => container.config.publicBaseUrl,
  });
}

beforeAll(async () => {
  t = await startTestService();
  ({ apiKey: key, merchantId } = await t.createMerchant('Two Processes Shop'));
});
afterAll(async () => {
  await t?.stop();
});

const endpointsOfMerchant = () =>
  t.sql<{ id: string; account: string }>('SELECT id, account FROM sandbox_cardpay_webhook_endpoints WHERE url LIKE $1', [`%merchant=${merchantId}%`]);

describe('a store of cardpay credentials right after another process stored them', () => {
  it('deletes the endpoint the other store registered: the provider holds one endpoint for the merchant', async () => {
    const store = (secretKey: string) => t.http.put('/v1/merchant/credentials').set('X-API-Key', key).send({ provider: 'cardpay', cardpay: { secret_key: secretKey } }).expect(200);
    const second = secondProcess();
    await store('sk_test_two_processes_first');
    // The second process read the credentials (a payment, say): its cache holds them.
    expect(await t.inContext(() => second.find(merchantId, 'cardpay'))).toMatchObject({ secret_key: 'sk_test_two_processes_first' });

    // The first process stores another key: its endpoint replaces the first one (on another account).
    await store('sk_test_two_processes_second');
    const [registered, ...others] = await endpointsOfMerchant();
    expect(others).toHaveLength(0);

    // At once, through the second process: a third key.
    await t.inContext(() => second.store(merchantId, { provider: 'cardpay', cardpay: { secret_key: 'sk_test_two_processes_third' } }));
    const after = await endpointsOfMerchant();
    expect(after.map((e) => e.id)).not.toContain(registered!.id);
    expect(after).toHaveLength(1);
  });
});
