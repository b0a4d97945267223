import { initServer } from '@ts-rest/express';
import { contract, type EventBody } from '../../../contract/index.js';
import { createdWindow } from '../../domain/created-window.js';
import type { EventLog } from '../../domain/events/event-log.js';
import { ok } from '../envelope.js';
import { principalOf } from '../middleware/auth.js';
import { pageMeta } from '../presenters/presenters.js';

const s = initServer();

/** GET /v1/events: each item is the event's delivered body as it is (stored JSON, written by the outbox in the contract's shape). */
export function eventsRouter(deps: { events: EventLog }) {
  return s.router(contract.events, {
    list: async ({ query, res }) => {
      const { since, until } = createdWindow(query.since, query.until);
      const { items, total } = await deps.events.list(principalOf(res).merchantId, {
        type: query.type,
        paymentId: query.payment_id,
        since,
        until,
        page: query.page,
        pageSize: query.page_size,
      });
      return { status: 200 as const, body: { success: true as const, data: items as EventBody[], meta: pageMeta(query.page, query.page_size, total) } };
    },
    get: async ({ params, res }) => ok((await deps.events.get(principalOf(res).merchantId, params.id)) as EventBody),
  });
}
