import { refunded } from './charging.js';
import { incompatibleAmount } from './currencies.js';
import type { SimResponse } from './idempotency.js';
import { SETTLE_REFUND_JOB, settleDelayMs } from './refund-settlement.js';
import { newId, nowSec } from './db.js';
import { invalidRequest, noSuch } from './errors.js';
import type { ApiContext, ApiRoutes } from './http.js';
import { ok } from './http.js';
import type { IntentRow, RefundRow } from './objects.js';
import { cardOf, chargeObject, refundObject } from './objects.js';
import { metadata, onlyKnown, optInt, optString } from './params.js';
import { listPage } from './lists.js';
import { paymentMethodById, requireIntent } from './store.js';

const REASONS = ['duplicate', 'fraudulent', 'requested_by_customer'];

async function intentOfCharge(ctx: ApiContext, chargeId: string, lock: boolean, param: string): Promise<IntentRow> {
  const [row] = await ctx.db.query<IntentRow>(
    `SELECT * FROM sandbox_cardpay_intents WHERE latest_charge = ? AND account = ?${lock ? ' FOR UPDATE' : ''}`,
    [chargeId, ctx.account],
  );
  if (!row) throw noSuch('charge', chargeId, param);
  return row;
}

/**
 * A refund of the intent's charge: the remainder when no amount is given; never more than the
 * remainder. Made through the API (with the caller's metadata) or in the dashboard (without).
 */
async function createRefund(ctx: ApiContext, meta: Record<string, string>): Promise<SimResponse> {
  const { params, db, account } = ctx;
  const intentId = optString(params, 'payment_intent');
  const chargeId = optString(params, 'charge');
  if (!intentId && !chargeId) {
    throw invalidRequest('One of the following params should be provided for this request: payment_intent or charge.', undefined, 'parameter_missing');
  }
  const requested = optInt(params, 'amount');
  if (requested !== undefined && requested < 1n) throw invalidRequest('Invalid positive integer', 'amount', 'parameter_invalid_integer');
  const reason = optString(params, 'reason') ?? null;
  if (reason && !REASONS.includes(reason)) throw invalidRequest(`Invalid reason: must be one of ${REASONS.join(', ')}`, 'reason');

  // Locked: two refunds of one charge are decided one after the other.
  const intent = intentId
    ? await requireIntent(db, account, intentId, true, 'payment_intent')
    : await intentOfCharge(ctx, chargeId!, true, 'charge');
  if (intent.status !== 'succeeded' || !intent.latest_charge) {
    throw invalidRequest(`This PaymentIntent (${intent.id}) does not have a successful charge to refund.`, 'payment_intent', 'charge_not_refundable');
  }
  if (chargeId && intentId && chargeId !== intent.latest_charge) {
    throw invalidRequest(`The charge ${chargeId} does not belong to the PaymentIntent ${intent.id}.`, 'charge');
  }
  const remaining = BigInt(intent.amount) - BigInt(intent.amount_refunded);
  if (remaining === 0n) {
    throw invalidRequest(`Charge ${intent.latest_charge} has already been refunded.`, undefined, 'charge_already_refunded');
  }
  const amount = requested ?? remaining;
  const incompatible = requested === undefined ? null : incompatibleAmount(requested, intent.currency);
  if (incompatible) throw incompatible;
  if (amount > remaining) {
    throw invalidRequest(
      `Refund amount (${amount} ${intent.currency}) is greater than unrefunded amount on charge (${remaining} ${intent.currency})`,
      'amount',
      'amount_too_large',
    );
  }
  const pm = await paymentMethodById(db, intent.payment_method);
  const later = pm ? cardOf(pm).refund : undefined;
  await db.query('UPDATE sandbox_cardpay_intents SET amount_refunded = amount_refunded + ?, updated_at = now() WHERE id = ?', [amount.toString(), intent.id]);
  intent.amount_refunded = (BigInt(intent.amount_refunded) + amount).toString();
  const [refund] = await db.query<RefundRow>(
    `INSERT INTO sandbox_cardpay_refunds (id, account, payment_intent, charge, amount, currency, status, reason, metadata, created)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?) RETURNING *`,
    [newId('re'), account, intent.id, intent.latest_charge, amount.toString(), intent.currency, later === 'pending_then_succeeded' ? 'pending' : 'succeeded',
      reason, JSON.stringify(meta), nowSec()],
  );
  const followUps = later ? [{ job: SETTLE_REFUND_JOB, data: { refundId: refund!.id }, delayMs: settleDelayMs(ctx.deps) }] : [];
  return { ...ok(refundObject(refund!), refunded(intent, pm, refund!)), followUps };
}

const create = (ctx: ApiContext) => {
  onlyKnown(ctx.params, ['payment_intent', 'charge', 'amount', 'reason', 'metadata']);
  return createRefund(ctx, metadata(ctx.params));
};

/**
 * POST /dashboard/refunds (simulator only): a refund made in the provider's dashboard by someone
 * signed in to the account (here: the account's secret key) — not through the service, so it carries
 * none of the service's metadata. Its events are the ones an API refund sends.
 */
const createInDashboard = (ctx: ApiContext) => {
  onlyKnown(ctx.params, ['payment_intent', 'charge', 'amount', 'reason']);
  return createRefund(ctx, {});
};

/** GET /v1/refunds: newest first, optionally of one charge or one payment intent (which must exist). */
async function listRefunds(ctx: ApiContext) {
  const where: string[] = [];
  const args: unknown[] = [];
  const charge = optString(ctx.params, 'charge');
  if (charge) {
    await intentOfCharge(ctx, charge, false, 'charge');
    where.push('charge = ?');
    args.push(charge);
  }
  const intent = optString(ctx.params, 'payment_intent');
  if (intent) {
    await requireIntent(ctx.db, ctx.account, intent, false, 'payment_intent');
    where.push('payment_intent = ?');
    args.push(intent);
  }
  return listPage<RefundRow>(ctx.db, ctx.account, ctx.params, {
    source: { table: 'sandbox_cardpay_refunds', kind: 'refund' },
    where,
    args,
    toObject: refundObject,
    url: '/v1/refunds',
  });
}

export function refundRoutes(api: ApiRoutes): void {
  api.post('/v1/refunds', create);
  api.post('/dashboard/refunds', createInDashboard);
  api.get('/v1/refunds', listRefunds);
  api.get('/v1/refunds/:id', async (ctx) => {
    const [row] = await ctx.db.query<RefundRow>('SELECT * FROM sandbox_cardpay_refunds WHERE id = ? AND account = ?', [ctx.path.id, ctx.account]);
    if (!row) throw noSuch('refund', ctx.path.id!);
    return refundObject(row);
  });
  api.get('/v1/charges/:id', async (ctx) => {
    const intent = await intentOfCharge(ctx, ctx.path.id!, false, 'id');
    return chargeObject(intent, await paymentMethodById(ctx.db, intent.payment_method));
  });
}
