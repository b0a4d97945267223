import { nowSec } from './db.js';
import { invalidRequest, noSuch } from './errors.js';
import type { ApiContext, ApiRoutes } from './http.js';
import { ok } from './http.js';
import type { PaymentMethodRow } from './objects.js';
import { cardOf, paymentMethodObject } from './objects.js';
import { listPage } from './lists.js';
import { onlyKnown, optString, reqString } from './params.js';
import { findCustomer, findPaymentMethod, insertPaymentMethod } from './store.js';
import { testCard } from './test-cards.js';

/** Stripe's refusal of a PaymentMethod used once without a Customer (or detached from one). */
export const SINGLE_USE_MESSAGE =
  'The provided PaymentMethod was previously used with a PaymentIntent without Customer attachment, shared with a connected account without Customer attachment, or was detached from a Customer. It may not be used again. To use a PaymentMethod multiple times, you must attach it to a Customer first.';

const notAttached = () =>
  invalidRequest(
    'The payment method you provided is not attached to a customer so detachment is impossible.',
    undefined,
    'payment_method_unexpected_state',
  );

/**
 * Attaching a test token makes a new `pm_…` that remembers the token. Decline tokens cannot be attached:
 * the attach answers with the decline (402 card_error), as at Stripe.
 */
async function attach(ctx: ApiContext) {
  const { params, db, account } = ctx;
  onlyKnown(params, ['customer']);
  const customerId = reqString(params, 'customer');
  const id = ctx.path.id!;
  const existing = testCard(id) ? null : await findPaymentMethod(db, account, id, true);
  if (!testCard(id) && !existing) throw noSuch('PaymentMethod', id);
  if (!(await findCustomer(db, account, customerId))) throw noSuch('customer', customerId, 'customer');
  if (existing?.detached) {
    throw invalidRequest('This PaymentMethod was previously detached from a Customer and cannot be attached again.', undefined, 'payment_method_unexpected_state');
  }
  if (existing && !existing.customer && existing.used_with_intent) {
    // Confirmed with a PaymentIntent while attached to no Customer: consumed, as at Stripe.
    throw invalidRequest(SINGLE_USE_MESSAGE, undefined, 'payment_method_unexpected_state');
  }
  if (existing?.customer) {
    if (existing.customer === customerId) return ok(paymentMethodObject(existing));
    throw invalidRequest('The payment method you provided has already been attached to a customer.', undefined, 'payment_method_unexpected_state');
  }
  const card = existing ? cardOf(existing) : testCard(id)!;
  if (!card.attachable && card.behaviour.kind === 'decline') {
    const { code, decline_code, message } = card.behaviour.decline;
    return {
      status: 402,
      body: { error: { type: 'card_error', code, ...(decline_code ? { decline_code } : {}), message } },
      events: [],
    };
  }
  let row: PaymentMethodRow;
  if (existing) {
    await db.query('UPDATE sandbox_cardpay_payment_methods SET customer = ? WHERE id = ?', [customerId, existing.id]);
    row = { ...existing, customer: customerId };
  } else {
    row = insertPaymentMethod(db, account, id, customerId);
  }
  const object = paymentMethodObject(row);
  return ok(object, [{ type: 'payment_method.attached', object }]);
}

async function detach(ctx: ApiContext) {
  onlyKnown(ctx.params, []);
  const id = ctx.path.id!;
  if (testCard(id)) throw notAttached();
  const row = await findPaymentMethod(ctx.db, ctx.account, id, true);
  if (!row) throw noSuch('PaymentMethod', id);
  if (!row.customer) throw notAttached();
  await ctx.db.query('UPDATE sandbox_cardpay_payment_methods SET customer = NULL, detached = true WHERE id = ?', [id]);
  const object = paymentMethodObject({ ...row, customer: null, detached: true });
  return ok(object, [{ type: 'payment_method.detached', object }]);
}

/** A customer's attached cards, newest first (the only payment method type the simulator has). */
async function listOfCustomer(ctx: ApiContext, customerId: string, param: string) {
  if (!(await findCustomer(ctx.db, ctx.account, customerId))) throw noSuch('customer', customerId, param);
  const type = optString(ctx.params, 'type');
  return listPage<PaymentMethodRow>(ctx.db, ctx.account, ctx.params, {
    source: { table: 'sandbox_cardpay_payment_methods', kind: 'payment_method' },
    where: ['customer = ?', 'NOT detached', ...(type && type !== 'card' ? ['false'] : [])],
    args: [customerId],
    toObject: paymentMethodObject,
    url: param === 'id' ? `/v1/customers/${customerId}/payment_methods` : '/v1/payment_methods',
  });
}

export function paymentMethodRoutes(api: ApiRoutes): void {
  api.get('/v1/payment_methods', (ctx) => listOfCustomer(ctx, reqString(ctx.params, 'customer'), 'customer'));
  api.get('/v1/customers/:id/payment_methods', (ctx) => listOfCustomer(ctx, ctx.path.id!, 'id'));
  api.post('/v1/payment_methods/:id/attach', attach);
  api.post('/v1/payment_methods/:id/detach', detach);
  api.get('/v1/payment_methods/:id', async ({ db, account, path }) => {
    const id = path.id!;
    // A test token reads as a fresh, unattached card.
    if (testCard(id)) return paymentMethodObject({ id, account, token: id, customer: null, detached: false, used_with_intent: null, metadata: {}, created: String(nowSec()) });
    const row = await findPaymentMethod(db, account, id);
    if (!row) throw noSuch('PaymentMethod', id);
    return paymentMethodObject(row);
  });
}

