import { ApiKeySchema } from './api-key.entity.js';
import { EventSchema, WebhookDeliverySchema } from './event.entity.js';
import { MerchantSchema } from './merchant.entity.js';
import { PaymentSchema } from './payment.entity.js';
import { ProviderCredentialSchema } from './provider-credential.entity.js';
import { RefundSchema } from './refund.entity.js';
import { SavedCardSchema } from './saved-card.entity.js';

export * from './api-key.entity.js';
export * from './event.entity.js';
export * from './merchant.entity.js';
export * from './payment.entity.js';
export * from './provider-credential.entity.js';
export * from './refund.entity.js';
export * from './saved-card.entity.js';

/** Every entity, listed explicitly (MikroORM guide style). */
export const entities = [
  MerchantSchema, ApiKeySchema, ProviderCredentialSchema, PaymentSchema, RefundSchema, SavedCardSchema, EventSchema, WebhookDeliverySchema,
];
