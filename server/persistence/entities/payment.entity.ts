import { defineEntity, type InferEntity } from '@mikro-orm/core';
import type { PaymentStatus } from '../../../contract/index.js';

export type { PaymentStatus };

/** A provider-reported amount that did not match the payment's (or its refund's); see the status writer. */
export interface IntegrityMismatch {
  source: string;
  refund_id?: string;
  /** What else differed (the provider's object is not the one created: its purchase units, payee, intent or captures). */
  issue?: string;
  expected_amount_minor: string;
  expected_currency: string;
  reported_amount_minor: string | null;
  reported_currency: string | null;
  at: string;
}

export type NextAction = { type: 'redirect'; url: string };

export const PaymentSchema = defineEntity({
  name: 'Payment',
  tableName: 'payments',
  properties: (p) => ({
    id: p.uuid().primary(),
    merchantId: p.uuid(),
    provider: p.text(),
    status: p.text().$type<PaymentStatus>(),
    /** Integer minor units of `currency` (ISO 4217 exponent); never a float. */
    amountMinor: p.bigint(),
    currency: p.text(),
    /** amountMinor in major units (exact numeric text), for amount range filters. */
    amount: p.decimal('string'),
    amountRefundedMinor: p.bigint().default(0),
    /** 12 characters, unique: the provider-side account / bill reference. */
    reference: p.text().unique(),
    idempotencyKey: p.text().unique(),
    /** SHA-256 of the normalised request, to tell a replay from a different request with the same key. */
    requestHash: p.text(),
    providerRef: p.text().nullable(),
    /**
     * The provider account the payment was created under (the stored credentials' PROVIDER_ACCOUNT_FIELD at
     * creation; null when none was recorded, and for payments older than the column). Never changes.
     */
    providerAccount: p.text().nullable(),
    receiptNumber: p.text().nullable(),
    failureReason: p.text().nullable(),
    nextAction: p.json<NextAction>().nullable(),
    providerResponse: p.json<unknown>().nullable(),
    /** Provider-specific facts the later steps need (phone, return URLs, capture id, customer, …). */
    providerData: p.json<Record<string, unknown>>(),
    /** Provider reports refused by the integrity check (amount or currency not ours), oldest first. */
    integrityMismatches: p.json<IntegrityMismatch[]>().default([]),
    /** The merchant's own key-value pairs from the create request, returned as given. */
    metadata: p.json<Record<string, string>>().defaultRaw(`'{}'`),
    syncAttempts: p.integer().default(0),
    nextSyncAt: p.datetime().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  }),
});
export type Payment = InferEntity<typeof PaymentSchema>;
