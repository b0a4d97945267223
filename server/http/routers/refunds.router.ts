import { initServer } from '@ts-rest/express';
import { contract } from '../../../contract/index.js';
import type { RefundService } from '../../domain/refunds/refund.service.js';
import { markReplayed, ok } from '../envelope.js';
import { principalOf } from '../middleware/auth.js';
import { asSent } from '../middleware/json-body.js';
import { pageMeta, presentRefund } from '../presenters/presenters.js';

const s = initServer();

export function refundsRouter(deps: { refunds: RefundService }) {
  return s.router(contract.refunds, {
    create: async ({ headers, body, req, res }) => {
      const asked = { paymentId: body.payment_id, amount: asSent(req, 'amount', body.amount), metadata: body.metadata };
      const { refund, replayed } = await deps.refunds.create(principalOf(res).merchantId, asked, headers['idempotency-key']);
      if (replayed) markReplayed(res);
      return { status: 201 as const, body: { success: true as const, data: presentRefund(refund) } };
    },
    list: async ({ query, res }) => {
      const filter = { paymentId: query.payment_id, status: query.status, since: query.since, until: query.until };
      const { items, total } = await deps.refunds.list(principalOf(res).merchantId, filter, query.page, query.page_size);
      return { status: 200 as const, body: { success: true as const, data: items.map(presentRefund), meta: pageMeta(query.page, query.page_size, total) } };
    },
    get: async ({ params, res }) => ok(presentRefund(await deps.refunds.get(principalOf(res).merchantId, params.id))),
  });
}
