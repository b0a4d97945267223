import { initServer } from '@ts-rest/express';
import { contract } from '../../../contract/index.js';
import type { SavedCardService } from '../../domain/cards/saved-card.service.js';
import type { ProviderOperationsService } from '../../domain/operations/provider-operations.service.js';
import type { PaymentHistory } from '../../domain/payments/payment-history.js';
import type { PaymentService } from '../../domain/payments/payment.service.js';
import { markReplayed, ok } from '../envelope.js';
import { principalOf } from '../middleware/auth.js';
import { asSent } from '../middleware/json-body.js';
import { pageMeta, presentCapture, presentPayment, presentSavedCard, presentTransition } from '../presenters/presenters.js';

const s = initServer();

export function paymentsRouter(deps: {
  payments: PaymentService;
  paymentHistory: PaymentHistory;
  savedCards: SavedCardService;
  operations: ProviderOperationsService;
}) {
  // Express matches in registration order: the static /cards routes must come before /:id.
  return s.router(contract.payments, {
    createCard: async ({ headers, body, res }) => {
      const { card, replayed } = await deps.savedCards.save(principalOf(res).merchantId, {
        paymentMethodId: body.payment_method_id,
        email: body.customer_email,
        name: body.customer_name,
      }, headers['idempotency-key']);
      if (replayed) markReplayed(res);
      return { status: 201 as const, body: { success: true as const, data: presentSavedCard(card) } };
    },
    listCards: async ({ query, res }) => {
      const { items, total } = await deps.savedCards.list(principalOf(res).merchantId, query.page, query.page_size);
      return { status: 200 as const, body: { success: true as const, data: items.map(presentSavedCard), meta: pageMeta(query.page, query.page_size, total) } };
    },
    deleteCard: async ({ params, res }) => {
      await deps.savedCards.remove(principalOf(res).merchantId, params.id);
      return ok({ id: params.id, deleted: true as const });
    },
    // The contract's mobile-money operations: the provider's optional operations (ProviderOperations).
    checkStatus: async ({ params, res }) => ok(await deps.operations.checkStatus(principalOf(res).merchantId, 'mobilemoney', params.code)),
    reconcile: async ({ body, res }) => ok(await deps.operations.reconcile(principalOf(res).merchantId, 'mobilemoney', body ?? {})),
    registerPull: async ({ body, res }) => ok(await deps.operations.registerTransactionFeed(principalOf(res).merchantId, 'mobilemoney', body ?? {}) as never),
    create: async ({ headers, body, req, res }) => {
      const amount = asSent(req, 'amount', body.amount);
      const { payment, replayed } = await deps.payments.create(principalOf(res).merchantId, headers['idempotency-key'], { ...body, amount });
      if (replayed) {
        markReplayed(res);
        return ok(presentPayment(payment));
      }
      return { status: 201 as const, body: { success: true as const, data: presentPayment(payment) } };
    },
    list: async ({ query, res }) => {
      const { items, total } = await deps.payments.list(principalOf(res).merchantId, query);
      return { status: 200 as const, body: { success: true as const, data: items.map((p) => presentPayment(p)), meta: pageMeta(query.page, query.page_size, total) } };
    },
    get: async ({ params, res }) => ok(presentPayment(await deps.payments.get(principalOf(res).merchantId, params.id), { withProviderResponse: true })),
    transitions: async ({ params, res }) => {
      const rows = await deps.paymentHistory.transitions(principalOf(res).merchantId, params.id);
      // Never paged (a payment has a handful): all on one page, with the meta every list carries.
      return { status: 200 as const, body: { success: true as const, data: rows.map(presentTransition), meta: pageMeta(1, rows.length, rows.length) } };
    },
    capture: async ({ headers, params, res }) => {
      const { payment, replayed } = await deps.payments.capture(principalOf(res).merchantId, params.id, headers['idempotency-key']);
      if (replayed) markReplayed(res);
      return ok(presentCapture(payment));
    },
  });
}
