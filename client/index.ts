import { initClient } from '@ts-rest/core';
import { contract } from '../contract/index.js';

export interface PaymentsClientOptions {
  baseUrl: string;
  apiKey: string;
}

/** A typed client for every `/v1` route, built from the same contract as the server. */
export function createPaymentsClient(options: PaymentsClientOptions) {
  return initClient(contract, {
    baseUrl: options.baseUrl.replace(/\/$/, ''),
    baseHeaders: { 'x-api-key': options.apiKey },
    validateResponse: false,
  });
}

export type PaymentsClient = ReturnType<typeof createPaymentsClient>;
export { contract } from '../contract/index.js';
export { verifyWebhook, WebhookVerificationError } from './webhooks.js';
export type { VerifyWebhookOptions, WebhookEvent, WebhookEventData, WebhookEventType, WebhookVerificationReason } from './webhooks.js';
