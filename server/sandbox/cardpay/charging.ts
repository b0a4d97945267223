import { newId } from './db.js';
import type { StripeErrorBody } from './errors.js';
import type { PendingEvent } from './events.js';
import type { IntentRow, PaymentMethodRow, RefundRow } from './objects.js';
import { cardOf, chargeObject, intentObject, paymentMethodObject, refundObject } from './objects.js';
import type { Decline } from './test-cards.js';
import { AUTHENTICATION_FAILURE, DECLINES, type CardBehaviour } from './test-cards.js';

/**
 * What confirming an intent with a card does: the one place that moves an intent between statuses and
 * says which events follow. Mutates the row; the caller saves it.
 */
export interface Transition {
  events: PendingEvent[];
  /** Set when the attempt declined: the 402 card_error body (the intent is in requires_payment_method). */
  decline: StripeErrorBody | null;
  /** The payment method this success set up for future payments (setup_future_usage): the caller saves it (store.saveSetUp). */
  setUp?: PaymentMethodRow;
}

export interface ConfirmOptions {
  offSession: boolean;
  errorOnRequiresAction: boolean;
  returnUrl: string | null;
  /** The simulator's 3-D Secure page of `intent`, opened with its authentication_secret. */
  authenticationUrl: (intent: IntentRow) => string;
}

const docUrl = (code: string) => `https://docs.stripe.com/error-codes/${code.replace(/_/g, '-')}`;

/**
 * A success. With setup_future_usage it also sets the payment method up for future payments and, when the
 * intent has a customer, attaches it to that customer, as at Stripe.
 */
function succeed(intent: IntentRow, pm: PaymentMethodRow): Transition {
  intent.status = 'succeeded';
  intent.payment_method = pm.id;
  intent.amount_received = intent.amount;
  intent.latest_charge = newId('ch');
  intent.next_action = null;
  intent.last_payment_error = null;
  const events: PendingEvent[] = [
    { type: 'charge.succeeded', object: chargeObject(intent, pm) },
    { type: 'payment_intent.succeeded', object: intentObject(intent) },
  ];
  if (!intent.setup_future_usage) return { events, decline: null };
  const attaching = !pm.customer && intent.customer !== null;
  pm.set_up = true;
  if (attaching) {
    pm.customer = intent.customer;
    events.push({ type: 'payment_method.attached', object: paymentMethodObject(pm) });
  }
  return { events, decline: null, setUp: pm };
}

/** A decline: a failed charge, the intent back to requires_payment_method with last_payment_error. */
function decline(intent: IntentRow, pm: PaymentMethodRow, reason: Decline, type: 'card_error' | 'invalid_request_error' = 'card_error', withCharge = true): Transition {
  const charge = withCharge ? newId('ch') : null;
  const error: StripeErrorBody = {
    type,
    code: reason.code,
    ...(reason.decline_code ? { decline_code: reason.decline_code } : {}),
    message: reason.message,
    doc_url: docUrl(reason.code),
    ...(charge ? { charge } : {}),
    payment_method: paymentMethodObject(pm),
  };
  intent.status = 'requires_payment_method';
  // Like Stripe: the failed method is only kept in last_payment_error.
  intent.payment_method = null;
  intent.next_action = null;
  intent.last_payment_error = error as unknown as Record<string, unknown>;
  if (charge) intent.latest_charge = charge;
  const events: PendingEvent[] = [];
  if (charge) events.push({ type: 'charge.failed', object: chargeObject(intent, pm) });
  events.push({ type: 'payment_intent.payment_failed', object: intentObject(intent) });
  return { events, decline: { ...error, payment_intent: intentObject(intent) } };
}

function outcome(intent: IntentRow, pm: PaymentMethodRow, behaviour: Exclude<CardBehaviour, { kind: 'three_d_secure' }>): Transition {
  return behaviour.kind === 'succeed' ? succeed(intent, pm) : decline(intent, pm, behaviour.decline);
}

/**
 * Confirms `intent` with `pm`: succeeds, declines, or asks for 3-D Secure (declined when off-session,
 * unless the card needs none off-session once set up and was).
 */
export function confirm(intent: IntentRow, pm: PaymentMethodRow, options: ConfirmOptions): Transition {
  const behaviour = cardOf(pm).behaviour;
  if (behaviour.kind !== 'three_d_secure') return outcome(intent, pm, behaviour);
  if (options.offSession && behaviour.offSessionOnceSetUp && pm.set_up) return outcome(intent, pm, behaviour.then);
  if (options.offSession || options.errorOnRequiresAction) return decline(intent, pm, DECLINES.authenticationRequired);
  intent.status = 'requires_action';
  intent.payment_method = pm.id;
  intent.last_payment_error = null;
  // A new page per attempt, as Stripe's: the page of an earlier attempt no longer opens.
  intent.authentication_secret = newId('src_client_secret');
  const url = options.authenticationUrl(intent);
  intent.next_action = options.returnUrl
    ? { type: 'redirect_to_url', redirect_to_url: { url, return_url: options.returnUrl } }
    : { type: 'use_stripe_sdk', use_stripe_sdk: { type: 'three_d_secure_redirect', stripe_js: url, source: newId('src') } };
  return { events: [{ type: 'payment_intent.requires_action', object: intentObject(intent) }], decline: null };
}

/** The cardholder finished 3-D Secure: authenticated (then the card's own outcome) or failed. */
export function authenticate(intent: IntentRow, pm: PaymentMethodRow, result: 'complete' | 'fail'): Transition {
  const behaviour = cardOf(pm).behaviour;
  if (result === 'fail') return decline(intent, pm, AUTHENTICATION_FAILURE, 'invalid_request_error', false);
  return outcome(intent, pm, behaviour.kind === 'three_d_secure' ? behaviour.then : behaviour);
}

export function cancel(intent: IntentRow, reason: string | null, canceledAt: number): Transition {
  intent.status = 'canceled';
  intent.next_action = null;
  intent.cancellation_reason = reason;
  intent.canceled_at = String(canceledAt);
  return { events: [{ type: 'payment_intent.canceled', object: intentObject(intent) }], decline: null };
}

export function refunded(intent: IntentRow, pm: PaymentMethodRow | null, refund: RefundRow): PendingEvent[] {
  return [
    { type: 'charge.refunded', object: chargeObject(intent, pm) },
    { type: 'refund.created', object: refundObject(refund) },
  ];
}
