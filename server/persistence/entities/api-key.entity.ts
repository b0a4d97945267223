import { defineEntity, type InferEntity } from '@mikro-orm/core';

export const ApiKeySchema = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: (p) => ({
    id: p.uuid().primary(),
    merchantId: p.uuid(),
    /** SHA-256 (hex) of the full key; the key itself is shown once and never stored. */
    keyHash: p.text().unique().hidden(),
    /** First characters of the key, to recognise it in listings. */
    keyPrefix: p.text(),
    scopes: p.array(),
    revokedAt: p.datetime().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
  }),
});
export type ApiKey = InferEntity<typeof ApiKeySchema>;
