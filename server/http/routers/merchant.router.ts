import { initServer } from '@ts-rest/express';
import { contract } from '../../../contract/index.js';
import type { CredentialsService } from '../../domain/merchants/credentials.service.js';
import type { MerchantService } from '../../domain/merchants/merchant.service.js';
import { ok } from '../envelope.js';
import { pageMeta } from '../presenters/presenters.js';
import { principalOf } from '../middleware/auth.js';

const s = initServer();

export function merchantRouter(deps: { merchants: MerchantService; credentials: CredentialsService }) {
  return s.router(contract.merchant, {
    get: async ({ res }) => {
      const { merchant, providers } = await deps.merchants.get(principalOf(res).merchantId);
      return ok({
        id: merchant.id,
        name: merchant.name,
        webhook_url: merchant.webhookUrl ?? null,
        providers,
        created_at: merchant.createdAt.toISOString(),
      });
    },
    setWebhook: async ({ body, res }) => {
      const result = await deps.merchants.setWebhook(principalOf(res).merchantId, body.webhook_url);
      return ok({ webhook_url: result.webhookUrl, webhook_secret: result.webhookSecret });
    },
    deleteWebhook: async ({ res }) => {
      await deps.merchants.removeWebhook(principalOf(res).merchantId);
      return ok({ webhook_url: null, deleted: true as const });
    },
    storeCredentials: async ({ body, res }) => ok(await deps.credentials.store(principalOf(res).merchantId, body)),
    listCredentials: async ({ res }) => {
      // One per provider at most: all on one page, with the meta every list carries.
      const items = await deps.credentials.list(principalOf(res).merchantId);
      return { status: 200 as const, body: { success: true as const, data: items, meta: pageMeta(1, items.length, items.length) } };
    },
    deleteCredentials: async ({ params, res }) => {
      await deps.credentials.remove(principalOf(res).merchantId, params.provider);
      return ok({ provider: params.provider, deleted: true as const });
    },
  });
}
