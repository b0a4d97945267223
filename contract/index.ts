import { initContract } from '@ts-rest/core';
import { eventsContract } from './events.js';
import { merchantContract } from './merchant.js';
import { paymentsContract } from './payments.js';
import { providerCallbacksContract } from './provider-callbacks.js';
import { refundsContract } from './refunds.js';
import { webhookLogsContract } from './webhook-logs.js';
import { webhooksContract } from './webhooks.js';

export * from './common.js';
export * from './events.js';
export * from './merchant.js';
export * from './payments.js';
export * from './provider-callbacks.js';
export * from './refunds.js';
export * from './webhook-logs.js';
export * from './webhooks.js';
export * from './errors.js';
export * from './outbound-webhooks.js';

const c = initContract();

/**
 * The whole public `/v1` interface. Express handlers, the typed client and openapi.json are all
 * generated from this one object; nothing else describes a route.
 */
export const contract = c.router({
  /** Merchant settings: webhook URL and provider credentials. */
  merchant: merchantContract,
  /** Payments, saved cards and the mobile-money operations. */
  payments: paymentsContract,
  /** Refunds of completed payments. */
  refunds: refundsContract,
  /** Inbound provider callbacks (no API key; provider signatures). */
  providerCallbacks: providerCallbacksContract,
  /** Outbound webhook delivery log and manual retries. */
  webhookLogs: webhookLogsContract,
  /** Recovering failed deliveries and sending a test event. */
  webhooks: webhooksContract,
  /** The events the outbox holds, as their webhook bodies. */
  events: eventsContract,
});

export type Contract = typeof contract;
