import { createHash } from 'node:crypto';
import { formatMinorUnits, toMinorUnits } from '../../lib/money.js';
import { toWireValue, walletpayAmountIssue, walletpayIssueField } from './amounts.js';
import type { CreatePaymentInput, Money, ProviderPaymentResult, ProviderRefundResult, RefundInput, RefundReport, ServicePaymentStatus } from '../../domain/ports.js';
import { ProviderError } from '../../domain/ports.js';

/* ----------------------------------------------------------------------------------------------
 * Wire types: the subset of PayPal Orders v2 / Payments v2 / Webhooks v1 the adapter reads.
 * -------------------------------------------------------------------------------------------- */

export interface WireMoney {
  currency_code: string;
  value: string;
}

export interface WireLink {
  href: string;
  rel: string;
  method?: string;
}

export type WireOrderStatus = 'CREATED' | 'SAVED' | 'APPROVED' | 'VOIDED' | 'COMPLETED' | 'PAYER_ACTION_REQUIRED';
export type WireCaptureStatus = 'COMPLETED' | 'DECLINED' | 'PENDING' | 'PARTIALLY_REFUNDED' | 'REFUNDED' | 'FAILED';
export type WireRefundStatus = 'COMPLETED' | 'PENDING' | 'FAILED' | 'CANCELLED';

export interface WireCapture {
  id: string;
  status: WireCaptureStatus;
  status_details?: { reason?: string };
  amount?: WireMoney;
  final_capture?: boolean;
  custom_id?: string;
  invoice_id?: string;
  supplementary_data?: { related_ids?: { order_id?: string } };
  links?: WireLink[];
  create_time?: string;
  update_time?: string;
}

export interface WireRefund {
  id: string;
  status: WireRefundStatus;
  status_details?: { reason?: string };
  amount?: WireMoney;
  custom_id?: string;
  invoice_id?: string;
  links?: WireLink[];
}

/** Who is paid: PayPal names the merchant's account by its id and its email address. */
export interface WirePayee {
  merchant_id?: string;
  email_address?: string;
}

export interface WireOrder {
  id: string;
  status: WireOrderStatus;
  intent?: string;
  purchase_units?: {
    reference_id?: string;
    amount?: WireMoney;
    payee?: WirePayee;
    custom_id?: string;
    invoice_id?: string;
    payments?: { captures?: WireCapture[]; refunds?: WireRefund[] };
  }[];
  payer?: { payer_id?: string };
  links?: WireLink[];
}

export interface WireError {
  name?: string;
  message?: string;
  debug_id?: string;
  details?: { field?: string; issue?: string; description?: string }[];
  /** OAuth errors use `error` / `error_description` instead. */
  error?: string;
  error_description?: string;
}

export interface WireToken {
  access_token: string;
  token_type: string;
  expires_in: number;
  app_id?: string;
  scope?: string;
  nonce?: string;
}

export interface WireWebhook {
  id: string;
  url: string;
  event_types?: { name: string }[];
}

export interface WireEvent {
  id?: string;
  event_type?: string;
  resource_type?: string;
  create_time?: string;
  resource?: Record<string, unknown>;
}

/* ----------------------------------------------------------------------------------------------
 * THE status tables: provider statuses → service statuses (interface.md "Mappings").
 * -------------------------------------------------------------------------------------------- */

/**
 * Order status, used until the order has a capture. A buyer who cancels at the approval page leaves the
 * order as it was (PayPal only redirects them to cancel_url): it stays pending until approved, or until
 * it expires unapproved (404, see provider.ts). VOIDED is PayPal's own decision, final. COMPLETED without
 * a capture proves nothing: PayPal's order_status says a completed order "can indicate a payment was
 * authorized, an authorized payment was captured, or a payment was declined", and to check
 * `purchase_units[].payments.captures[].status` (spec/providers.md). Only a capture completes a payment:
 * the outcome is unknown, the payment stays pending and the status sync asks again.
 */
export const ORDER_STATUS: Record<WireOrderStatus, ServicePaymentStatus> = {
  COMPLETED: 'pending',
  APPROVED: 'pending',
  CREATED: 'pending',
  PAYER_ACTION_REQUIRED: 'pending',
  SAVED: 'pending',
  VOIDED: 'failed',
};

/** Capture status: decides once a capture exists (an order COMPLETED does not prove money moved). */
export const CAPTURE_STATUS: Record<WireCaptureStatus, ServicePaymentStatus> = {
  COMPLETED: 'completed',
  PARTIALLY_REFUNDED: 'completed',
  REFUNDED: 'completed',
  PENDING: 'pending',
  DECLINED: 'failed',
  FAILED: 'failed',
};

export const REFUND_STATUS: Record<WireRefundStatus, ProviderRefundResult['status']> = {
  COMPLETED: 'completed',
  PENDING: 'pending',
  FAILED: 'failed',
  CANCELLED: 'failed',
};

/**
 * Inbound events we act on; every other event type is acknowledged and ignored. A refund event's status
 * is its resource's (REFUND_STATUS) when it names a known one, else the one given here.
 * - PAYMENT.CAPTURE.REFUNDED: a refund of the capture (ours, by custom_id, or one made in PayPal's
 *   dashboard, recorded as a refund made at the provider).
 * - PAYMENT.CAPTURE.REVERSED: PayPal took (part of) the capture back (a chargeback, a reversal). Its
 *   resource is a refund nobody here asked for, so it is recorded like a refund made at the provider: the
 *   money taken back counts as refunded, and the merchant gets payment.refunded.
 * - PAYMENT.REFUND.PENDING / PAYMENT.REFUND.FAILED: a refund that did not complete at once (an eCheck's)
 *   and its later failure, which fails ours and gives its amount back.
 */
export const EVENT_MAPPING: Record<string, { kind: 'payment'; status: 'completed' | 'failed' } | { kind: 'refund'; status: 'completed' | 'pending' | 'failed' }> = {
  'PAYMENT.CAPTURE.COMPLETED': { kind: 'payment', status: 'completed' },
  // A capture declined at once (DECLINED), and one denied after it was pending (e.g. an eCheck that bounced).
  'PAYMENT.CAPTURE.DECLINED': { kind: 'payment', status: 'failed' },
  'PAYMENT.CAPTURE.DENIED': { kind: 'payment', status: 'failed' },
  'PAYMENT.CAPTURE.REFUNDED': { kind: 'refund', status: 'completed' },
  'PAYMENT.CAPTURE.REVERSED': { kind: 'refund', status: 'completed' },
  'PAYMENT.REFUND.PENDING': { kind: 'refund', status: 'pending' },
  'PAYMENT.REFUND.FAILED': { kind: 'refund', status: 'failed' },
};

/** The event types the service subscribes to when it registers its webhook. */
export const SUBSCRIBED_EVENTS = Object.keys(EVENT_MAPPING);

function mapped<K extends string, V>(table: Record<K, V>, value: string | undefined, what: string): V {
  if (value !== undefined && Object.hasOwn(table, value)) return table[value as K];
  // Unknowns are named, not guessed: the outcome stays unknown and a later status sync retries.
  throw new ProviderError('walletpay', 'indeterminate', `walletpay returned an unknown ${what} status ${JSON.stringify(value ?? null)}`);
}

/* ----------------------------------------------------------------------------------------------
 * Requests
 * -------------------------------------------------------------------------------------------- */

export function toWireMoney(money: Money): WireMoney {
  const value = toWireValue(money);
  if (value === null) throw new ProviderError(
      'walletpay',
      'invalid_request',
      `walletpay cannot take ${formatMinorUnits(money.minor, money.currency)} ${money.currency} (${walletpayIssueField(money)}: ${walletpayAmountIssue(money)})`,
    );
  return { currency_code: money.currency, value };
}

/** A wire amount as integer minor units; null when absent or not an amount of a known currency. */
export function moneyOf(raw: unknown): Money | null {
  const m = raw as Partial<WireMoney> | undefined;
  if (!m || typeof m.value !== 'string' || typeof m.currency_code !== 'string') return null;
  try {
    return { minor: toMinorUnits(m.value, m.currency_code, 'value', 'significant'), currency: m.currency_code.toUpperCase() };
  } catch {
    return null;
  }
}

/**
 * An order with intent CAPTURE for the payment. Our payment id rides in `custom_id` (it comes back on
 * the capture and in events), the 12-character reference is the invoice and reference id, and the
 * return/cancel URLs go in `payment_source.paypal.experience_context` (PayPal's current form; the
 * order then answers PAYER_ACTION_REQUIRED with a `payer-action` link).
 */
export function createOrderRequest(input: CreatePaymentInput): Record<string, unknown> {
  const returnUrl = typeof input.fields.return_url === 'string' ? input.fields.return_url : undefined;
  const cancelUrl = typeof input.fields.cancel_url === 'string' ? input.fields.cancel_url : undefined;
  return {
    intent: 'CAPTURE',
    purchase_units: [
      {
        reference_id: input.reference,
        custom_id: input.paymentId,
        invoice_id: input.reference,
        amount: toWireMoney(input.amount),
      },
    ],
    payment_source: {
      paypal: {
        experience_context: {
          ...(returnUrl ? { return_url: returnUrl } : {}),
          ...(cancelUrl ? { cancel_url: cancelUrl } : {}),
          user_action: 'PAY_NOW',
          shipping_preference: 'NO_SHIPPING',
        },
      },
    },
  };
}

/** Always an explicit amount (what we recorded), so our books and the provider's agree exactly. */
export function refundRequest(input: RefundInput): Record<string, unknown> {
  return { amount: toWireMoney(input.amount), custom_id: input.refundId };
}

/** `PayPal-Request-Id` allows 1–108 characters: a longer key is replaced by its SHA-256 (still unique per key). */
export function requestId(key: string): string {
  return key.length <= 108 ? key : createHash('sha256').update(key).digest('hex');
}

/* ----------------------------------------------------------------------------------------------
 * Responses
 * -------------------------------------------------------------------------------------------- */

/** The order's latest capture, if any. */
export function latestCapture(order: WireOrder): WireCapture | null {
  const captures = order.purchase_units?.flatMap((u) => u.payments?.captures ?? []) ?? [];
  return captures.at(-1) ?? null;
}

/** The link the buyer must follow to approve: `payer-action` (experience_context) or `approve`. */
export function approvalLink(order: WireOrder): string | null {
  const link = order.links?.find((l) => l.rel === 'payer-action') ?? order.links?.find((l) => l.rel === 'approve');
  return link?.href ?? null;
}

/** Why a capture failed, as the payment's failure_reason says it: `capture DECLINED (<reason>)` (the capture's answer and its event alike). */
export function captureFailureReason(status: string, reason: string | null | undefined): string {
  return `capture ${status}${reason ? ` (${reason})` : ''}`;
}

/**
 * The payee the create answer named (its only purchase unit's), kept in provider_data as `payee`: null
 * when it named none (nothing is compared then).
 */
export function payeeOf(order: WireOrder): WirePayee | null {
  const payee = order.purchase_units?.[0]?.payee;
  const merchantId = typeof payee?.merchant_id === 'string' && payee.merchant_id ? payee.merchant_id : undefined;
  const email = typeof payee?.email_address === 'string' && payee.email_address ? payee.email_address : undefined;
  return merchantId || email ? { ...(merchantId ? { merchant_id: merchantId } : {}), ...(email ? { email_address: email } : {}) } : null;
}

/** The payee kept from the create answer (provider_data.payee), or null. */
export function storedPayee(data: Record<string, unknown>): WirePayee | null {
  const payee = data.payee;
  if (!payee || typeof payee !== 'object') return null;
  return payeeOf({ id: '', status: 'CREATED', purchase_units: [{ payee: payee as WirePayee }] });
}

/**
 * What makes the order another than the one the service created, besides its amount (which the status
 * writer compares): the service creates one purchase unit, paid to the payee its create answer named,
 * with intent CAPTURE, and captures it once. PayPal's PATCH lets anyone holding the merchant's
 * credentials add or replace purchase units and replace a unit's payee email; a capture takes every
 * unit. Null when nothing differs. A field the read leaves out is not compared (PayPal's minimal
 * answers name no payee or intent).
 */
export function orderIntegrityIssue(order: WireOrder, payee: WirePayee | null | undefined): string | null {
  const issues: string[] = [];
  const units = order.purchase_units ?? [];
  if (units.length > 1) issues.push(`the order has ${units.length} purchase units, not the one it was created with`);
  if (typeof order.intent === 'string' && order.intent !== 'CAPTURE') issues.push(`the order's intent is ${order.intent}, not CAPTURE`);
  const captures = units.flatMap((u) => u.payments?.captures ?? []);
  if (captures.length > 1) issues.push(`the order has ${captures.length} captures, not one`);
  const read = units[0]?.payee;
  if (payee && read) {
    const otherId = payee.merchant_id !== undefined && read.merchant_id !== undefined && read.merchant_id !== payee.merchant_id;
    const otherEmail = payee.email_address !== undefined && read.email_address !== undefined && read.email_address.toLowerCase() !== payee.email_address.toLowerCase();
    if (otherId || otherEmail) {
      const named = (p: WirePayee) => [p.merchant_id, p.email_address].filter(Boolean).join(' / ');
      issues.push(`the order pays ${named(read)}, not ${named(payee)}, the payee it was created for`);
    }
  }
  return issues.length > 0 ? issues.join('; ') : null;
}

/** The sum of `amounts` when each is an amount of one and the same currency; null otherwise (no amount). */
function total(amounts: (WireMoney | undefined)[]): Money | null {
  const each = amounts.map(moneyOf);
  if (each.length === 0 || each.some((m) => m === null)) return null;
  const currency = each[0]!.currency;
  if (each.some((m) => m!.currency !== currency)) return null;
  return { minor: each.reduce((sum, m) => sum + m!.minor, 0n), currency };
}

/**
 * The refunds the order lists (PayPal lists its captures' refunds under each unit's payments.refunds), as
 * a refund event would report them: what a capture answered REFUNDED or PARTIALLY_REFUNDED gave back. A
 * refund of an unknown status is reported pending (nothing is applied from it).
 */
function refundsOf(order: WireOrder): RefundReport[] {
  return (order.purchase_units ?? []).flatMap((u) => u.payments?.refunds ?? []).filter((r) => typeof r?.id === 'string' && r.id).map((r) => {
    const status = Object.hasOwn(REFUND_STATUS, r.status) ? REFUND_STATUS[r.status] : 'pending';
    return {
      providerRefundId: r.id,
      ourRefundId: r.custom_id ?? null,
      status,
      amount: moneyOf(r.amount),
      failureReason: status === 'failed' ? `refund ${r.status}${r.status_details?.reason ? ` (${r.status_details.reason})` : ''}` : null,
      raw: r,
    };
  });
}

/**
 * The order as a payment result. `payee`: the one the create answer named (provider_data.payee), compared
 * with the order's (orderIntegrityIssue). The amount is what the order captured once it has captures (all
 * of them), before that what it asks the buyer to approve (all its units): an order patched to more units,
 * or captured more than once, reports more than the payment's amount.
 */
export function orderToResult(order: WireOrder, payee?: WirePayee | null): ProviderPaymentResult {
  const capture = latestCapture(order);
  const status = capture ? mapped(CAPTURE_STATUS, capture.status, 'capture') : mapped(ORDER_STATUS, order.status, 'order');
  const approve = status === 'pending' && !capture && order.status !== 'COMPLETED' ? approvalLink(order) : null;
  let failureReason: string | null = null;
  if (status === 'failed') failureReason = capture ? captureFailureReason(capture.status, capture.status_details?.reason) : 'order voided by walletpay: nothing can be captured';
  const units = order.purchase_units ?? [];
  const captures = units.flatMap((u) => u.payments?.captures ?? []);
  const refunds = capture ? refundsOf(order) : [];
  return {
    providerRef: order.id,
    status,
    nextAction: approve ? { type: 'redirect', url: approve } : null,
    failureReason,
    receiptNumber: capture?.id ?? null,
    // The approval link is kept: PayPal lists it only until the buyer approves, and a buyer whose funding
    // source is declined at capture is sent back to it (provider.ts).
    data: capture ? { orderId: order.id, captureId: capture.id, captureStatus: capture.status } : { orderId: order.id, ...(approve ? { approvalUrl: approve } : {}) },
    raw: order,
    // What was captured once there is a capture; before that, what the order asks the buyer to approve.
    amount: captures.length > 1 ? total(captures.map((c) => c.amount)) : capture ? moneyOf(capture.amount) : units.length > 1 ? total(units.map((u) => u.amount)) : moneyOf(units[0]?.amount),
    integrityIssue: orderIntegrityIssue(order, payee),
    ...(refunds.length > 0 ? { refunds } : {}),
  };
}

export function refundToResult(refund: WireRefund): ProviderRefundResult {
  const status = mapped(REFUND_STATUS, refund.status, 'refund');
  return {
    providerRef: refund.id,
    status,
    failureReason: status === 'failed' ? `refund ${refund.status}${refund.status_details?.reason ? ` (${refund.status_details.reason})` : ''}` : null,
    raw: refund,
    amount: moneyOf(refund.amount),
  };
}

/** The capture id a refund belongs to: the last path segment of its `rel: "up"` link. */
export function captureIdOfRefund(refund: { links?: WireLink[] }): string | null {
  const up = refund.links?.find((l) => l.rel === 'up')?.href;
  if (!up) return null;
  const match = /\/captures\/([^/?#]+)/.exec(up);
  return match ? decodeURIComponent(match[1]!) : null;
}

/* ----------------------------------------------------------------------------------------------
 * Errors
 * -------------------------------------------------------------------------------------------- */

/** The provider's most specific code: the first detail's issue, else the error name. */
export function errorCode(body: unknown): string | undefined {
  const e = (body ?? {}) as WireError;
  return e.details?.[0]?.issue ?? e.name ?? e.error;
}

/**
 * A non-2xx answer as a ProviderError. A 5xx, or a 409 PREVIOUS_REQUEST_IN_PROGRESS, on a call that
 * changes something is `indeterminate` (it may have happened); on a read it is `unavailable`.
 */
export function errorFromResponse(status: number, body: unknown, options: { mutating: boolean }): ProviderError {
  const e = (body ?? {}) as WireError;
  const code = errorCode(body);
  const said = [e.details?.[0]?.description ?? e.message ?? e.error_description].filter(Boolean).join('');
  const message = `walletpay answered ${status}${code ? ` ${code}` : ''}${said ? `: ${said}` : ''}`.slice(0, 500);
  if (status === 401 || status === 403) return new ProviderError('walletpay', 'auth', message, code);
  if (status === 429) return new ProviderError('walletpay', 'rate_limited', message, code);
  // "A previous request on this resource is currently in progress": not a refusal. That request (ours
  // with the same PayPal-Request-Id, or another one on the same capture) may yet do what we asked, so the
  // outcome is unknown; its event or the refund sync settles it.
  if (status >= 500 || (status === 409 && code === 'PREVIOUS_REQUEST_IN_PROGRESS')) {
    return new ProviderError('walletpay', options.mutating ? 'indeterminate' : 'unavailable', message, code);
  }
  // PayPal's "Specified resource ID does not exist" for an id in the path (an order that expired unapproved).
  const gone = status === 404 && code === 'INVALID_RESOURCE_ID' ? ('gone' as const) : undefined;
  return new ProviderError('walletpay', 'invalid_request', message, code, undefined, gone);
}
