import { defineEntity, type InferEntity } from '@mikro-orm/core';

export const ProviderCredentialSchema = defineEntity({
  name: 'ProviderCredential',
  tableName: 'provider_credentials',
  uniques: [{ properties: ['merchantId', 'provider'] }],
  properties: (p) => ({
    id: p.uuid().primary(),
    merchantId: p.uuid(),
    provider: p.text(),
    /** AES-256-GCM ciphertext of the whole provider sub-object (JSON). */
    secretsEnc: p.text().hidden(),
    /** The masked view returned to the merchant: secrets as `****` + last four (maskSecret). */
    configSummary: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  }),
});
export type ProviderCredential = InferEntity<typeof ProviderCredentialSchema>;
