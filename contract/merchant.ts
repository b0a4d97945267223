import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import { ErrorBodySchema, ProviderSchema, TimestampSchema, UuidSchema, commonErrorResponses, envelope, listEnvelope } from './common.js';

const c = initContract();

const EnvSchema = z.enum(['sandbox', 'live']);
const nonEmpty = z.string().trim().min(1, 'must not be empty').max(4096);

export const CardpayCredentialsSchema = z
  .object({
    secret_key: nonEmpty.describe('Secret API key (sk_test_… or sk_live_…)'),
    webhook_secret: nonEmpty.optional().describe("The provider's webhook signing secret; registered automatically when omitted"),
  })
  .strict();

export const WalletpayCredentialsSchema = z
  .object({
    env: EnvSchema,
    client_id: nonEmpty,
    client_secret: nonEmpty,
    webhook_id: nonEmpty.optional().describe("The provider's webhook configuration id; registered automatically when omitted"),
  })
  .strict();

export const MobilemoneyCredentialsSchema = z
  .object({
    env: EnvSchema,
    consumer_key: nonEmpty,
    consumer_secret: nonEmpty,
    passkey: nonEmpty,
    shortcode: z.string().regex(/^\d{5,7}$/, 'must be a 5 to 7 digit shortcode'),
    initiator: nonEmpty.optional().describe('API operator username (reversals, live status queries)'),
    initiator_password: nonEmpty
      .optional()
      .describe("API operator password (reversals, status queries): encrypted per request with the operator's certificate into the SecurityCredential"),
    security_credential: nonEmpty
      .optional()
      .describe('A SecurityCredential already encrypted (e.g. generated on the operator portal), sent as is when no initiator_password is stored'),
    result_url: z
      .string()
      .url()
      .optional()
      .describe(
        "Must be this service's own address: PUBLIC_BASE_URL + /v1/webhooks/mobilemoney/reversal/result or /v1/webhooks/mobilemoney/transactionstatus/result " +
          '(same scheme, host, port and path prefix; no query), else 422. The service sends the operator its own per-request address under PUBLIC_BASE_URL',
      ),
    timeout_url: z
      .string()
      .url()
      .optional()
      .describe(
        "Must be this service's own address: PUBLIC_BASE_URL + /v1/webhooks/mobilemoney/reversal/timeout or /v1/webhooks/mobilemoney/transactionstatus/timeout " +
          '(same scheme, host, port and path prefix; no query), else 422. The service sends the operator its own per-request address under PUBLIC_BASE_URL',
      ),
    nominated_number: z.string().regex(/^254\d{9}$/, 'must be in the format 254XXXXXXXXX').optional(),
  })
  .strict();

export const StoreCredentialsBodySchema = extendApi(
  z.discriminatedUnion('provider', [
    extendApi(z.object({ provider: z.literal('cardpay'), cardpay: CardpayCredentialsSchema }).strict(), { title: 'StoreCardpayCredentials' }),
    extendApi(z.object({ provider: z.literal('walletpay'), walletpay: WalletpayCredentialsSchema }).strict(), { title: 'StoreWalletpayCredentials' }),
    extendApi(z.object({ provider: z.literal('mobilemoney'), mobilemoney: MobilemoneyCredentialsSchema }).strict(), { title: 'StoreMobilemoneyCredentials' }),
  ]),
  {
    example: { provider: 'cardpay', cardpay: { secret_key: 'sk_test_51Hx…', webhook_secret: 'whsec_…' } },
    mediaExamples: {
      cardpay: { summary: 'cardpay (the webhook secret is registered for you when omitted)', value: { provider: 'cardpay', cardpay: { secret_key: 'sk_test_demo_0001' } } },
      walletpay: { summary: 'walletpay', value: { provider: 'walletpay', walletpay: { env: 'sandbox', client_id: 'AbC123-client', client_secret: 'EfG456-secret' } } },
      mobilemoney: {
        summary: 'mobilemoney',
        value: { provider: 'mobilemoney', mobilemoney: { env: 'sandbox', consumer_key: 'ck_demo', consumer_secret: 'cs_demo', passkey: 'bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919', shortcode: '174379' } },
      },
    },
  },
);
export type StoreCredentialsBody = z.infer<typeof StoreCredentialsBodySchema>;
export type CardpayCredentials = z.infer<typeof CardpayCredentialsSchema>;
export type WalletpayCredentials = z.infer<typeof WalletpayCredentialsSchema>;
export type MobilemoneyCredentials = z.infer<typeof MobilemoneyCredentialsSchema>;

export const CredentialSummarySchema = extendApi(
  z.object({
    provider: ProviderSchema,
    config_summary: z.record(z.string(), z.string()),
  }),
  { example: { provider: 'cardpay', config_summary: { secret_key: '****4242', webhook_secret: '****9f1a' } } },
);

export const MerchantSchema = extendApi(
  z.object({
    id: UuidSchema,
    name: z.string(),
    webhook_url: z.string().nullable(),
    providers: z.array(ProviderSchema).describe('Providers with stored credentials'),
    created_at: TimestampSchema,
  }),
  {
    title: 'Merchant',
    example: {
      id: '9b0c2d4e-6f80-4a1b-8c3d-5e7f9a1b3c5d', name: 'Acme Ltd', webhook_url: 'https://shop.example.com/payments/webhook',
      providers: ['cardpay'], created_at: '2026-11-22T10:15:30.000Z',
    },
  },
);

export const merchantContract = c.router(
  {
    get: {
      method: 'GET',
      path: '/v1/merchant',
      summary: 'Get the authenticated merchant',
      description: 'Returns the merchant the API key belongs to, its webhook URL and the providers it has configured.',
      metadata: { scope: 'merchant:read', tag: 'Merchant' } as const,
      responses: { 200: envelope(MerchantSchema) },
    },
    setWebhook: {
      method: 'PUT',
      path: '/v1/merchant/webhook',
      summary: 'Register the webhook URL',
      description:
        'Registers the address that receives signed event notifications and returns a new `whsec_` signing secret. ' +
        'The secret is shown only in this response; registering again rotates it. Calls at once are serialised: each answers ' +
        'the URL and secret it stored, and the one stored last is kept (the earlier secret is superseded, as by any later call).',
      metadata: { scope: 'merchant:write', tag: 'Merchant' } as const,
      body: extendApi(z.object({ webhook_url: z.string().url().max(2048) }).strict(), { example: { webhook_url: 'https://shop.example.com/payments/webhook' } }),
      responses: {
        200: envelope(
          extendApi(z.object({
            webhook_url: z.string(),
            webhook_secret: z.string().describe(
              '`whsec_` + 32 random bytes in base64url (44 characters with the `=` pad), using only the characters standard base64 ' +
                'shares, so Standard Webhooks libraries take it as it is. Shown only here.',
            ),
          }), {
            example: { webhook_url: 'https://shop.example.com/payments/webhook', webhook_secret: 'whsec_3q2MHvZ7wEkPm0cXfL1uN8yGtRb5aJdQe9sKiW4oYhA=' },
          }),
        ),
      },
    },
    deleteWebhook: {
      method: 'DELETE',
      path: '/v1/merchant/webhook',
      summary: 'Remove the webhook URL',
      description:
        'Turns webhook delivery off: removes the registered URL and its signing secret. Events are still recorded (GET /v1/events) but get no ' +
        'delivery. Deliveries still pending or retrying are sent no more: they are `dead` with last_error "no webhook URL registered" (one being ' +
        'sent at this moment finishes that attempt, and is dead instead of retried). After registering a URL again (PUT /v1/merchant/webhook), ' +
        'POST /v1/webhooks/recover sends them to it. 200 also when no URL is registered.',
      metadata: { scope: 'merchant:write', tag: 'Merchant' } as const,
      body: c.noBody(),
      responses: { 200: envelope(z.object({ webhook_url: z.null(), deleted: z.literal(true) })) },
    },
    storeCredentials: {
      method: 'PUT',
      path: '/v1/merchant/credentials',
      summary: 'Store provider credentials',
      description:
        "Replaces the merchant's credentials for one provider. Secrets are encrypted at rest and never returned: the response " +
        'shows them masked as `****` and their last four characters (`****` alone for a value of four characters or fewer).',
      metadata: { scope: 'merchant:write', tag: 'Merchant' } as const,
      body: StoreCredentialsBodySchema,
      responses: { 200: envelope(CredentialSummarySchema), 409: ErrorBodySchema, 502: ErrorBodySchema },
    },
    listCredentials: {
      method: 'GET',
      path: '/v1/merchant/credentials',
      summary: 'List stored provider credentials (masked)',
      description:
        'Lists the masked summaries of every provider the merchant has configured, all on one page: `meta` is page 1 with page_size and total ' +
        'both the number of providers listed.',
      metadata: { scope: 'merchant:read', tag: 'Merchant' } as const,
      responses: { 200: listEnvelope(CredentialSummarySchema) },
    },
    deleteCredentials: {
      method: 'DELETE',
      path: '/v1/merchant/credentials/:provider',
      summary: 'Remove provider credentials',
      description: "Removes the merchant's credentials for one provider. New payments with that provider are refused until credentials are stored again.",
      metadata: { scope: 'merchant:write', tag: 'Merchant' } as const,
      pathParams: z.object({ provider: ProviderSchema }),
      body: c.noBody(),
      responses: { 200: envelope(z.object({ provider: ProviderSchema, deleted: z.literal(true) })), 404: ErrorBodySchema, 409: ErrorBodySchema },
    },
  },
  { commonResponses: commonErrorResponses },
);

export { EnvSchema as ProviderEnvSchema };
