import type { Payment, Refund, SavedCard } from '../../persistence/entities/index.js';
import { formatMinorUnits } from '../../domain/money/money.js';
import type { Provider } from '../../../contract/index.js';
import type { TransitionRow } from '../../domain/payments/payment-history.js';


/** Domain rows → contract DTOs. Entities are never returned as they are. */

export function presentPayment(p: Payment, options: { withProviderResponse?: boolean } = {}) {
  return {
    id: p.id,
    merchant_id: p.merchantId,
    amount: formatMinorUnits(p.amountMinor, p.currency),
    currency: p.currency,
    provider: p.provider as Provider,
    status: p.status,
    provider_ref: p.providerRef ?? null,
    idempotency_key: p.idempotencyKey,
    reference: p.reference,
    amount_refunded: formatMinorUnits(p.amountRefundedMinor, p.currency),
    next_action: p.nextAction ?? null,
    failure_reason: p.failureReason ?? null,
    created_at: p.createdAt.toISOString(),
    updated_at: p.updatedAt.toISOString(),
    ...(options.withProviderResponse ? { provider_response: (p.providerResponse as Record<string, unknown> | null | undefined) ?? null } : {}),
    integrity: presentIntegrity(p),
    metadata: p.metadata ?? {},
  };
}

/** The integrity check's refused reports, amounts as decimal strings of their currency. */
function presentIntegrity(p: Payment) {
  const mismatches = (p.integrityMismatches ?? []).map((m) => ({
    source: m.source,
    ...(m.refund_id ? { refund_id: m.refund_id } : {}),
    ...(m.issue ? { issue: m.issue } : {}),
    expected_amount: formatMinorUnits(BigInt(m.expected_amount_minor), m.expected_currency),
    expected_currency: m.expected_currency,
    reported_amount: m.reported_amount_minor === null ? null : formatMinorUnits(BigInt(m.reported_amount_minor), m.reported_currency ?? m.expected_currency),
    reported_currency: m.reported_currency,
    at: m.at,
  }));
  return { status: mismatches.length > 0 ? ('mismatch' as const) : ('ok' as const), mismatches };
}

/** The capture response: exactly the seven fields of interface.md. */
export function presentCapture(p: Payment) {
  return {
    id: p.id,
    status: p.status,
    provider_ref: p.providerRef ?? null,
    amount: formatMinorUnits(p.amountMinor, p.currency),
    currency: p.currency,
    provider: p.provider as Provider,
    created_at: p.createdAt.toISOString(),
  };
}

export function presentRefund(r: Refund) {
  return {
    id: r.id,
    payment_id: r.paymentId,
    status: r.status,
    provider_ref: r.providerRef ?? null,
    amount: formatMinorUnits(r.amountMinor, r.currency),
    currency: r.currency,
    failure_reason: r.failureReason ?? null,
    metadata: r.metadata ?? {},
    created_at: r.createdAt.toISOString(),
  };
}

export function presentSavedCard(c: SavedCard) {
  return {
    id: c.id,
    provider: 'cardpay' as const,
    brand: c.brand,
    last4: c.last4,
    exp_month: c.expMonth,
    exp_year: c.expYear,
    is_default: c.isDefault,
    created_at: c.createdAt.toISOString(),
  };
}

export function pageMeta(page: number, pageSize: number, total: number) {
  return { page, page_size: pageSize, total };
}

export function presentTransition(t: TransitionRow) {
  return {
    subject: t.subject,
    refund_id: t.refund_id,
    from_status: t.from_status,
    to_status: t.to_status,
    trigger: t.trigger,
    accepted: t.accepted,
    note: t.note,
    created_at: new Date(t.created_at).toISOString(),
  };
}
