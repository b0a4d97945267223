import { confirm, cancel } from './charging.js';
import { newId, nowSec } from './db.js';
import { invalidRequest, missingParam, noSuch } from './errors.js';
import type { ApiContext, ApiRoutes } from './http.js';
import { ok } from './http.js';
import type { IntentRow } from './objects.js';
import { intentObject } from './objects.js';
import { httpUrl, metadata, onlyKnown, optBool, optHash, optInt, optString, reqString, stringArray } from './params.js';
import { findCustomer, insertIntent, requireIntent, resolvePaymentMethod, saveIntentState } from './store.js';

const CREATE_PARAMS = [
  'amount', 'currency', 'payment_method', 'customer', 'confirm', 'return_url', 'off_session', 'metadata', 'automatic_payment_methods',
  'error_on_requires_action', 'description', 'payment_method_types', 'capture_method', 'confirmation_method', 'setup_future_usage',
  'receipt_email', 'statement_descriptor', 'statement_descriptor_suffix', 'use_stripe_sdk',
] as const;

const CANCELABLE = ['requires_payment_method', 'requires_capture', 'requires_confirmation', 'requires_action', 'processing'];

/** The cardholder's 3-D Secure page for an intent, served by this simulator. */
export const authenticationUrl = (ctx: ApiContext, id: string) => `${ctx.deps.config.publicBaseUrl}/sandbox/cardpay/3ds/${id}`;

/** `off_session` takes true/false or Stripe's `one_off`/`recurring`. */
function offSession(ctx: ApiContext): boolean {
  const value = optString(ctx.params, 'off_session');
  if (value === 'one_off' || value === 'recurring') return true;
  return optBool(ctx.params, 'off_session') ?? false;
}

async function create(ctx: ApiContext) {
  const { params, account, db } = ctx;
  onlyKnown(params, CREATE_PARAMS);
  const amount = optInt(params, 'amount');
  if (amount === undefined) throw missingParam('amount');
  if (amount < 1n) throw invalidRequest('This value must be greater than or equal to 1.', 'amount', 'parameter_invalid_integer');
  const currency = reqString(params, 'currency').toLowerCase();
  if (!/^[a-z]{3}$/.test(currency)) throw invalidRequest(`Invalid currency: ${currency}.`, 'currency', 'parameter_invalid_string');
  const confirmNow = optBool(params, 'confirm') ?? false;
  const returnUrl = optString(params, 'return_url');
  if (returnUrl !== undefined) httpUrl(returnUrl, 'return_url');
  const isOffSession = offSession(ctx);
  if (!confirmNow && returnUrl) throw invalidRequest('You can only specify `return_url` when `confirm` is true.', 'return_url');
  if (!confirmNow && isOffSession) throw invalidRequest('You can only specify `off_session` when `confirm` is true.', 'off_session');
  const errorOnRequiresAction = optBool(params, 'error_on_requires_action') ?? false;

  const captureMethod = optString(params, 'capture_method') ?? 'automatic';
  if (captureMethod !== 'automatic' && captureMethod !== 'automatic_async') {
    throw invalidRequest('The simulator only supports capture_method automatic.', 'capture_method');
  }
  const types = stringArray(params, 'payment_method_types');
  if (types && types.some((t) => t !== 'card')) throw invalidRequest('The simulator only supports the payment method type card.', 'payment_method_types');
  const apmHash = optHash(params, 'automatic_payment_methods');
  let automaticPaymentMethods: Record<string, unknown> | null = null;
  if (apmHash) {
    onlyKnown(apmHash, ['enabled', 'allow_redirects']);
    const enabled = optBool(apmHash, 'enabled');
    if (enabled === undefined) throw missingParam('automatic_payment_methods[enabled]');
    const allowRedirects = optString(apmHash, 'allow_redirects') ?? 'always';
    if (allowRedirects !== 'always' && allowRedirects !== 'never') {
      throw invalidRequest(`Invalid automatic_payment_methods[allow_redirects]: must be one of always or never`, 'automatic_payment_methods[allow_redirects]');
    }
    automaticPaymentMethods = enabled ? { allow_redirects: allowRedirects, enabled: true } : { enabled: false };
    if (enabled && allowRedirects === 'always' && confirmNow && !returnUrl) {
      throw invalidRequest(
        "This PaymentIntent is configured to accept payment methods enabled in your Dashboard. Because some of these payment methods might redirect your customer off of your page, you must provide a `return_url`. If you don't want to accept redirect-based payment methods, set `automatic_payment_methods[enabled]` to `true` and `automatic_payment_methods[allow_redirects]` to `never` when creating Setup Intents and Payment Intents.",
        'return_url',
      );
    }
  }

  const customerId = optString(params, 'customer');
  if (customerId && !(await findCustomer(db, account, customerId))) throw noSuch('customer', customerId, 'customer');
  const pmParam = optString(params, 'payment_method');
  const pm = pmParam ? await resolvePaymentMethod(db, account, pmParam, 'payment_method') : null;
  if (pm?.detached) {
    throw invalidRequest(
      'The provided PaymentMethod was previously detached from a Customer. It may not be used again. To use a PaymentMethod multiple times, you must attach it to a Customer first.',
      'payment_method',
      'payment_method_unexpected_state',
    );
  }
  if (pm?.customer && pm.customer !== customerId) {
    throw invalidRequest(
      `The provided PaymentMethod belongs to a Customer, but you did not provide the Customer ${pm.customer}. Pass customer=${pm.customer} to use it.`,
      'customer',
    );
  }
  if (confirmNow && !pm) {
    throw invalidRequest("You cannot confirm this PaymentIntent because it's missing a payment method.", 'payment_method', 'payment_intent_unexpected_state');
  }

  const id = newId('pi');
  const intent: IntentRow = {
    id,
    account,
    amount: amount.toString(),
    currency,
    status: pm ? 'requires_confirmation' : 'requires_payment_method',
    payment_method: pm?.id ?? null,
    customer: customerId ?? null,
    description: optString(params, 'description') ?? null,
    return_url: returnUrl ?? null,
    off_session: isOffSession,
    automatic_payment_methods: automaticPaymentMethods,
    metadata: metadata(params),
    next_action: null,
    last_payment_error: null,
    latest_charge: null,
    amount_received: '0',
    amount_refunded: '0',
    client_secret: `${id}_secret_${newId('x').slice(2)}`,
    cancellation_reason: null,
    canceled_at: null,
    created: String(nowSec()),
  };
  const events = [{ type: 'payment_intent.created', object: intentObject(intent) }];
  if (!confirmNow || !pm) {
    await insertIntent(db, intent);
    return ok(intentObject(intent), events);
  }
  const result = confirm(intent, pm, {
    offSession: isOffSession,
    errorOnRequiresAction,
    returnUrl: returnUrl ?? null,
    authenticationUrl: authenticationUrl(ctx, id),
  });
  await insertIntent(db, intent);
  events.push(...result.events);
  if (result.decline) return { status: 402, body: { error: result.decline }, events };
  return ok(intentObject(intent), events);
}

async function cancelIntent(ctx: ApiContext) {
  onlyKnown(ctx.params, ['cancellation_reason']);
  const reason = optString(ctx.params, 'cancellation_reason') ?? null;
  if (reason && !['duplicate', 'fraudulent', 'requested_by_customer', 'abandoned'].includes(reason)) {
    throw invalidRequest('Invalid cancellation_reason: must be one of duplicate, fraudulent, requested_by_customer or abandoned', 'cancellation_reason');
  }
  const intent = await requireIntent(ctx.db, ctx.account, ctx.path.id!, true);
  if (!CANCELABLE.includes(intent.status)) {
    throw invalidRequest(
      `You cannot cancel this PaymentIntent because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be canceled: ${CANCELABLE.join(', ')}.`,
      undefined,
      'payment_intent_unexpected_state',
    );
  }
  const { events } = cancel(intent, reason, nowSec());
  await saveIntentState(ctx.db, intent);
  return ok(intentObject(intent), events);
}

/** Stripe's search language, the subset used to find an intent: `metadata['k']:'v'`, `status:'…'`, `customer:'…'` joined by AND. */
function parseSearch(query: string): { sql: string; params: unknown[] } {
  const clauses = query.split(/\s+AND\s+/i).map((c) => c.trim()).filter(Boolean);
  if (clauses.length === 0) throw missingParam('query');
  const sql: string[] = [];
  const params: unknown[] = [];
  for (const clause of clauses) {
    const meta = /^metadata\[['"]([^'"]+)['"]\]:['"]([^'"]*)['"]$/.exec(clause);
    const field = /^(status|customer|currency):['"]([^'"]*)['"]$/.exec(clause);
    if (meta) {
      sql.push('metadata ->> ? = ?');
      params.push(meta[1], meta[2]);
    } else if (field) {
      sql.push(`${field[1]} = ?`);
      params.push(field[2]);
    } else {
      throw invalidRequest(`Invalid search query: ${clause}`, 'query');
    }
  }
  return { sql: sql.join(' AND '), params };
}

async function search(ctx: ApiContext) {
  const { sql, params } = parseSearch(reqString(ctx.params, 'query'));
  const limit = Number(optInt(ctx.params, 'limit') ?? 10n);
  const rows = await ctx.db.query<IntentRow>(
    `SELECT * FROM sandbox_cardpay_intents WHERE account = ? AND ${sql} ORDER BY created DESC, id DESC LIMIT ?`,
    [ctx.account, ...params, Math.min(Math.max(limit, 1), 100)],
  );
  return { object: 'search_result', data: rows.map(intentObject), has_more: false, next_page: null, url: '/v1/payment_intents/search' };
}

export function paymentIntentRoutes(api: ApiRoutes): void {
  api.post('/v1/payment_intents', create);
  api.get('/v1/payment_intents/search', search);
  api.get('/v1/payment_intents/:id', async (ctx) => intentObject(await requireIntent(ctx.db, ctx.account, ctx.path.id!)));
  api.post('/v1/payment_intents/:id/cancel', cancelIntent);
}
