import { defineEntity, type InferEntity } from '@mikro-orm/core';

export const PAYMENT_STATUSES = ['pending', 'completed', 'failed', 'refunded', 'reversed'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

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
    receiptNumber: p.text().nullable(),
    failureReason: p.text().nullable(),
    nextAction: p.json<NextAction>().nullable(),
    providerResponse: p.json<unknown>().nullable(),
    /** Provider-specific facts the later steps need (phone, return URLs, capture id, customer, …). */
    providerData: p.json<Record<string, unknown>>(),
    syncAttempts: p.integer().default(0),
    nextSyncAt: p.datetime().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  }),
});
export type Payment = InferEntity<typeof PaymentSchema>;
