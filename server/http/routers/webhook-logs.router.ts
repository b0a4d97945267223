import { initServer } from '@ts-rest/express';
import { contract, type WebhookEventType } from '../../../contract/index.js';
import type { AttemptRow } from '../../domain/delivery/delivery-store.js';
import type { DeliveryService } from '../../domain/delivery/delivery.service.js';
import type { WebhookDelivery } from '../../persistence/entities/index.js';
import { ok } from '../envelope.js';
import { principalOf } from '../middleware/auth.js';

const s = initServer();

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentDelivery(d: WebhookDelivery) {
  return {
    id: d.id,
    event_id: d.eventId,
    event_type: d.eventType as WebhookEventType,
    payment_id: d.paymentId ?? null,
    url: d.url,
    status: d.status,
    attempts: d.attempts,
    last_response_status: d.lastResponseStatus ?? null,
    last_error: d.lastError ?? null,
    next_attempt_at: iso(d.nextAttemptAt),
    delivered_at: iso(d.deliveredAt),
    created_at: d.createdAt.toISOString(),
  };
}

function presentAttempt(a: AttemptRow) {
  return {
    attempt_number: a.attempt_number,
    trigger: a.trigger,
    response_status: a.response_status,
    error: a.error,
    duration_ms: a.duration_ms,
    created_at: new Date(a.created_at).toISOString(),
  };
}

export function webhookLogsRouter(deps: { deliveries: DeliveryService }) {
  return s.router(contract.webhookLogs, {
    list: async ({ query, res }) => {
      const { items, total } = await deps.deliveries.list(principalOf(res).merchantId, {
        status: query.status,
        eventType: query.event_type,
        paymentId: query.payment_id,
        page: query.page,
        pageSize: query.page_size,
      });
      return {
        status: 200 as const,
        body: { success: true as const, data: items.map(presentDelivery), meta: { page: query.page, page_size: query.page_size, total } },
      };
    },
    get: async ({ params, res }) => {
      const { delivery, attempts } = await deps.deliveries.get(principalOf(res).merchantId, params.id);
      return ok({ ...presentDelivery(delivery), attempt_history: attempts.map(presentAttempt) });
    },
    retry: async ({ params, res }) => ok(presentDelivery(await deps.deliveries.retryNow(principalOf(res).merchantId, params.id))),
  });
}
