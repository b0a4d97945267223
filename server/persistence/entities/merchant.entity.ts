import { defineEntity, type InferEntity } from '@mikro-orm/core';

export const MerchantSchema = defineEntity({
  name: 'Merchant',
  tableName: 'merchants',
  properties: (p) => ({
    id: p.uuid().primary(),
    name: p.text(),
    webhookUrl: p.text().nullable(),
    /** AES-256-GCM ciphertext of the `whsec_` signing secret (see domain/crypto/secret-box.ts). */
    webhookSecretEnc: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  }),
});
export type Merchant = InferEntity<typeof MerchantSchema>;
