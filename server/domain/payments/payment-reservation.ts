import type { EntityManager } from '@mikro-orm/postgresql';
import type { Payment } from '../../persistence/entities/index.js';
import type { KeyClaimStatement } from './idempotency-keys.js';
import { queryPrepared } from '../../persistence/prepared-statements.js';
import { PAYMENT_COLUMNS, paymentFromRow } from './payment-row.js';
import { creationAuditSql } from './status-writer.js';

/** What a new payment is written with; everything else takes its column default. */
export interface PaymentReservation {
  id: string;
  merchantId: string;
  provider: string;
  amountMinor: bigint;
  currency: string;
  /** amountMinor in major units (exact numeric text). */
  amount: string;
  reference: string;
  idempotencyKey: string;
  requestHash: string;
  providerData: Record<string, unknown>;
  /** The merchant's metadata ({} when none). */
  metadata: Record<string, string>;
  /** The first status-sync re-check, this long after creation. */
  firstSyncAfterMs: number;
  /** The provider account of the credentials it is created under (providerAccountOf), null when unknown. */
  providerAccount: string | null;
}

/**
 * The idempotency key's claim and the payment written as `pending` with its first audit row, in ONE
 * statement: the claim (a CTE), the payment inserted FROM it, the audit row FROM the payment. They exist
 * together or not at all, in one round trip. Null when the claim took nothing (the key is not new).
 * The payment comes back as written (RETURNING), so nobody reads it again. A prepared statement: its text
 * is the same for every request.
 */
export async function reservePayment(em: EntityManager, claim: KeyClaimStatement, p: PaymentReservation): Promise<{ keyId: string; payment: Payment } | null> {
  const rows = await queryPrepared<Record<string, unknown>>(
    em,
    `WITH claim AS (${claim.sql}),
      payment AS (
        INSERT INTO payments (id, merchant_id, provider, status, amount_minor, currency, amount, reference, idempotency_key, request_hash, provider_data, metadata, next_sync_at, provider_account)
        SELECT ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, now() + ? * interval '1 millisecond', ? FROM claim
        RETURNING ${PAYMENT_COLUMNS}),
      audit AS (${creationAuditSql('payment')})
    SELECT claim.id AS claimed_key_id, payment.* FROM claim, payment`,
    [
      ...claim.params,
      p.id, p.merchantId, p.provider, p.amountMinor.toString(), p.currency, p.amount, p.reference, p.idempotencyKey, p.requestHash,
      JSON.stringify(p.providerData), JSON.stringify(p.metadata), p.firstSyncAfterMs, p.providerAccount,
    ],
  );
  const row = rows[0];
  if (!row) return null;
  const { claimed_key_id: keyId, ...columns } = row;
  // provider_response is not written at reservation: the column's default, null.
  return { keyId: String(keyId), payment: paymentFromRow(columns, null) };
}
