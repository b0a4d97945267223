import type { Db } from './db.js';
import { nowSec } from './db.js';
import { invalidRequest, noSuch } from './errors.js';
import type { ApiContext, ApiRoutes } from './http.js';
import type { SimResponse } from './idempotency.js';
import { ok } from './http.js';
import type { PaymentMethodRow } from './objects.js';
import { paymentMethodObject } from './objects.js';
import { listPage } from './lists.js';
import { onlyKnown, optString, reqString } from './params.js';
import { findCustomer, findPaymentMethod, insertPaymentMethod } from './store.js';
import { TEST_BANK_ACCOUNTS, isTestToken, testCard } from './test-cards.js';

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
 * The PaymentMethod a request names for attaching: a test token (null: a new `pm_…` is made when it is
 * attached) or this account's row. `param`: how the request names it ('id' for the path: 404).
 */
export async function paymentMethodToAttach(db: Db, account: string, id: string, param: string): Promise<PaymentMethodRow | null> {
  if (isTestToken(id)) return null;
  const existing = await findPaymentMethod(db, account, id, true);
  if (!existing) throw noSuch('PaymentMethod', id, param);
  return existing;
}

/**
 * Attaches `id` (`existing`: its row, null for a test token, which becomes a new `pm_…` remembering the
 * token) to `customerId`. Decline tokens cannot be attached: the answer is the decline (402 card_error)
 * and nothing is written, as at Stripe.
 */
export async function attachPaymentMethod(db: Db, account: string, id: string, existing: PaymentMethodRow | null, customerId: string): Promise<SimResponse> {
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
  // A card, or another type of test payment method (a bank account), which attaches as it is.
  const card = testCard(existing?.token ?? id);
  if (card && !card.attachable && card.behaviour.kind === 'decline') {
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

async function attach(ctx: ApiContext) {
  const { params, db, account } = ctx;
  onlyKnown(params, ['customer']);
  const customerId = reqString(params, 'customer');
  const id = ctx.path.id!;
  const existing = await paymentMethodToAttach(db, account, id, 'id');
  if (!(await findCustomer(db, account, customerId))) throw noSuch('customer', customerId, 'customer');
  return attachPaymentMethod(db, account, id, existing, customerId);
}

async function detach(ctx: ApiContext) {
  onlyKnown(ctx.params, []);
  const id = ctx.path.id!;
  if (isTestToken(id)) throw notAttached();
  const row = await findPaymentMethod(ctx.db, ctx.account, id, true);
  if (!row) throw noSuch('PaymentMethod', id);
  if (!row.customer) throw notAttached();
  await ctx.db.query('UPDATE sandbox_cardpay_payment_methods SET customer = NULL, detached = true WHERE id = ?', [id]);
  const object = paymentMethodObject({ ...row, customer: null, detached: true });
  return ok(object, [{ type: 'payment_method.detached', object }]);
}

/** The types of payment method the simulator has, each as a condition on the token a row was made from. */
const BANK_TOKENS = Object.keys(TEST_BANK_ACCOUNTS);
const OF_TYPE: Record<string, string> = { card: 'token <> ALL(?::text[])', us_bank_account: 'token = ANY(?::text[])' };

/** A customer's attached payment methods (of `type`, when given), newest first. */
async function listOfCustomer(ctx: ApiContext, customerId: string, param: string) {
  if (!(await findCustomer(ctx.db, ctx.account, customerId))) throw noSuch('customer', customerId, param);
  const type = optString(ctx.params, 'type');
  const ofType = type === undefined ? [] : [OF_TYPE[type] ?? 'false'];
  return listPage<PaymentMethodRow>(ctx.db, ctx.account, ctx.params, {
    source: { table: 'sandbox_cardpay_payment_methods', kind: 'payment_method' },
    where: ['customer = ?', 'NOT detached', ...ofType],
    args: [customerId, ...(type !== undefined && OF_TYPE[type] ? [BANK_TOKENS] : [])],
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
    if (isTestToken(id)) return paymentMethodObject({ id, account, token: id, customer: null, detached: false, used_with_intent: null, set_up: false, metadata: {}, created: String(nowSec()) });
    const row = await findPaymentMethod(db, account, id);
    if (!row) throw noSuch('PaymentMethod', id);
    return paymentMethodObject(row);
  });
}

