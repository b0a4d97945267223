import { createHash } from 'node:crypto';
import { formatValue, paypalDigits } from './currencies.js';
import { isoTime } from './db.js';

/** Timestamps as the driver hands them over (MikroORM keeps PostgreSQL's text form). */
type Timestamp = Date | string;

/** Rows as stored (bigint columns arrive as strings from pg). */
export interface OrderRow {
  id: string;
  client_id: string;
  request_id: string | null;
  intent: string;
  status: 'CREATED' | 'SAVED' | 'APPROVED' | 'VOIDED' | 'COMPLETED' | 'PAYER_ACTION_REQUIRED';
  purchase_unit: PurchaseUnitInput;
  amount_minor: string;
  currency: string;
  experience: Experience;
  uses_payment_source: boolean;
  payer_id: string | null;
  /** What the approval chose (approval.ts ACTIONS): how the capture, and its refunds, turn out. */
  funding: 'ok' | 'declined' | 'pending' | 'pending_denied' | 'echeck' | 'instrument_declined' | 'refused';
  capture_request_id: string | null;
  /** When the buyer was first sent to approve (the approval page opened): the order lives 3 h from then (store.ts ORDER_LIVE). */
  redirected_at: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CaptureRow {
  id: string;
  order_id: string;
  client_id: string;
  status: 'COMPLETED' | 'DECLINED' | 'PENDING' | 'PARTIALLY_REFUNDED' | 'REFUNDED' | 'FAILED';
  status_reason: string | null;
  amount_minor: string;
  currency: string;
  refunded_minor: string;
  custom_id: string | null;
  invoice_id: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface RefundRow {
  id: string;
  capture_id: string;
  client_id: string;
  request_id: string | null;
  status: 'COMPLETED' | 'PENDING' | 'FAILED' | 'CANCELLED';
  status_reason: string | null;
  amount_minor: string;
  currency: string;
  invoice_id: string | null;
  custom_id: string | null;
  note_to_payer: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** The purchase unit fields the simulator keeps from the request. */
export interface PurchaseUnitInput {
  reference_id?: string;
  custom_id?: string;
  invoice_id?: string;
  description?: string;
}

/** Where the buyer goes back to, from `application_context` or `payment_source.paypal.experience_context`. */
export interface Experience {
  return_url?: string;
  cancel_url?: string;
  brand_name?: string;
  user_action?: string;
  shipping_preference?: string;
  landing_page?: string;
  locale?: string;
}

type Link = { href: string; rel: string; method: string };

export const money = (minor: bigint | string, currency: string) => ({
  currency_code: currency,
  value: formatValue(BigInt(minor), currency),
});

/** A sandbox fee schedule: 3.49% + 0.49 in the currency's major unit, in integer minor units. */
function paypalFee(gross: bigint, currency: string): bigint {
  const digits = paypalDigits(currency) ?? 2;
  const fixed = (49n * 10n ** BigInt(digits)) / 100n;
  const fee = (gross * 349n) / 10_000n + fixed;
  return fee > gross ? gross : fee;
}

/** A stable merchant id per client, for `payee.merchant_id`. */
export function merchantIdOf(clientId: string): string {
  return createHash('sha256').update(`merchant:${clientId}`).digest('hex').toUpperCase().slice(0, 13);
}

const SANDBOX_BUYER = {
  name: { given_name: 'Sandbox', surname: 'Buyer' },
  email_address: 'sb-buyer@personal.example.com',
  address: { country_code: 'US' },
};

export function captureView(base: string, c: CaptureRow, options: { withOrderId?: boolean } = {}): Record<string, unknown> {
  const gross = BigInt(c.amount_minor);
  const settled = c.status !== 'DECLINED' && c.status !== 'FAILED' && c.status !== 'PENDING';
  const fee = paypalFee(gross, c.currency);
  return {
    id: c.id,
    status: c.status,
    ...(c.status_reason ? { status_details: { reason: c.status_reason } } : {}),
    amount: money(gross, c.currency),
    final_capture: true,
    seller_protection: { status: 'ELIGIBLE', dispute_categories: ['ITEM_NOT_RECEIVED', 'UNAUTHORIZED_TRANSACTION'] },
    ...(settled
      ? { seller_receivable_breakdown: { gross_amount: money(gross, c.currency), paypal_fee: money(fee, c.currency), net_amount: money(gross - fee, c.currency) } }
      : {}),
    ...(c.invoice_id ? { invoice_id: c.invoice_id } : {}),
    ...(c.custom_id ? { custom_id: c.custom_id } : {}),
    ...(options.withOrderId ? { supplementary_data: { related_ids: { order_id: c.order_id } } } : {}),
    links: [
      { href: `${base}/v2/payments/captures/${c.id}`, rel: 'self', method: 'GET' },
      { href: `${base}/v2/payments/captures/${c.id}/refund`, rel: 'refund', method: 'POST' },
      { href: `${base}/v2/checkout/orders/${c.order_id}`, rel: 'up', method: 'GET' },
    ],
    create_time: isoTime(c.created_at),
    update_time: isoTime(c.updated_at),
  };
}

export function refundView(base: string, r: RefundRow, capture: CaptureRow): Record<string, unknown> {
  const gross = BigInt(r.amount_minor);
  return {
    id: r.id,
    status: r.status,
    ...(r.status_reason ? { status_details: { reason: r.status_reason } } : {}),
    amount: money(gross, r.currency),
    ...(r.invoice_id ? { invoice_id: r.invoice_id } : {}),
    ...(r.custom_id ? { custom_id: r.custom_id } : {}),
    ...(r.note_to_payer ? { note_to_payer: r.note_to_payer } : {}),
    seller_payable_breakdown: {
      gross_amount: money(gross, r.currency),
      paypal_fee: money(0n, r.currency),
      net_amount: money(gross, r.currency),
      total_refunded_amount: money(capture.refunded_minor, capture.currency),
    },
    links: [
      { href: `${base}/v2/payments/refunds/${r.id}`, rel: 'self', method: 'GET' },
      { href: `${base}/v2/payments/captures/${r.capture_id}`, rel: 'up', method: 'GET' },
    ],
    create_time: isoTime(r.created_at),
    update_time: isoTime(r.updated_at),
  };
}

/** The buyer-facing approval page of an order. */
export const approvalUrl = (base: string, orderId: string) => `${base}/checkoutnow?token=${encodeURIComponent(orderId)}`;

function orderLinks(base: string, o: OrderRow): Link[] {
  const self = `${base}/v2/checkout/orders/${o.id}`;
  const links: Link[] = [{ href: self, rel: 'self', method: 'GET' }];
  if (o.status === 'CREATED') links.push({ href: approvalUrl(base, o.id), rel: 'approve', method: 'GET' });
  if (o.status === 'PAYER_ACTION_REQUIRED') links.push({ href: approvalUrl(base, o.id), rel: 'payer-action', method: 'GET' });
  if (o.status === 'CREATED' || o.status === 'APPROVED') links.push({ href: self, rel: 'update', method: 'PATCH' });
  if (o.status === 'CREATED' || o.status === 'APPROVED') links.push({ href: `${self}/capture`, rel: 'capture', method: 'POST' });
  return links;
}

/** The full order representation (`Prefer: return=representation`). */
export function orderView(base: string, o: OrderRow, captures: CaptureRow[], refunds: RefundRow[]): Record<string, unknown> {
  const pu = o.purchase_unit;
  const approved = o.payer_id !== null;
  const payments = captures.length > 0
    ? {
      payments: {
        captures: captures.map((c) => captureView(base, c)),
        ...(refunds.length > 0
          ? { refunds: refunds.map((r) => refundView(base, r, captures.find((c) => c.id === r.capture_id)!)) }
          : {}),
      },
    }
    : {};
  return {
    id: o.id,
    intent: o.intent,
    status: o.status,
    ...(o.uses_payment_source || approved
      ? {
        payment_source: {
          paypal: approved
            ? { email_address: SANDBOX_BUYER.email_address, account_id: o.payer_id, account_status: 'VERIFIED', name: SANDBOX_BUYER.name, address: SANDBOX_BUYER.address }
            : {},
        },
      }
      : {}),
    purchase_units: [
      {
        reference_id: pu.reference_id ?? 'default',
        amount: money(o.amount_minor, o.currency),
        payee: { merchant_id: merchantIdOf(o.client_id), email_address: 'sb-merchant@business.example.com' },
        ...(pu.description ? { description: pu.description } : {}),
        ...(pu.custom_id ? { custom_id: pu.custom_id } : {}),
        ...(pu.invoice_id ? { invoice_id: pu.invoice_id } : {}),
        ...payments,
      },
    ],
    ...(approved ? { payer: { ...SANDBOX_BUYER, payer_id: o.payer_id } } : {}),
    create_time: isoTime(o.created_at),
    ...(isoTime(o.updated_at) !== isoTime(o.created_at) ? { update_time: isoTime(o.updated_at) } : {}),
    links: orderLinks(base, o),
  };
}

/** `Prefer: return=minimal` (PayPal's default): id, status, payment source and links. */
export function minimalOrderView(base: string, o: OrderRow): Record<string, unknown> {
  return {
    id: o.id,
    status: o.status,
    ...(o.uses_payment_source ? { payment_source: { paypal: {} } } : {}),
    links: orderLinks(base, o),
  };
}

/**
 * A capture's answer without `Prefer: return=representation` (PayPal's default, "minimal"). PayPal's own
 * minimal capture still carries the capture: id, status, payment_source, purchase_units with only
 * reference_id and payments.captures, payer and links — not the order's intent, amounts, payee, ids or
 * times (PayPal's capture sample response; its sample integration reads purchase_units[0].payments.captures[0]
 * from a capture sent without Prefer).
 */
export function minimalCaptureView(base: string, o: OrderRow, captures: CaptureRow[]): Record<string, unknown> {
  const full = orderView(base, o, captures, []);
  const unit = (full.purchase_units as Record<string, unknown>[])[0]!;
  return {
    id: full.id,
    status: full.status,
    ...(full.payment_source ? { payment_source: full.payment_source } : {}),
    purchase_units: [{ reference_id: unit.reference_id, ...(unit.payments ? { payments: unit.payments } : {}) }],
    ...(full.payer ? { payer: full.payer } : {}),
    links: full.links,
  };
}
