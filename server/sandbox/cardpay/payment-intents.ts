import { confirm, cancel } from './charging.js';
import { newId, nowSec } from './db.js';
import { invalidRequest, missingParam, noSuch } from './errors.js';
import type { PendingEvent } from './events.js';
import type { ApiContext, ApiRoutes } from './http.js';
import { ok } from './http.js';
import type { SimResponse } from './idempotency.js';
import { listPage } from './lists.js';
import { incompatibleAmount, unsupportedCurrency } from './currencies.js';
import { aboveMaximum, belowMinimum } from './minimum-amounts.js';
import type { IntentRow, PaymentMethodRow } from './objects.js';
import { intentObject } from './objects.js';
import { httpUrl, metadata, onlyKnown, optBool, optHash, optInt, optString, reqString, stringArray } from './params.js';
import { SINGLE_USE_MESSAGE } from './payment-methods.js';
import {
  findCustomer, insertIntent, markUsedWithIntent, paymentMethodById, requireIntent, resolvePaymentMethod, saveIntent, saveIntentState, saveSetUp,
} from './store.js';

const CREATE_PARAMS = [
  'amount', 'currency', 'payment_method', 'customer', 'confirm', 'return_url', 'off_session', 'metadata', 'automatic_payment_methods',
  'error_on_requires_action', 'description', 'payment_method_types', 'capture_method', 'confirmation_method', 'setup_future_usage',
  'receipt_email', 'statement_descriptor', 'statement_descriptor_suffix', 'use_stripe_sdk',
] as const;

/**
 * The statuses Stripe's refusal lists (its message, as its users quote it, names `processing` too). Stripe
 * cancels a `processing` intent only "in rare cases" (docs.stripe.com/api/payment_intents/cancel): a bank
 * debit under way is not stopped, it settles days later. The simulator refuses it, as is usual there.
 */
const CANCELABLE_LISTED = ['requires_payment_method', 'requires_capture', 'requires_confirmation', 'requires_action', 'processing'];
const CANCELABLE = CANCELABLE_LISTED.filter((status) => status !== 'processing');

/**
 * The cardholder's 3-D Secure page for an intent, served by this simulator: a capability URL, as Stripe's
 * (`…/authenticate/src_…?client_secret=src_client_secret_…`). The `pi_…` id is public (the merchant's
 * provider_ref, in its webhooks and dashboard); the secret is only in this URL (three-ds.ts).
 */
const authenticationUrl = (ctx: ApiContext, intent: IntentRow) =>
  `${ctx.deps.config.publicBaseUrl}/sandbox/cardpay/3ds/${intent.id}?client_secret=${intent.authentication_secret}`;

/** `off_session` takes true/false or Stripe's `one_off`/`recurring`. */
function offSession(ctx: ApiContext): boolean {
  const value = optString(ctx.params, 'off_session');
  if (value === 'one_off' || value === 'recurring') return true;
  return optBool(ctx.params, 'off_session') ?? false;
}

/** `setup_future_usage`: on_session or off_session (a success then sets the payment method up: charging.ts). */
function setupFutureUsage(ctx: ApiContext): string | undefined {
  const value = optString(ctx.params, 'setup_future_usage');
  if (value !== undefined && value !== 'on_session' && value !== 'off_session') {
    throw invalidRequest('Invalid setup_future_usage: must be one of on_session or off_session', 'setup_future_usage');
  }
  return value;
}

/**
 * Stripe refuses an off-session confirmation of an intent that would set the card up (setup_future_usage
 * on the intent or in the request): setting up needs the cardholder. The message is Stripe's as reported
 * by its users; the `param` it names, if any, is not known, so none is given.
 */
function refuseOffSessionSetUp(offSessionNow: boolean, futureUsage: string | null): void {
  if (offSessionNow && futureUsage) {
    throw invalidRequest(
      'You cannot confirm with the `off_session` parameter when `setup_future_usage` is also set on the PaymentIntent because you cannot set up future usages when processing payments off-session.',
    );
  }
}

/** Since API 2023-08-16 automatic payment methods are on when a request names neither them nor payment_method_types. */
const AUTOMATIC_BY_DEFAULT_SINCE = '2023-08-16';

type AutomaticPaymentMethods = { enabled: true; allow_redirects: 'always' | 'never' } | { enabled: false } | null;

/**
 * Stripe refuses a create naming both (whatever `enabled` says), with this message as observed from the
 * API (recorded in sesamecare/stripe-mock's PaymentIntentTest).
 */
const bothPaymentMethodSettings = () =>
  invalidRequest('You may only specify one of these parameters: ["automatic_payment_methods", "payment_method_types"].', 'automatic_payment_methods');

function automaticPaymentMethods(ctx: ApiContext, types: string[] | undefined): AutomaticPaymentMethods {
  const apmHash = optHash(ctx.params, 'automatic_payment_methods');
  if (!apmHash) return !types && ctx.apiVersion >= AUTOMATIC_BY_DEFAULT_SINCE ? { enabled: true, allow_redirects: 'always' } : null;
  if (types) throw bothPaymentMethodSettings();
  onlyKnown(apmHash, ['enabled', 'allow_redirects']);
  const enabled = optBool(apmHash, 'enabled');
  if (enabled === undefined) throw missingParam('automatic_payment_methods[enabled]');
  const allowRedirects = optString(apmHash, 'allow_redirects') ?? 'always';
  if (allowRedirects !== 'always' && allowRedirects !== 'never') {
    throw invalidRequest(`Invalid automatic_payment_methods[allow_redirects]: must be one of always or never`, 'automatic_payment_methods[allow_redirects]');
  }
  return enabled ? { enabled: true, allow_redirects: allowRedirects } : { enabled: false };
}

/** Confirming an intent that may redirect (automatic payment methods with redirects allowed) needs a return_url. */
function requireReturnUrl(intent: IntentRow): void {
  const apm = intent.automatic_payment_methods as AutomaticPaymentMethods;
  if (apm?.enabled && apm.allow_redirects === 'always' && !intent.return_url) {
    throw invalidRequest(
      "This PaymentIntent is configured to accept payment methods enabled in your Dashboard. Because some of these payment methods might redirect your customer off of your page, you must provide a `return_url`. If you don't want to accept redirect-based payment methods, set `automatic_payment_methods[enabled]` to `true` and `automatic_payment_methods[allow_redirects]` to `never` when creating Setup Intents and Payment Intents.",
      'return_url',
    );
  }
}

function amountParam(params: ApiContext['params'], required: boolean): bigint | undefined {
  const amount = optInt(params, 'amount');
  if (amount === undefined) {
    if (required) throw missingParam('amount');
    return undefined;
  }
  if (amount < 1n) throw invalidRequest('This value must be greater than or equal to 1.', 'amount', 'parameter_invalid_integer');
  return amount;
}

function currencyParam(params: ApiContext['params'], required: boolean): string | undefined {
  const raw = required ? reqString(params, 'currency') : optString(params, 'currency');
  if (raw === undefined) return undefined;
  const currency = raw.toLowerCase();
  if (!/^[a-z]{3}$/.test(currency)) throw invalidRequest(`Invalid currency: ${currency}.`, 'currency', 'parameter_invalid_string');
  const unsupported = unsupportedCurrency(currency);
  if (unsupported) throw unsupported;
  return currency;
}

/** A PaymentMethod attached to no Customer that was confirmed with another intent may not be used again. */
function refuseIfUsedElsewhere(pm: PaymentMethodRow, intentId: string): void {
  if (!pm.customer && pm.used_with_intent && pm.used_with_intent !== intentId) {
    throw invalidRequest(SINGLE_USE_MESSAGE, 'payment_method', 'payment_method_unexpected_state');
  }
}

/**
 * A payment method usable by this intent and its customer: not detached, a saved one only with its own
 * customer, and one attached to no customer only with the intent it was first confirmed with (Stripe:
 * such a PaymentMethod is single-use; a test token makes a fresh one every time). `confirming`: this
 * request confirms the intent with it, which uses it up.
 */
async function usablePaymentMethod(ctx: ApiContext, id: string, customerId: string | null, intentId: string, confirming: boolean): Promise<PaymentMethodRow> {
  const pm = await resolvePaymentMethod(ctx.db, ctx.account, id, 'payment_method', confirming ? intentId : null);
  refuseIfUsedElsewhere(pm, intentId);
  if (pm.detached) {
    throw invalidRequest(
      'The provided PaymentMethod was previously detached from a Customer. It may not be used again. To use a PaymentMethod multiple times, you must attach it to a Customer first.',
      'payment_method',
      'payment_method_unexpected_state',
    );
  }
  if (pm.customer && pm.customer !== customerId) {
    throw invalidRequest(
      `The provided PaymentMethod belongs to a Customer, but you did not provide the Customer ${pm.customer}. Pass customer=${pm.customer} to use it.`,
      'customer',
    );
  }
  if (confirming) markUsedWithIntent(ctx.db, pm, intentId);
  return pm;
}

const missingPaymentMethod = () =>
  invalidRequest("You cannot confirm this PaymentIntent because it's missing a payment method. To confirm the PaymentIntent, pass a payment method.", 'payment_method', 'payment_intent_unexpected_state');

/** Confirms a row (not yet saved) and answers like Stripe: 200 with the intent, or 402 with the decline. */
async function confirmAndAnswer(ctx: ApiContext, intent: IntentRow, pm: PaymentMethodRow, events: PendingEvent[], errorOnRequiresAction: boolean): Promise<SimResponse> {
  requireReturnUrl(intent);
  const result = confirm(intent, pm, {
    offSession: intent.off_session,
    errorOnRequiresAction,
    returnUrl: intent.return_url,
    authenticationUrl: (awaiting) => authenticationUrl(ctx, awaiting),
  });
  events.push(...result.events);
  if (result.setUp) await saveSetUp(ctx.db, result.setUp);
  if (result.decline) return { status: 402, body: { error: result.decline }, events };
  return ok(intentObject(intent), events);
}

async function create(ctx: ApiContext): Promise<SimResponse> {
  const { params, account, db } = ctx;
  onlyKnown(params, CREATE_PARAMS);
  const amount = amountParam(params, true)!;
  const currency = currencyParam(params, true)!;
  const refused = incompatibleAmount(amount, currency) ?? belowMinimum(amount, currency) ?? aboveMaximum(amount, currency);
  if (refused) throw refused;
  const confirmNow = optBool(params, 'confirm') ?? false;
  const returnUrl = optString(params, 'return_url');
  if (returnUrl !== undefined) httpUrl(returnUrl, 'return_url');
  const isOffSession = offSession(ctx);
  if (!confirmNow && returnUrl) throw invalidRequest('You can only specify `return_url` when `confirm` is true.', 'return_url');
  if (!confirmNow && isOffSession) throw invalidRequest('You can only specify `off_session` when `confirm` is true.', 'off_session');
  const futureUsage = setupFutureUsage(ctx) ?? null;
  refuseOffSessionSetUp(isOffSession, futureUsage);
  const errorOnRequiresAction = optBool(params, 'error_on_requires_action') ?? false;

  const captureMethod = optString(params, 'capture_method') ?? 'automatic';
  if (captureMethod !== 'automatic' && captureMethod !== 'automatic_async') {
    throw invalidRequest('The simulator only supports capture_method automatic.', 'capture_method');
  }
  const types = stringArray(params, 'payment_method_types');
  if (types && types.some((t) => t !== 'card')) throw invalidRequest('The simulator only supports the payment method type card.', 'payment_method_types');
  const apm = automaticPaymentMethods(ctx, types);

  const customerId = optString(params, 'customer');
  if (customerId && !(await findCustomer(db, account, customerId))) throw noSuch('customer', customerId, 'customer');
  const id = newId('pi');
  const pmParam = optString(params, 'payment_method');
  const pm = pmParam ? await usablePaymentMethod(ctx, pmParam, customerId ?? null, id, confirmNow) : null;
  if (confirmNow && !pm) throw missingPaymentMethod();

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
    setup_future_usage: futureUsage,
    automatic_payment_methods: apm,
    metadata: metadata(params),
    next_action: null,
    last_payment_error: null,
    latest_charge: null,
    amount_received: '0',
    amount_refunded: '0',
    client_secret: `${id}_secret_${newId('x').slice(2)}`,
    authentication_secret: null,
    cancellation_reason: null,
    canceled_at: null,
    created: String(nowSec()),
  };
  const events: PendingEvent[] = [{ type: 'payment_intent.created', object: intentObject(intent) }];
  const answer = confirmNow && pm ? await confirmAndAnswer(ctx, intent, pm, events, errorOnRequiresAction) : ok(intentObject(intent), events);
  insertIntent(db, intent);
  return answer;
}

const CONFIRMABLE = ['requires_payment_method', 'requires_confirmation', 'requires_action'];
const CONFIRM_PARAMS = ['payment_method', 'return_url', 'off_session', 'error_on_requires_action', 'use_stripe_sdk', 'setup_future_usage', 'receipt_email'] as const;

/** POST /v1/payment_intents/{id}/confirm: the same outcomes as create with confirm=true. */
async function confirmIntent(ctx: ApiContext): Promise<SimResponse> {
  const { params } = ctx;
  onlyKnown(params, CONFIRM_PARAMS);
  const intent = await requireIntent(ctx.db, ctx.account, ctx.path.id!, true);
  if (!CONFIRMABLE.includes(intent.status)) {
    throw invalidRequest(
      `You cannot confirm this PaymentIntent because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be confirmed: ${CONFIRMABLE.join(', ')}.`,
      undefined,
      'payment_intent_unexpected_state',
    );
  }
  const returnUrl = optString(params, 'return_url');
  if (returnUrl !== undefined) intent.return_url = httpUrl(returnUrl, 'return_url');
  // Per request, as at Stripe: a confirmation that does not say off_session is on-session, whatever an earlier one said.
  intent.off_session = offSession(ctx);
  intent.setup_future_usage = setupFutureUsage(ctx) ?? intent.setup_future_usage;
  refuseOffSessionSetUp(intent.off_session, intent.setup_future_usage);
  const pmParam = optString(params, 'payment_method');
  const pm = pmParam ? await usablePaymentMethod(ctx, pmParam, intent.customer, intent.id, true) : await paymentMethodById(ctx.db, intent.payment_method);
  if (!pm) throw missingPaymentMethod();
  if (!pmParam) {
    refuseIfUsedElsewhere(pm, intent.id);
    markUsedWithIntent(ctx.db, pm, intent.id);
  }
  const answer = await confirmAndAnswer(ctx, intent, pm, [], optBool(params, 'error_on_requires_action') ?? false);
  saveIntent(ctx.db, intent);
  return answer;
}

const UPDATE_PARAMS = [
  'amount', 'currency', 'metadata', 'description', 'payment_method', 'customer', 'receipt_email', 'setup_future_usage',
  'statement_descriptor', 'statement_descriptor_suffix', 'payment_method_types',
] as const;
/** Fields that may change whatever the status (everything else only before the payment succeeds). */
const ALWAYS_UPDATABLE = ['metadata', 'description', 'receipt_email'];

/** POST /v1/payment_intents/{id}: update before confirmation; metadata keys set, an empty value removes one. */
async function updateIntent(ctx: ApiContext): Promise<SimResponse> {
  const { params } = ctx;
  onlyKnown(params, UPDATE_PARAMS);
  const intent = await requireIntent(ctx.db, ctx.account, ctx.path.id!, true);
  const restricted = Object.keys(params).filter((k) => k !== 'expand' && !ALWAYS_UPDATABLE.includes(k));
  if (restricted.length > 0 && !CONFIRMABLE.includes(intent.status)) {
    throw invalidRequest(
      `You cannot update this PaymentIntent because it has a status of ${intent.status}. Updates are only allowed when the PaymentIntent has a status of requires_payment_method, requires_confirmation, or requires_action.`,
      restricted[0],
      'payment_intent_unexpected_state',
    );
  }
  const amount = amountParam(params, false);
  const currency = currencyParam(params, false);
  if (amount !== undefined || currency !== undefined) {
    const [newAmount, newCurrency] = [amount ?? BigInt(intent.amount), currency ?? intent.currency];
    const refused = incompatibleAmount(newAmount, newCurrency) ?? belowMinimum(newAmount, newCurrency) ?? aboveMaximum(newAmount, newCurrency);
    if (refused) throw refused;
    intent.amount = (amount ?? BigInt(intent.amount)).toString();
    intent.currency = currency ?? intent.currency;
  }
  const customerId = optString(params, 'customer');
  if (customerId) {
    if (!(await findCustomer(ctx.db, ctx.account, customerId))) throw noSuch('customer', customerId, 'customer');
    intent.customer = customerId;
  }
  const pmParam = optString(params, 'payment_method');
  if (pmParam) {
    const pm = await usablePaymentMethod(ctx, pmParam, intent.customer, intent.id, false);
    intent.payment_method = pm.id;
    intent.status = 'requires_confirmation';
    intent.next_action = null;
  }
  intent.setup_future_usage = setupFutureUsage(ctx) ?? intent.setup_future_usage;
  const description = optString(params, 'description');
  if (description !== undefined) intent.description = description;
  if (params.metadata !== undefined) {
    const merged: Record<string, string> = { ...intent.metadata };
    for (const [k, v] of Object.entries(metadata(params))) {
      if (v === '') delete merged[k];
      else merged[k] = v;
    }
    intent.metadata = merged;
  }
  saveIntent(ctx.db, intent);
  return ok(intentObject(intent));
}

/** GET /v1/payment_intents: newest first, optionally one customer's. */
async function listIntents(ctx: ApiContext) {
  const customer = optString(ctx.params, 'customer');
  return listPage<IntentRow>(ctx.db, ctx.account, ctx.params, {
    source: { table: 'sandbox_cardpay_intents', kind: 'payment_intent' },
    where: customer ? ['customer = ?'] : [],
    args: customer ? [customer] : [],
    toObject: intentObject,
    url: '/v1/payment_intents',
  });
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
      `You cannot cancel this PaymentIntent because it has a status of ${intent.status}. Only a PaymentIntent with one of the following statuses may be canceled: ${CANCELABLE_LISTED.join(', ')}.`,
      undefined,
      'payment_intent_unexpected_state',
    );
  }
  const { events } = cancel(intent, reason, nowSec());
  saveIntentState(ctx.db, intent);
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
  api.get('/v1/payment_intents', listIntents);
  api.get('/v1/payment_intents/search', search);
  api.get('/v1/payment_intents/:id', async (ctx) => intentObject(await requireIntent(ctx.db, ctx.account, ctx.path.id!)));
  api.post('/v1/payment_intents/:id', updateIntent);
  api.post('/v1/payment_intents/:id/confirm', confirmIntent);
  api.post('/v1/payment_intents/:id/cancel', cancelIntent);
}
