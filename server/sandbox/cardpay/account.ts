import type { ApiRoutes } from './http.js';

/**
 * `GET /v1/account`: the account the calling key belongs to, as Stripe answers it (docs.stripe.com/api/accounts/retrieve,
 * "retrieve account" without an id). A key is its own account here unless a roll issued it, which gives it the
 * rolled key's (auth.ts, roll-key.ts): the id is derived from that tenant, so it is the same at every call and for
 * every key of the account, and another account's is another. Only what the service reads (`id`) and the
 * object's usual top-level fields, for a test-mode standard account that can take charges.
 */
export function accountRoutes(api: ApiRoutes): void {
  api.get('/v1/account', async ({ account }) => accountObject(account));
}

/**
 * The currency every simulated account settles in (its `default_currency`: a US account, `country: 'US'`).
 * Stripe converts a charge in another currency to it, and its minimum charge applies to the converted
 * amount (minimum-amounts.ts).
 */
export const SETTLEMENT_CURRENCY = 'usd';

/** Stripe's account ids are `acct_` and 16 characters. */
export const simulatedAccountId = (tenant: string): string => `acct_1${tenant.slice(0, 15).toUpperCase()}`;

function accountObject(tenant: string) {
  return {
    id: simulatedAccountId(tenant),
    object: 'account',
    business_profile: { mcc: null, name: null, product_description: null, support_email: null, support_phone: null, support_url: null, url: null },
    business_type: null,
    capabilities: { card_payments: 'active', transfers: 'active' },
    charges_enabled: true,
    controller: { type: 'account' },
    country: 'US',
    // Stable for an account: seconds derived from its tenant, within 2023.
    created: 1_672_531_200 + (parseInt(tenant.slice(0, 8), 16) % 31_536_000),
    default_currency: SETTLEMENT_CURRENCY,
    details_submitted: true,
    email: null,
    metadata: {},
    payouts_enabled: true,
    settings: { dashboard: { display_name: null, timezone: 'Etc/UTC' }, payments: { statement_descriptor: null } },
    type: 'standard',
  };
}
