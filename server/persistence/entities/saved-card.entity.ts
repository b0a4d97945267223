import { defineEntity, type InferEntity } from '@mikro-orm/core';

/** Only the provider's token, brand, last four digits and expiry: never a card number. */
export const SavedCardSchema = defineEntity({
  name: 'SavedCard',
  tableName: 'saved_cards',
  properties: (p) => ({
    id: p.uuid().primary(),
    merchantId: p.uuid(),
    provider: p.text().default('cardpay'),
    paymentMethodToken: p.text(),
    customerRef: p.text(),
    brand: p.text(),
    last4: p.text(),
    expMonth: p.integer(),
    expYear: p.integer(),
    isDefault: p.boolean().default(false),
    active: p.boolean().default(true),
    createdAt: p.datetime().onCreate(() => new Date()),
    deletedAt: p.datetime().nullable(),
    /** Deleted, its payment method still to be detached at the provider, from then on (CardDetachService). */
    detachDueAt: p.datetime().nullable(),
    /** The provider account of the credentials it was saved under (providerAccountOf); null when not known. */
    providerAccount: p.text().nullable(),
  }),
});
export type SavedCard = InferEntity<typeof SavedCardSchema>;
