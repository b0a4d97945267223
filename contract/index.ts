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
 * The contract's type, named by its parts: the SDK's declarations then refer to each part's type
 * instead of spelling the whole contract out a second time (1 MB of declarations that a merchant's
 * compiler would read and check again).
 */
// A type literal, not an interface: ts-rest's AppRouter is an index signature, which only a literal meets.
export type Contract = {
  merchant: typeof merchantContract;
  payments: typeof paymentsContract;
  refunds: typeof refundsContract;
  providerCallbacks: typeof providerCallbacksContract;
  webhookLogs: typeof webhookLogsContract;
  webhooks: typeof webhooksContract;
  events: typeof eventsContract;
};

/**
 * The whole public `/v1` interface. Express handlers, the typed client and openapi.json are all
 * generated from this one object; nothing else describes a route.
 */
export const contract: Contract = c.router({
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

