import { initContract } from '@ts-rest/core';
import { extendApi } from '@anatine/zod-openapi';
import { z } from 'zod';
import {
  ErrorBodySchema, IdParamsSchema, IdempotencyKeySchema, OptionalIdempotencyHeaders, ProviderSchema, TimestampSchema, UuidSchema, commonErrorResponses, envelope, intQuery,
  pageQuery, listEnvelope,
} from './common.js';

const c = initContract();

export const PAYMENT_STATUSES = ['pending', 'completed', 'failed', 'refunded', 'reversed'] as const;
export const PaymentStatusSchema = z.enum(PAYMENT_STATUSES);
export type PaymentStatus = z.infer<typeof PaymentStatusSchema>;

/**
 * A decimal amount: a JSON number or a decimal string. Parsed without binary floating point.
 * `rules` says which amounts are taken (server/domain/payments/payment-request.ts, and each provider's normaliseRequest).
 */
function amountInput(rules: string, example: string) {
  return extendApi(z.union([z.string().max(32), z.number()]), {
    description: `Decimal amount in major units, as a string (preferred) or a JSON number; ${rules}`,
    example,
  });
}
export const AmountInputSchema = amountInput("at most the currency's minor-unit digits.", '25.00');
/** Every payment: greater than 0, at most the currency's digits and 999,999,999.99 (payment-request.ts); then the provider's own limits. */
const PAYMENT_AMOUNT = "greater than 0, with at most the currency's minor-unit digits, and at most 999,999,999.99";

const CurrencyInputSchema = extendApi(z.string().regex(/^[A-Za-z]{3}$/, 'must be a 3-letter ISO 4217 code'), { example: 'USD' });
/**
 * An absolute http(s) URL: the providers take no other scheme (a custom app scheme, ftp:, javascript: are
 * refused there, after the payment was written). Spelled case by case so the document's pattern says the same.
 */
const UrlSchema = z.string().url().max(2048).regex(/^[Hh][Tt][Tt][Pp][Ss]?:\/\//, 'must be an http or https URL');

/** At most 50 keys (as Stripe's metadata); a key 1–40 characters of letters, digits and `_ - . :`; a value at most 500 characters. */
export const METADATA_LIMITS = { keys: 50, keyLength: 40, valueLength: 500 } as const;
/** The merchant's own pairs on a payment or a refund (one schema object each: extendApi sets its description on the object). */
export function metadataSchema(subject: 'payment' | 'refund', example: string) {
  return extendApi(
    z
      .record(
        z
          .string()
          .regex(new RegExp(`^[A-Za-z0-9_.:-]{1,${METADATA_LIMITS.keyLength}}$`), `keys must be 1-${METADATA_LIMITS.keyLength} letters, digits, _ - . or :`)
          // A pair under this key would be dropped when the record is rebuilt (it sets an object's prototype instead).
          .refine((key) => key !== '__proto__', 'the key __proto__ is not allowed'),
        z.string().max(METADATA_LIMITS.valueLength),
      )
      .refine((m) => Object.keys(m).length <= METADATA_LIMITS.keys, { message: `at most ${METADATA_LIMITS.keys} keys` }),
    {
      description:
        `Your own key-value pairs (string values), stored with the ${subject} and returned on every read (the same pairs; JSON key order is not kept): ${example}. ` +
        `At most ${METADATA_LIMITS.keys} keys of 1-${METADATA_LIMITS.keyLength} characters (letters, digits, _ - . :), values of at most ${METADATA_LIMITS.valueLength} characters. ` +
        'Not sent to the provider; part of the request an Idempotency-Key stands for.',
      example: subject === 'payment' ? { order_id: '1042', customer: 'c_77' } : { return_id: 'RMA-2291', reason: 'damaged' },
    },
  );
}
export const MetadataSchema = metadataSchema('payment', 'an order number, a customer id');

export const CreateCardpayPaymentSchema = z
  .object({
    provider: z.literal('cardpay'),
    amount: amountInput(
      `${PAYMENT_AMOUNT}. cardpay also needs an amount it can charge: at most 8 digits in its units (999,999.99 USD; 12 digits for IDR), ` +
        'a whole number of the currencies it takes without fractions (e.g. MGA, ISK, UGX), and a last digit 0 in three-decimal ones (12.340 KWD). Otherwise 422 naming amount.',
      '25.00',
    ),
    currency: CurrencyInputSchema,
    payment_method: z.string().min(1).max(255).optional().describe('Payment-method token from the client side, e.g. pm_card_visa. Give this or saved_card_id, exactly one'),
    return_url: UrlSchema.optional().describe('Where the customer returns after 3-D Secure authentication'),
    saved_card_id: UuidSchema.optional().describe('Charge a saved card off-session: no 3DS, no user interaction. Give this or payment_method, exactly one'),
    metadata: MetadataSchema.optional(),
  })
  .strict();

export const CreateMobilemoneyPaymentSchema = z
  .object({
    provider: z.literal('mobilemoney'),
    amount: amountInput('a whole number of KES (100 or "100.00", never 100.50), greater than 0 and at most 250,000 KES. Otherwise 422 naming amount.', '100'),
    currency: CurrencyInputSchema.describe('Must be KES'),
    phone: z.string().max(32).describe('Customer phone, 254XXXXXXXXX (07…, 7… and +254… are normalised)'),
    callback_url: UrlSchema.optional().describe('Overrides the default push callback address'),
    metadata: MetadataSchema.optional(),
  })
  .strict();

export const CreateWalletpayPaymentSchema = z
  .object({
    provider: z.literal('walletpay'),
    amount: amountInput(
      `${PAYMENT_AMOUNT}, in a currency walletpay takes (one of its 24; 422 naming currency otherwise); a whole number for HUF, JPY and TWD (422 naming amount otherwise).`,
      '25.00',
    ),
    currency: CurrencyInputSchema,
    return_url: UrlSchema.describe('Where the buyer returns after approval'),
    cancel_url: UrlSchema.describe('Where the buyer returns on cancel'),
    metadata: MetadataSchema.optional(),
  })
  .strict();

export const CreatePaymentBodySchema = extendApi(
  z.discriminatedUnion('provider', [
    extendApi(CreateCardpayPaymentSchema, {
      title: 'CreateCardpayPayment',
      description: 'Exactly one of payment_method (a new card token) or saved_card_id (a saved card, charged off-session) is required: neither, or both, is 422 VALIDATION_ERROR.',
    }),
    extendApi(CreateMobilemoneyPaymentSchema, { title: 'CreateMobilemoneyPayment' }),
    extendApi(CreateWalletpayPaymentSchema, { title: 'CreateWalletpayPayment' }),
  ]),
  {
    example: { provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' },
    mediaExamples: {
      cardpay: { summary: 'Charge a card token', value: { provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_visa' } },
      cardpay3ds: {
        summary: 'Charge a card that asks for 3-D Secure',
        value: { provider: 'cardpay', amount: '25.00', currency: 'USD', payment_method: 'pm_card_threeDSecureRequired', return_url: 'https://shop.example.com/checkout/return' },
      },
      savedCard: { summary: 'Charge a saved card off-session', value: { provider: 'cardpay', amount: '25.00', currency: 'USD', saved_card_id: '7c9e6679-7425-40de-944b-e07fc1f90ae7' } },
      mobilemoney: { summary: 'Send a mobile-money push prompt', value: { provider: 'mobilemoney', amount: '100', currency: 'KES', phone: '254708374149' } },
      walletpay: {
        summary: 'Create a wallet order to approve',
        value: { provider: 'walletpay', amount: '25.00', currency: 'USD', return_url: 'https://shop.example.com/checkout/return', cancel_url: 'https://shop.example.com/checkout/cancel' },
      },
    },
  },
);
export type CreatePaymentBody = z.infer<typeof CreatePaymentBodySchema>;

export const NextActionSchema = z.object({ type: z.literal('redirect'), url: z.string() }).nullable();

export const IntegrityMismatchSchema = extendApi(
  z.object({
    source: z.string().describe('Which provider report was refused: create, capture, status-sync, check-status, reconciliation, refund, callback:<event>'),
    refund_id: UuidSchema.optional().describe('Set when the report was about this refund'),
    issue: z.string().optional().describe(
      'Set when the provider\'s object was no longer the one the payment created, whatever its amount: what differed (walletpay: an order with more purchase units, another payee or intent than it was created with, or more than one capture)',
    ),
    expected_amount: z.string().describe('Our amount: the payment\'s, or the refund\'s; for a refund made at the provider that our books cannot take, what was left to refund (0 when the payment is not completed here)'),
    expected_currency: z.string(),
    reported_amount: z.string().nullable().describe('What the provider reported; null when the report named no amount'),
    reported_currency: z.string().nullable(),
    at: TimestampSchema,
  }),
  { title: 'IntegrityMismatch' },
);

export const PaymentIntegritySchema = extendApi(
  z.object({
    status: z.enum(['ok', 'mismatch']).describe('mismatch: at least one provider report about this payment had another amount or currency, or described another object than the payment created (issue), or reported money returned that our books cannot take (no amount, more than is left, a payment not completed here), and changed nothing'),
    mismatches: z.array(IntegrityMismatchSchema),
  }),
  {
    title: 'PaymentIntegrity',
    description:
      'Every provider-reported outcome is compared with the payment (or refund) in amount and currency; money moves only when both are equal. ' +
      'Refused reports are listed here, oldest first — review them with the provider.',
  },
);

export const PaymentSchema = extendApi(
  z.object({
    id: UuidSchema,
    merchant_id: UuidSchema,
    amount: z.string(),
    currency: z.string(),
    provider: ProviderSchema,
    status: PaymentStatusSchema,
    provider_ref: z.string().nullable(),
    idempotency_key: z.string(),
    reference: z.string().describe('12-character reference shown to the provider (bill / account reference)'),
    amount_refunded: z.string(),
    next_action: NextActionSchema.describe('Where to send the customer: the wallet approval URL or the card 3DS page'),
    failure_reason: z.string().nullable(),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
    provider_response: z.record(z.string(), z.unknown()).nullable().optional().describe('Last raw provider response, secrets removed (GET by id only)'),
    integrity: PaymentIntegritySchema,
    metadata: z.record(z.string(), z.string()).describe('The metadata given at creation ({} when none)'),
  }),
  {
    title: 'Payment',
    example: {
      id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', merchant_id: '5d1c3a2b-8e7f-4a6b-9c0d-1e2f3a4b5c6d', amount: '25.00', currency: 'USD',
      provider: 'cardpay', status: 'completed', provider_ref: 'pi_3Nq…', idempotency_key: 'order-1042', reference: 'K7M2Q9XW4RTA',
      amount_refunded: '0.00', next_action: null, failure_reason: null, created_at: '2026-11-22T10:15:30.000Z', updated_at: '2026-11-22T10:15:31.000Z',
      integrity: { status: 'ok', mismatches: [] }, metadata: { order_id: '1042' },
    },
  },
);

export const PaymentTransitionSchema = extendApi(
  z.object({
    subject: z.enum(['payment', 'refund']).describe("What moved: the payment, or one of its refunds (then refund_id names it and the statuses are the refund's)"),
    refund_id: UuidSchema.nullable(),
    from_status: z.string().nullable().describe('null for the creation'),
    to_status: z.string(),
    trigger: z.string().describe('What asked for the move: create, capture, callback:<provider event>, confirmed:<provider event> (a callback settled by asking the provider), unconfirmed:<provider event> (an unverifiable success for a payment recorded failed that the provider did not confirm: recorded, not applied), status-sync, check-status, reconciliation, refund, refund-sync, abandon, operator (a refund failed by the operator with the admin CLI)'),
    accepted: z.boolean().describe('false when the move was refused (the state table or the integrity check): nothing changed'),
    note: z.string().nullable(),
    created_at: TimestampSchema,
  }),
  {
    title: 'PaymentTransition',
    example: { subject: 'payment', refund_id: null, from_status: 'pending', to_status: 'completed', trigger: 'create', accepted: true, note: null, created_at: '2026-11-22T10:15:31.000Z' },
  },
);

export const CapturedPaymentSchema = extendApi(
  z.object({
    id: UuidSchema,
    status: PaymentStatusSchema,
    provider_ref: z.string().nullable(),
    amount: z.string(),
    currency: z.string(),
    provider: ProviderSchema,
    created_at: TimestampSchema,
  }),
  {
    example: {
      id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21', status: 'completed', provider_ref: '5O190127TN364715T', amount: '45.00', currency: 'USD',
      provider: 'walletpay', created_at: '2026-11-22T10:15:30.000Z',
    },
  },
);

export const SavedCardSchema = extendApi(
  z.object({
    id: UuidSchema,
    provider: z.literal('cardpay'),
    brand: z.string(),
    last4: z.string(),
    exp_month: z.number().int(),
    exp_year: z.number().int(),
    is_default: z.boolean().describe('The merchant\'s default card: exactly one while the merchant has saved cards (the first saved; after the default is deleted, the most recently saved remaining card)'),
    created_at: TimestampSchema,
  }),
  { title: 'SavedCard', example: { id: '7c9e6679-7425-40de-944b-e07fc1f90ae7', provider: 'cardpay', brand: 'visa', last4: '4242', exp_month: 12, exp_year: 2030, is_default: true, created_at: '2026-11-22T10:15:30.000Z' } },
);

const DecimalQuery = extendApi(z.string().regex(/^\d{1,15}(\.\d{1,4})?$/, 'must be a decimal number'), { type: 'string', example: '10.00' });
/** The format check alone lets through instants that do not exist (offset +99:99, year 0000); PostgreSQL refuses them. */
const isStorableInstant = (value: string) => {
  const time = Date.parse(value);
  const year = Number.isNaN(time) ? NaN : new Date(time).getUTCFullYear();
  return year >= 1 && year <= 9999;
};
export const DateTimeQuery = extendApi(
  z.string().datetime({ offset: true, message: 'must be an ISO 8601 date-time' }).refine(isStorableInstant, 'must be an ISO 8601 date-time between years 1 and 9999'),
  { format: 'date-time' },
);

export const ListPaymentsQuerySchema = z
  .object({
    status: PaymentStatusSchema.optional(),
    provider: ProviderSchema.optional(),
    currency: z.string().regex(/^[A-Za-z]{3}$/, 'must be a 3-letter ISO 4217 code').optional(),
    min_amount: DecimalQuery.optional().describe('Minimum amount, inclusive'),
    max_amount: DecimalQuery.optional().describe('Maximum amount, inclusive'),
    since: DateTimeQuery.optional().describe('Created after this instant'),
    until: DateTimeQuery.optional().describe('Created before this instant'),
    search: z.string().min(1).max(255).optional().describe('Exact mobile-money receipt number or idempotency key'),
    page: pageQuery(),
    page_size: intQuery({ min: 1, max: 100, default: 50, description: 'Items per page, at most 100' }),
  })
  .strict();
export type ListPaymentsQuery = z.infer<typeof ListPaymentsQuerySchema>;

const PaginationQuerySchema = z
  .object({
    page: pageQuery(),
    page_size: intQuery({ min: 1, max: 100, default: 50, description: 'Items per page, at most 100' }),
  })
  .strict();

const IdempotencyHeaders = z.object({
  'idempotency-key': IdempotencyKeySchema.describe('Unique per payment attempt (1–255 printable ASCII characters); a retry with the same key and body returns the original payment'),
});

const write = { scope: 'payments:write', tag: 'Payments' } as const;
const read = { scope: 'payments:read', tag: 'Payments' } as const;
const cards = { scope: 'payments:write', tag: 'Saved cards' } as const;

export const CheckStatusAckSchema = extendApi(
  z.object({
    OriginatorConversationID: z.string(),
    ConversationID: z.string(),
    ResponseCode: z.string(),
    ResponseDescription: z.string(),
  }),
  { example: { OriginatorConversationID: '5118-111210482-1', ConversationID: 'AG_20261122_00004e48cf7e3533f581', ResponseCode: '0', ResponseDescription: 'Accept the service request successfully.' } },
);

export type CheckStatusAck = z.infer<typeof CheckStatusAckSchema>;

export const ReconcileReportSchema = extendApi(
  z.object({
    pulled: z.number().int(),
    updated: z.number().int(),
    skipped: z.number().int(),
    not_found: z.number().int(),
    results: z.array(
      z.object({
        receipt: z.string(),
        outcome: z.enum(['updated', 'skipped', 'not_found']),
        payment_id: UuidSchema.optional(),
        reason: z
          .enum(['amount_mismatch', 'currency_mismatch', 'charged_but_failed', 'duplicate_charge', 'unreadable', 'not_a_payment'])
          .optional()
          .describe(
            'Only on a skipped result. amount_mismatch / currency_mismatch: the transaction matches a pending payment (by receipt or reference) but reports another amount ' +
              'or currency: the payment was not settled and stays pending; the refused report is shown on the payment (integrity). ' +
              'charged_but_failed: the transaction matches a payment recorded failed, in amount and currency: the customer was charged for a payment ' +
              'reported failed. It stays failed (refund it at the operator, or settle it by hand); the refused move is in its transitions. ' +
              'duplicate_charge: the transaction quotes (by reference) a payment already paid with another receipt: the customer was charged twice. ' +
              'Nothing changes (refund the second charge at the operator); it is recorded in the payment\'s transitions. ' +
              'unreadable: an entry the service could not read (no id, a date or amount it cannot parse); not_a_payment: an entry of a transaction type other than a customer payment. ' +
              'Neither settles anything (`receipt` is empty when the entry names none), and a payment whose creation answer was lost is not judged unpaid by a pull that had one',
          ),
        expected_amount: z.string().optional().describe('With amount_mismatch or currency_mismatch only: the payment\'s amount'),
        expected_currency: z.string().optional().describe('With amount_mismatch or currency_mismatch only: the payment\'s currency'),
        reported_amount: z.string().optional().describe('With amount_mismatch or currency_mismatch only: the amount of the operator\'s transaction'),
        reported_currency: z.string().optional().describe('With amount_mismatch or currency_mismatch only: the currency of the operator\'s transaction'),
      }),
    ),
  }),
  {
    example: {
      pulled: 3, updated: 1, skipped: 2, not_found: 0,
      results: [
        { receipt: 'NLJ7RT61SV', outcome: 'updated', payment_id: '0b8f6c1e-2f3d-4c8a-9d55-6f1e8f3a7c21' },
        { receipt: 'QWE1RT2YUI', outcome: 'skipped', payment_id: '7c9e6679-7425-40de-944b-e07fc1f90ae7' },
        {
          receipt: 'RTY5UI8OPA', outcome: 'skipped', payment_id: '3f2b1c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d',
          reason: 'amount_mismatch', expected_amount: '10000.00', expected_currency: 'KES', reported_amount: '1.00', reported_currency: 'KES',
        },
      ],
    },
  },
);

const mobilemoneyTag = 'Mobile money';

/** Static paths (cards, mobilemoney) come before `/:id` so Express matches them first. */
export const paymentsContract = c.router(
  {
    createCard: {
      method: 'POST',
      path: '/v1/payments/cards',
      summary: 'Save a card',
      description:
        'Creates a customer at the card provider and attaches the payment method. Only the token, brand, last four digits and expiry are stored. ' +
        'With an Idempotency-Key, a retry returns the first answer (Idempotent-Replayed: true) and does not save the card again within 24 hours of the key\'s ' +
        'first answer (IDEMPOTENCY_KEY_RETENTION; a replay does not extend it; later the key is forgotten and a retry saves a second card); the same key with ' +
        'another body, or while the first request with it is still running after 10 s, is 409. ' +
        'A 502 with `Payments-Outcome: unknown` means the provider may have saved the card (it did not say): the retry with the same key resumes the save ' +
        'and answers 201 with that card, never a second one; a new key may save a second.',
      metadata: { ...cards, outcomeMayBeUnknown: true },
      headers: OptionalIdempotencyHeaders,
      body: extendApi(
        z
          .object({
            payment_method_id: z.string().min(1).max(255),
            customer_email: z.string().email().max(254).optional(),
            customer_name: z.string().min(1).max(200).optional(),
          })
          .strict(),
        { example: { payment_method_id: 'pm_card_visa', customer_email: 'ada@example.com', customer_name: 'Ada Lovelace' } },
      ),
      responses: { 201: envelope(SavedCardSchema), 409: ErrorBodySchema, 502: ErrorBodySchema },
    },
    listCards: {
      method: 'GET',
      path: '/v1/payments/cards',
      summary: 'List saved cards',
      description: "Lists the merchant's active saved cards, oldest first.",
      metadata: { scope: 'payments:read', tag: 'Saved cards' } as const,
      query: PaginationQuerySchema,
      responses: { 200: listEnvelope(SavedCardSchema) },
    },
    deleteCard: {
      method: 'DELETE',
      path: '/v1/payments/cards/:id',
      summary: 'Delete a saved card',
      description:
        'Deactivates the card locally (it is no longer listed and can no longer be charged from this answer on) and detaches its payment method ' +
        'from its customer at the card provider. The answer is 200 even when the detach cannot be done at once (the provider unreachable, ' +
        'a 5xx or no answer in time, no cardpay credentials any more, credentials of another provider account than the one the card was saved under): ' +
        'the detach is then kept due with the deletion and retried by the service in the background (5 minutes, doubling up to 6 hours; at once ' +
        'when cardpay credentials are stored again, and only through credentials of the card\'s own account) until the provider confirms it; ' +
        'a payment method the provider says is not attached counts as detached, and one it says does not exist only when the card\'s account is ' +
        'recorded and the credentials are of it. A "no such payment method" through credentials not known to be of the card\'s account (a card saved ' +
        'before the account was recorded, or credentials whose account is unknown) proves nothing: the card may still be attached under another ' +
        'account, so the detach is given up on and logged at error (card, payment method, customer) for the operator to check and detach by hand. ' +
        'So is a detach still not done 30 days after the deletion, or refused by the provider as a bad request. ' +
        'When the card was the default, the most recently saved remaining card becomes the default.',
      metadata: cards,
      pathParams: IdParamsSchema,
      body: c.noBody(),
      responses: { 200: envelope(z.object({ id: UuidSchema, deleted: z.literal(true) })), 404: ErrorBodySchema },
    },
    checkStatus: {
      method: 'POST',
      path: '/v1/payments/mobilemoney/check-status/:code',
      summary: 'Ask the operator for a transaction status',
      description:
        'Asks the mobile-money operator for the status of a transaction, by receipt number or CheckoutRequestID. For a receipt the answer only confirms ' +
        'the query was accepted; the result arrives later at the transaction-status callback, which updates the payment and enqueues the merchant event. ' +
        'A push with no receipt (pending, failed, or completed by the STK query) is answered at once by the STK query, whatever its status: a pending ' +
        "push takes the answer, one no longer pending only a success (charged_but_failed); a CheckoutRequestID of none of the merchant's payments is 404. " +
        'A code that is neither (a receipt is letters and digits only) is 422 naming `code`: nothing is recorded or sent.',
      metadata: { scope: 'payments:read', tag: mobilemoneyTag } as const,
      // A receipt (Daraja's TransactionID, "Alpha-Numeric") or a CheckoutRequestID (ws_CO_…, in any case, as the
      // service's namesPaymentRequest judges it: one in another case names no payment, 404): anything else the operator refuses.
      pathParams: z.object({
        code: z.string().regex(/^(?=.{6,64}$)(?:[A-Za-z0-9]+|[Ww][Ss]_[Cc][Oo]_[A-Za-z0-9_]+)$/, 'must be a receipt number (letters and digits) or a CheckoutRequestID (ws_CO_…), 6 to 64 characters'),
      }),
      body: z.union([z.object({}).strict(), z.undefined()]).optional(),
      responses: { 200: envelope(CheckStatusAckSchema), 404: ErrorBodySchema, 502: ErrorBodySchema },
    },
    reconcile: {
      method: 'POST',
      path: '/v1/payments/mobilemoney/reconcile',
      summary: 'Reconcile missed mobile-money callbacks',
      description:
        "Pulls the operator's completed transactions for the window and settles payments whose " +
        'callback never came: known and pending → completed (event enqueued); known otherwise → skipped; unknown → not_found. A transaction that ' +
        'matches a pending payment by receipt or reference but not in amount or currency settles nothing: it is reported as skipped with a reason ' +
        '(amount_mismatch or currency_mismatch) and both amounts, and shown on the payment (integrity). A transaction of exactly a payment recorded ' +
        'failed is skipped with reason charged_but_failed: the customer was charged for a failed payment (it stays failed; refund it at the operator). ' +
        'A transaction quoting a payment already paid with another receipt is skipped with reason duplicate_charge: the customer was charged twice. ' +
        'The window must lie within the last 48 hours, which is all the operator lists: since no older than 48 hours ago, until not in the future ' +
        '(each with a minute allowed for the difference between your clock and the service\'s), at most 48 hours long; one reaching further is ' +
        '422 naming the bound, never answered with the part no longer listed left out. Default: the last 48 hours.',
      metadata: { scope: 'payments:write', tag: mobilemoneyTag } as const,
      body: z.object({
        since: DateTimeQuery.optional().describe('Start of the window: at most 48 hours ago (a minute of clock difference allowed). Default: 48 hours before until, or 48 hours ago if that is later'),
        until: DateTimeQuery.optional().describe('End of the window: not in the future (a minute of clock difference allowed). Default: now, or 48 hours after since if that is earlier'),
      }).strict().optional(),
      responses: { 200: envelope(ReconcileReportSchema), 502: ErrorBodySchema },
    },
    registerPull: {
      method: 'POST',
      path: '/v1/payments/mobilemoney/register-pull',
      summary: 'Register the shortcode for the pull API',
      description: 'One-time registration for the pull API used by reconciliation. Defaults come from the stored mobilemoney credentials.',
      metadata: { scope: 'payments:write', tag: mobilemoneyTag } as const,
      body: z
        .object({
          nominated_number: z.string().regex(/^254\d{9}$/, 'must be in the format 254XXXXXXXXX').optional(),
          callback_url: UrlSchema.optional(),
        })
        .strict()
        .optional(),
      responses: {
        200: envelope(
          extendApi(z.object({ registered: z.boolean(), response_code: z.string(), response_description: z.string() }), {
            example: { registered: true, response_code: '1000', response_description: 'Shortcode Registered Successfully' },
          }),
        ),
        502: ErrorBodySchema,
      },
    },
    create: {
      method: 'POST',
      path: '/v1/payments',
      summary: 'Create a payment',
      description:
        'Charges through one provider. cardpay completes at once (or asks for 3DS via next_action), mobilemoney sends a push prompt and stays pending ' +
        'until the callback, walletpay returns the approval link in next_action. The Idempotency-Key makes retries safe: the same key and body return ' +
        'the original payment (200, Idempotent-Replayed: true); a different body, or a key used by another merchant, is 409. ' +
        'A retry that resumes a request left unanswered (its process died, or a 500 with Payments-Outcome: unknown) answers as a first request: 201, without Idempotent-Replayed.',
      metadata: { ...write, replayStatus: 200 } as const,
      headers: IdempotencyHeaders,
      body: CreatePaymentBodySchema,
      responses: { 200: envelope(PaymentSchema), 201: envelope(PaymentSchema), 409: ErrorBodySchema, 502: ErrorBodySchema },
    },
    list: {
      method: 'GET',
      path: '/v1/payments',
      summary: 'List payments',
      description: "Lists the merchant's payments, newest first. Filters combine with AND; an unknown filter value or page_size above 100 is 422.",
      metadata: read,
      query: ListPaymentsQuerySchema,
      responses: { 200: listEnvelope(PaymentSchema) },
    },
    get: {
      method: 'GET',
      path: '/v1/payments/:id',
      summary: 'Get a payment',
      description: "Returns one payment with its next_action and the last raw provider response. Another merchant's payment is 404.",
      metadata: read,
      pathParams: IdParamsSchema,
      responses: { 200: envelope(PaymentSchema), 404: ErrorBodySchema },
    },
    transitions: {
      method: 'GET',
      path: '/v1/payments/:id/transitions',
      summary: "List a payment's status transitions",
      description:
        'Every status change the payment went through, oldest first, with what triggered it (create, provider callback, capture, status sync, ' +
        "reconciliation, refund). Moves the state machine refused are listed too, with `accepted: false` and the reason. All on one page: " +
        "`meta` is page 1 with page_size and total both the number of transitions. Another merchant's payment is 404.",
      metadata: read,
      pathParams: IdParamsSchema,
      responses: { 200: listEnvelope(PaymentTransitionSchema), 404: ErrorBodySchema },
    },
    capture: {
      method: 'POST',
      path: '/v1/payments/:id/capture',
      summary: 'Capture an approved wallet payment',
      description:
        'Captures a walletpay order after the buyer approved it. No body (or `{}`). 409 when the payment is not pending or the buyer has not approved; ' +
        'a buyer who cancelled at the approval page changes nothing (PayPal keeps the order awaiting approval): 409, the payment stays pending and the buyer may still approve; ' +
        'an order the provider voided is 409 and the payment is failed then (payment.failed); ' +
        'the order is read before the capture, and one that now asks for another amount or currency than the payment, or has more than one purchase unit, another payee than its creation named or an intent other than CAPTURE (changed at the provider, e.g. with PATCH by someone holding your PayPal API credentials), is not captured: 409, nothing captured, the payment stays pending with the mismatch in `integrity` (an order already captured there at another amount, or captured more than once, answers 200 with the payment pending and the mismatch recorded); ' +
        'an order that expired (unapproved after 3 hours) or a capture the provider declined for good answers 200 with the payment `failed` (payment.failed). ' +
        'With an Idempotency-Key, a retry returns the first answer (Idempotent-Replayed: true) and never captures twice; ' +
        'after a 502 because the provider did not answer, or refused before acting (rate-limited, credentials), or the order could not be read before the capture (nothing sent), the retry with the key sends the capture again, and the provider answers it with the first capture if there was one (a first answer: 200 without Idempotent-Replayed, which later retries replay); ' +
        'a 502 for another refusal is the key\'s answer (a retry with it replays the 502) and the payment stays pending: a capture with a new key sends it again. ' +
        'A 502 with `Payments-Outcome: unknown` means the capture may have happened (the buyer may have been charged); one without it captured nothing ' +
        '(e.g. `walletpay capture not sent: …`: the order could not be read first, so no capture was sent) — and is given only while no earlier capture request of this payment may have captured: ' +
        'after one answered `Payments-Outcome: unknown`, a request that sends nothing is answered with the header too.',
      metadata: { ...write, outcomeMayBeUnknown: true },
      headers: OptionalIdempotencyHeaders,
      pathParams: IdParamsSchema,
      body: z.union([z.object({}).strict(), z.undefined()]).optional(),
      responses: { 200: envelope(CapturedPaymentSchema), 404: ErrorBodySchema, 409: ErrorBodySchema, 502: ErrorBodySchema },
    },
  },
  { commonResponses: commonErrorResponses },
);
