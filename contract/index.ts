import { initContract } from '@ts-rest/core';
import { merchantContract } from './merchant.js';

export * from './common.js';
export * from './merchant.js';

const c = initContract();

/**
 * The whole public `/v1` interface. Express handlers, the typed client and openapi.json are all
 * generated from this one object; nothing else describes a route.
 */
export const contract = c.router({
  /** Merchant settings: webhook URL and provider credentials. */
  merchant: merchantContract,
});

export type Contract = typeof contract;
