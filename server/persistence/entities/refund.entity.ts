import { defineEntity, type InferEntity } from '@mikro-orm/core';
import type { RefundStatus } from '../../../contract/index.js';

export type { RefundStatus };

export const RefundSchema = defineEntity({
  name: 'Refund',
  tableName: 'refunds',
  properties: (p) => ({
    id: p.uuid().primary(),
    paymentId: p.uuid(),
    merchantId: p.uuid(),
    status: p.text().$type<RefundStatus>(),
    amountMinor: p.bigint(),
    currency: p.text(),
    providerRef: p.text().nullable(),
    failureReason: p.text().nullable(),
    providerResponse: p.json<unknown>().nullable(),
    /** The merchant's own pairs ({} when none). */
    metadata: p.json<Record<string, string>>().defaultRaw(`'{}'`),
    /** When the refund sync next asks the provider about it while pending; null = not scheduled. */
    nextSyncAt: p.datetime().nullable(),
    syncAttempts: p.integer().default(0),
    /** Status reports the refund sync asked about the current request (provider_ref) without an outcome; 0 again once it is sent again. */
    reportChecks: p.integer().default(0),
    /** Repeats of a mobilemoney reversal (the refund sync's, a resumed Idempotency-Key's; acknowledged or not); while > 0 only a reversal's success settles it. */
    reversalResends: p.integer().default(0),
    /** The provider references of the refund's earlier requests (before a repeat's): their results still count. */
    earlierProviderRefs: p.array().defaultRaw(`'{}'`),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  }),
});
export type Refund = InferEntity<typeof RefundSchema>;
