import { initServer } from '@ts-rest/express';
import { contract } from '../../../contract/index.js';
import type { DeliveryService } from '../../domain/delivery/delivery.service.js';
import { ok } from '../envelope.js';
import { principalOf } from '../middleware/auth.js';

const s = initServer();

export function webhooksRouter(deps: { deliveries: DeliveryService }) {
  return s.router(contract.webhooks, {
    recover: async ({ body, res }) => {
      const { queued, since, until } = await deps.deliveries.recover(principalOf(res).merchantId, body.since, body.until);
      return ok({ queued, since: since.toISOString(), until: until.toISOString() });
    },
    test: async ({ res }) => {
      const sent = await deps.deliveries.sendTest(principalOf(res).merchantId);
      return ok({
        delivery_id: sent.deliveryId,
        event_id: sent.eventId,
        url: sent.url,
        delivered: sent.ok,
        response_status: sent.responseStatus,
        duration_ms: sent.durationMs,
        error: sent.error,
      });
    },
  });
}
