import type { IntegrityMismatch, NextAction, Payment, PaymentStatus } from '../../persistence/entities/index.js';

/** A `payments` row as node-postgres returns it from `RETURNING ${PAYMENT_COLUMNS}` (bigints as text, jsonb parsed). */
export type PaymentRow = Record<string, unknown>;

/**
 * The columns a hot-path statement returns for `paymentFromRow`, named rather than `*` (a prepared
 * statement's result shape must not change when a migration adds a column). provider_response is left
 * out: the statement's caller knows it (it just wrote it, or the payment it started from had it), and
 * it is the largest column by far.
 */
export const PAYMENT_COLUMNS = [
  'id', 'merchant_id', 'provider', 'status', 'amount_minor', 'currency', 'amount', 'amount_refunded_minor', 'reference',
  'idempotency_key', 'request_hash', 'provider_ref', 'provider_account', 'receipt_number', 'failure_reason', 'next_action', 'provider_data',
  'integrity_mismatches', 'metadata', 'sync_attempts', 'next_sync_at', 'created_at', 'updated_at',
].join(', ');

const date = (value: unknown) => (value instanceof Date ? value : new Date(String(value)));

/**
 * The Payment a raw statement wrote, from its RETURNING row (PAYMENT_COLUMNS) and the provider response
 * the caller knows it holds, without the ORM's hydration (a profile of POST /v1/payments showed `em.map`
 * at ~4 % of the process's CPU for the two rows of a create). The result is a plain object of the
 * entity's shape, not managed by any EntityManager: for presenting and for passing on, never for flushing.
 */
export function paymentFromRow(row: PaymentRow, providerResponse: unknown): Payment {
  return {
    id: row.id as string,
    merchantId: row.merchant_id as string,
    provider: row.provider as string,
    status: row.status as PaymentStatus,
    amountMinor: BigInt(row.amount_minor as string),
    currency: row.currency as string,
    amount: row.amount as string,
    amountRefundedMinor: BigInt(row.amount_refunded_minor as string),
    reference: row.reference as string,
    idempotencyKey: row.idempotency_key as string,
    requestHash: row.request_hash as string,
    providerRef: (row.provider_ref as string | null) ?? null,
    providerAccount: (row.provider_account as string | null) ?? null,
    receiptNumber: (row.receipt_number as string | null) ?? null,
    failureReason: (row.failure_reason as string | null) ?? null,
    nextAction: (row.next_action as NextAction | null) ?? null,
    providerResponse: providerResponse ?? null,
    providerData: (row.provider_data as Record<string, unknown>) ?? {},
    integrityMismatches: (row.integrity_mismatches as IntegrityMismatch[]) ?? [],
    metadata: (row.metadata as Record<string, string>) ?? {},
    syncAttempts: Number(row.sync_attempts),
    nextSyncAt: row.next_sync_at === null || row.next_sync_at === undefined ? null : date(row.next_sync_at),
    createdAt: date(row.created_at),
    updatedAt: date(row.updated_at),
  };
}
