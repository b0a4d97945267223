import type Stripe from 'stripe';
import type { CreatePaymentInput, Money, ProviderPaymentResult, ProviderRefundRecord, ProviderRefundResult, SavedCardDetails, ServicePaymentStatus } from '../../domain/ports.js';
import { ProviderError } from '../../domain/ports.js';
import { formatMinorUnits } from '../../lib/money.js';
import { apiAmountIssue, fromApiAmount, toApiAmount } from './amounts.js';

/**
 * cardpay (Stripe PaymentIntents) wire types and THE status tables: provider statuses and event types
 * to the service's statuses (interface.md "Mappings from provider results to service statuses").
 */

/** PaymentIntent.status → payment status. */
export const INTENT_STATUS: Record<Stripe.PaymentIntent.Status, ServicePaymentStatus> = {
  succeeded: 'completed',
  requires_action: 'pending',
  processing: 'pending',
  requires_confirmation: 'pending',
  requires_capture: 'pending',
  // Only after an attempt failed (last_payment_error set); before any attempt it is still pending.
  requires_payment_method: 'failed',
  canceled: 'failed',
};

/** Refund.status → refund status. */
export const REFUND_STATUS: Record<string, ProviderRefundResult['status']> = {
  succeeded: 'completed',
  pending: 'pending',
  requires_action: 'pending',
  failed: 'failed',
  canceled: 'failed',
};

/**
 * Inbound event type → what it means for the payment (interface.md: cardpay inbound event). A refund event
 * says which object it carries: the service reads the charge's refunds from the provider either way.
 */
export const EVENT_MEANING = {
  'payment_intent.succeeded': { kind: 'payment', status: 'completed' },
  'payment_intent.payment_failed': { kind: 'payment', status: 'failed' },
  // Cancelled at the provider (its dashboard, or an API call not ours) while the payment is pending here
  // (3-D Secure never finished): it can no longer be paid. Our own cancel of a failed payment's intent
  // (abandonPayment) arrives here too, for a payment already failed: a terminal status does not move.
  'payment_intent.canceled': { kind: 'payment', status: 'failed' },
  // A charge's refunds changed (a charge no longer lists them: the service reads them from the provider).
  'charge.refunded': { kind: 'refund', carries: 'charge' },
  // One refund of a charge changed status (pending → succeeded, succeeded → failed). The only such event an
  // endpoint rendering an API version before 2024-10-28.acacia gets for a card refund (refund.* came with
  // that version: docs.stripe.com/changelog/acacia/2024-10-28/refund-webhook-update); a dashboard-made
  // endpoint renders the account's default version, which may be older.
  'charge.refund.updated': { kind: 'refund', carries: 'refund' },
  // One refund was made (by the service or in the dashboard), changed status (pending → succeeded), or failed.
  'refund.created': { kind: 'refund', carries: 'refund' },
  'refund.updated': { kind: 'refund', carries: 'refund' },
  'refund.failed': { kind: 'refund', carries: 'refund' },
} as const satisfies Record<string, { kind: 'payment'; status: 'completed' | 'failed' } | { kind: 'refund'; carries: 'charge' | 'refund' }>;

export type CardpayEventType = keyof typeof EVENT_MEANING;

/** The events our webhook endpoint subscribes to. */
export const WEBHOOK_EVENT_TYPES = Object.keys(EVENT_MEANING) as CardpayEventType[];

export function eventMeaning(type: string): (typeof EVENT_MEANING)[CardpayEventType] | null {
  return Object.prototype.hasOwnProperty.call(EVENT_MEANING, type) ? EVENT_MEANING[type as CardpayEventType] : null;
}

/** What a merchant may pass for a cardpay payment (payment.provider_data); anything else is ignored. */
export interface CardpayPaymentFields {
  payment_method?: string;
  return_url?: string;
  customer?: string;
  off_session?: boolean;
}

type IntentLike = Pick<Stripe.PaymentIntent, 'id' | 'status'> & Partial<Pick<Stripe.PaymentIntent, 'last_payment_error' | 'next_action' | 'cancellation_reason' | 'latest_charge' | 'amount' | 'amount_received' | 'currency'>>;

export function intentStatus(intent: IntentLike): ServicePaymentStatus {
  if (intent.status === 'requires_payment_method' && !intent.last_payment_error) return 'pending';
  // A status this table does not know yet keeps the payment pending: the status sync asks again later.
  return INTENT_STATUS[intent.status] ?? 'pending';
}

export function intentFailureReason(intent: IntentLike): string | null {
  return intentStatus(intent) === 'failed' ? failedIntentReason(intent) : null;
}

/**
 * Why a failed intent failed: a canceled one says so (and why); a failed attempt gives the provider's decline
 * text — also once our own cancel (abandoned) has ended an intent an attempt had failed: that is why it failed.
 */
export function failedIntentReason(intent: { status: string; cancellation_reason?: string | null; last_payment_error?: { message?: string | null } | null }): string {
  if (intent.status === 'canceled' && !(intent.cancellation_reason === 'abandoned' && intent.last_payment_error)) return canceledReason(intent.cancellation_reason);
  return intent.last_payment_error?.message ?? 'The payment failed';
}

/** A canceled intent's failure reason, naming the provider's cancellation_reason when it gives one. */
function canceledReason(cancellationReason: string | null | undefined): string {
  return `Payment canceled${cancellationReason ? ` (${cancellationReason})` : ''}`;
}

/**
 * The 3-D Secure page the cardholder must visit. Only `redirect_to_url` is read: every intent is confirmed
 * with a return_url, so that is what the provider answers; `use_stripe_sdk` is internal to its JS library.
 */
function intentNextAction(intent: IntentLike): ProviderPaymentResult['nextAction'] {
  if (intent.status !== 'requires_action' || intent.next_action?.type !== 'redirect_to_url') return null;
  const url = intent.next_action.redirect_to_url?.url;
  return typeof url === 'string' && url ? { type: 'redirect', url } : null;
}

/** The intent as shown to the merchant: everything but the client secret. */
export function redactIntent(intent: object): Record<string, unknown> {
  const { client_secret: _secret, ...rest } = intent as Record<string, unknown>;
  return rest;
}

export function toPaymentResult(intent: IntentLike): ProviderPaymentResult {
  return {
    providerRef: intent.id,
    status: intentStatus(intent),
    nextAction: intentNextAction(intent),
    failureReason: intentFailureReason(intent),
    data: intent.latest_charge ? { latest_charge: typeof intent.latest_charge === 'string' ? intent.latest_charge : intent.latest_charge.id } : {},
    raw: redactIntent(intent),
    amount: intentMoney(intent, intent.status === 'succeeded'),
  };
}

/**
 * The amount an intent reports, for the status writer's check against ours: once it succeeded, what it
 * collected — amount_received ("Amount that this PaymentIntent collects"; a partial capture collects less
 * than it asked for), never the amount it asked for; before that (nothing collected, amount_received 0),
 * the amount it asks for. A success without amount_received names no amount (refused by the check).
 */
export function intentMoney(intent: { amount?: number | null; amount_received?: number | null; currency?: string | null }, succeeded: boolean): Money | null {
  return wireMoney(succeeded ? intent.amount_received : intent.amount, intent.currency);
}

/**
 * Our amount as the JSON number Stripe takes: in the API's units for its currency (amounts.ts; exact below
 * 2^53, far above any allowed amount). An amount the provider cannot take is refused before any call:
 * normaliseRequest refuses such payments, so only a refund can get here with one.
 */
export function toWireAmount(money: Money): number {
  const units = toApiAmount(money);
  if (units === null) throw new ProviderError('cardpay', 'invalid_request', `cardpay cannot take ${formatMinorUnits(money.minor, money.currency)} ${money.currency}: the amount ${apiAmountIssue(money)}`);
  if (units <= 0n || units > BigInt(Number.MAX_SAFE_INTEGER)) throw new ProviderError('cardpay', 'invalid_request', 'cardpay amount out of range');
  return Number(units);
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v : undefined);

/**
 * A confirmed PaymentIntent for one payment, always with a return_url (the merchant's, else the
 * service's own return page) so 3-D Secure answers `redirect_to_url` and redirect-capable automatic
 * payment methods can be confirmed (the current API refuses them without one). A saved card is charged
 * off-session.
 */
export function createIntentParams(input: CreatePaymentInput, defaultReturnUrl: string): Stripe.PaymentIntentCreateParams {
  const fields = input.fields as CardpayPaymentFields;
  const paymentMethod = text(fields.payment_method);
  const returnUrl = text(fields.return_url) ?? defaultReturnUrl;
  const customer = text(fields.customer);
  const offSession = fields.off_session === true || (fields.off_session as unknown) === 'true';
  return {
    amount: toWireAmount(input.amount),
    currency: input.amount.currency.toLowerCase(),
    confirm: true,
    metadata: { payment_id: input.paymentId, reference: input.reference },
    automatic_payment_methods: { enabled: true },
    return_url: returnUrl,
    ...(paymentMethod ? { payment_method: paymentMethod } : {}),
    ...(customer ? { customer } : {}),
    ...(offSession ? { off_session: true } : {}),
  };
}

export function toRefundResult(refund: Pick<Stripe.Refund, 'id' | 'status' | 'failure_reason'> & Partial<Pick<Stripe.Refund, 'amount' | 'currency'>>): ProviderRefundResult {
  const status = REFUND_STATUS[refund.status ?? ''] ?? 'pending';
  return {
    providerRef: refund.id,
    status,
    failureReason: status === 'failed' ? (refund.failure_reason ?? 'The refund failed') : null,
    raw: refund,
    amount: wireMoney(refund.amount, refund.currency),
  };
}

/**
 * Stripe's integer amount (in the API's units) and lower-case currency as our Money; null when either is
 * missing or it is no exact amount of ours (then a report that moves money is refused by the integrity check).
 */
export function wireMoney(amount: number | null | undefined, currency: string | null | undefined): Money | null {
  return fromApiAmount(amount, currency);
}

export function toRefundRecord(refund: Stripe.Refund): ProviderRefundRecord {
  const metadataRefundId = refund.metadata?.refund_id;
  const status = REFUND_STATUS[refund.status ?? ''] ?? 'pending';
  return {
    providerRef: refund.id,
    status,
    amount: wireMoney(refund.amount, refund.currency),
    ourRefundId: typeof metadataRefundId === 'string' && metadataRefundId ? metadataRefundId : null,
    failureReason: status === 'failed' ? (refund.failure_reason ?? 'The refund failed') : null,
    raw: refund,
  };
}

export function toSavedCard(pm: Pick<Stripe.PaymentMethod, 'id' | 'card'>): SavedCardDetails {
  if (!pm.card) throw new ProviderError('cardpay', 'invalid_request', `cardpay payment method ${pm.id} is not a card`);
  return { paymentMethodId: pm.id, brand: pm.card.brand, last4: pm.card.last4, expMonth: pm.card.exp_month, expYear: pm.card.exp_year };
}
