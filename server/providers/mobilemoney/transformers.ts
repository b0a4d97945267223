import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { MobilemoneyCredentials } from '../../../contract/index.js';
import { ProviderError, type Money, type ServicePaymentStatus } from '../../domain/ports.js';
import { darajaTimestamp } from './eat-time.js';

/**
 * M-Pesa Daraja wire types, request builders and THE status-mapping tables (interface.md):
 * STK ResultCode 0 → completed, anything else → failed (an STK query's "still under processing", 4999,
 * is no result: pending); reversal result 0 or R000001 → completed
 * (decisions.md), anything else → failed.
 */

// ---------------------------------------------------------------- status mapping (the one table)

/** STK callback / STK query ResultCode (number in callbacks, string in queries) → service status. */
export function stkResultStatus(resultCode: number | string): Exclude<ServicePaymentStatus, 'pending'> {
  return String(resultCode).trim() === '0' ? 'completed' : 'failed';
}

/** Reversal Result.ResultCode → outcome of the refund: "already reversed" means it is reversed. */
export function reversalResultStatus(resultCode: number | string): 'completed' | 'failed' {
  const code = String(resultCode).trim();
  return code === '0' || code === 'R000001' ? 'completed' : 'failed';
}

/**
 * The amount a completed reversal result reports. A success carries `Amount`; R000001 ("already
 * reversed") carries none — the operator reverses whole transactions only, so it means the whole
 * receipt, which is the amount we asked to reverse (`requested`). A success without an amount reports
 * none (and so completes nothing).
 */
export function reversedAmount(resultCode: number | string, reported: Money | null, requested: Money): Money | null {
  if (String(resultCode).trim() === 'R000001') return reported ?? requested;
  return reported;
}

// ---------------------------------------------------------------- amounts

/** The operator settles in Kenyan shillings only; its amounts carry no currency of their own. */
export const MOBILEMONEY_CURRENCY = 'KES';

/** KES minor units → whole shillings as the operator wants them (Amount must be a whole number). */
export function wholeShillings(amount: { minor: bigint; currency: string }): number {
  if (amount.currency !== 'KES') {
    throw new ProviderError('mobilemoney', 'invalid_request', `mobilemoney only accepts KES, not ${amount.currency}`);
  }
  if (amount.minor <= 0n || amount.minor % 100n !== 0n) {
    throw new ProviderError('mobilemoney', 'invalid_request', 'mobilemoney amounts must be whole shillings');
  }
  return Number(amount.minor / 100n);
}

/** A wire amount ("168.00", "168", 168) → KES minor units, by text, never by float arithmetic. */
export function wireAmountToMinor(value: unknown): bigint | null {
  const text = typeof value === 'number' ? (Number.isFinite(value) ? String(value) : '') : typeof value === 'string' ? value.trim() : '';
  const m = /^(\d{1,15})(?:\.(\d{1,2})0*)?$/.exec(text);
  if (!m) return null;
  return BigInt(m[1]!) * 100n + BigInt((m[2] ?? '').padEnd(2, '0'));
}

// ---------------------------------------------------------------- wire values

/**
 * A code or text the operator sends as a string or a number ("0" or 0), read as text. Never coerced from
 * a missing value: `z.coerce.string()` reads an absent ResultCode as the text "undefined", which then
 * reads as a code the operator never sent. Optional where the operator may leave it out.
 */
const WireText = z.union([z.string(), z.number()]).transform(String);
/** A text the operator may leave out or send as null: '' then. */
const OptionalWireText = WireText.nullish().transform((v) => v ?? '');

// ---------------------------------------------------------------- errors and acks

export const OperatorErrorSchema = z
  .object({ requestId: z.string().optional(), errorCode: z.string(), errorMessage: z.string().optional().default('') })
  .passthrough();
export type OperatorError = z.infer<typeof OperatorErrorSchema>;

/** The synchronous answer of transaction status and reversal: the request is queued, the result comes later. */
export const AsyncAckSchema = z
  .object({
    OriginatorConversationID: z.string(),
    ConversationID: z.string(),
    ResponseCode: WireText,
    ResponseDescription: z.string(),
  })
  .passthrough();
export type AsyncAck = { OriginatorConversationID: string; ConversationID: string; ResponseCode: string; ResponseDescription: string };

// ---------------------------------------------------------------- OAuth

export const TokenResponseSchema = z.object({ access_token: z.string().min(1), expires_in: z.union([z.string(), z.number()]).optional() }).passthrough();

/** `expires_in` is a string in practice ("3599") and a number in the docs. */
export function tokenLifetimeSeconds(expiresIn: string | number | undefined): number {
  const n = Number(expiresIn);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 3000;
}

/**
 * The shared token cache key: one token per (operator, consumer key). The operator is who it is
 * (base-url.ts providerIdentity), not the address this process calls it at, which differs between an
 * api and a worker in sandbox: two keys would be two tokens, each revoking the other.
 */
export function tokenCacheKey(operator: string, consumerKey: string): string {
  return createHash('sha256').update(`${operator}\n${consumerKey}`).digest('hex');
}

// ---------------------------------------------------------------- STK push and query

/** base64(Shortcode + Passkey + Timestamp). */
export function stkPassword(shortcode: string, passkey: string, timestamp: string): string {
  return Buffer.from(`${shortcode}${passkey}${timestamp}`).toString('base64');
}

export interface StkPushRequest {
  BusinessShortCode: string;
  Password: string;
  Timestamp: string;
  TransactionType: 'CustomerPayBillOnline' | 'CustomerBuyGoodsOnline';
  Amount: number;
  PartyA: string;
  PartyB: string;
  PhoneNumber: string;
  CallBackURL: string;
  AccountReference: string;
  TransactionDesc: string;
}

export function buildStkPush(
  creds: MobilemoneyCredentials,
  input: { phone: string; amount: number; reference: string; callbackUrl: string; description: string },
  now: Date,
): StkPushRequest {
  const timestamp = darajaTimestamp(now);
  return {
    BusinessShortCode: creds.shortcode,
    Password: stkPassword(creds.shortcode, creds.passkey, timestamp),
    Timestamp: timestamp,
    TransactionType: 'CustomerPayBillOnline',
    Amount: input.amount,
    PartyA: input.phone,
    PartyB: creds.shortcode,
    PhoneNumber: input.phone,
    CallBackURL: input.callbackUrl,
    AccountReference: input.reference.slice(0, 12),
    TransactionDesc: input.description.slice(0, 13),
  };
}

export const StkPushResponseSchema = z
  .object({
    MerchantRequestID: z.string(),
    CheckoutRequestID: z.string(),
    ResponseCode: WireText,
    ResponseDescription: z.string().optional().default(''),
    CustomerMessage: z.string().optional(),
  })
  .passthrough();

export function buildStkQuery(creds: MobilemoneyCredentials, checkoutRequestId: string, now: Date) {
  const timestamp = darajaTimestamp(now);
  return {
    BusinessShortCode: creds.shortcode,
    Password: stkPassword(creds.shortcode, creds.passkey, timestamp),
    Timestamp: timestamp,
    CheckoutRequestID: checkoutRequestId,
  };
}

/**
 * The STK query's answer. ResponseCode is about the query ("0 means successful submission and any other
 * code means an error occurred"); only with 0 does ResultCode say how the push went. ResultCode is ''
 * when the operator sent none: no result (queryPayment).
 */
export const StkQueryResponseSchema = z
  .object({
    ResponseCode: WireText,
    ResponseDescription: z.string().optional().default(''),
    MerchantRequestID: z.string().optional(),
    CheckoutRequestID: z.string(),
    ResultCode: OptionalWireText,
    ResultDesc: z.string().optional().default(''),
  })
  .passthrough();

/** The words of the STK query's "still on the handset" answers: "being processed", "still under processing". */
const STILL_PROCESSING = /being processed|under processing/i;

/** The STK query's "still on the handset" answer as an error body (HTTP 500, 500.001.1001 "The transaction is being processed"). */
export function isStillProcessing(error: OperatorError): boolean {
  return STILL_PROCESSING.test(error.errorMessage);
}

/** The ResultCode of the STK query's "still on the handset" answer in a 200 ("The transaction is still under processing"). */
export const STK_STILL_PROCESSING_CODE = '4999';

/**
 * An STK query's result → service status. While the prompt is still open the operator may answer with a
 * result instead of an error body: HTTP 200, ResultCode 4999 "The transaction is still under processing".
 * That is no outcome — the customer may still pay — so it is pending, as is any result that says it is
 * still being processed; otherwise the STK table (stkResultStatus).
 */
export function stkQueryStatus(resultCode: string, resultDesc: string): ServicePaymentStatus {
  if (String(resultCode).trim() === STK_STILL_PROCESSING_CODE || STILL_PROCESSING.test(resultDesc)) return 'pending';
  return stkResultStatus(resultCode);
}

// ---------------------------------------------------------------- transaction status and reversal

/** The operator's published sandbox test initiator and password, used in the sandbox env when the credentials carry none. */
export const SANDBOX_INITIATOR = 'testapi';
export const SANDBOX_INITIATOR_PASSWORD = 'Safaricom999!*!';

export interface InitiatorCredentials {
  Initiator: string;
  SecurityCredential: string;
}

/** By receipt (TransactionID), or by OriginalConversationID when there is none ("if you don't have the M-PESA transaction ID"). */
export function buildTransactionStatus(
  creds: MobilemoneyCredentials,
  initiator: InitiatorCredentials,
  input: ({ transactionId: string } | { originalConversationId: string }) & { resultUrl: string; timeoutUrl: string; remarks?: string; occasion?: string },
) {
  return {
    ...initiator,
    CommandID: 'TransactionStatusQuery',
    ...('transactionId' in input ? { TransactionID: input.transactionId } : { OriginalConversationID: input.originalConversationId }),
    PartyA: creds.shortcode,
    IdentifierType: '4',
    ResultURL: input.resultUrl,
    QueueTimeOutURL: input.timeoutUrl,
    Remarks: (input.remarks ?? 'Transaction status query').slice(0, 100),
    Occasion: (input.occasion ?? '').slice(0, 100),
  };
}

export function buildReversal(
  creds: MobilemoneyCredentials,
  initiator: InitiatorCredentials,
  input: { transactionId: string; amount: number; resultUrl: string; timeoutUrl: string; remarks: string; occasion?: string },
) {
  // Remarks must be 2–100 characters.
  const remarks = input.remarks.trim().length >= 2 ? input.remarks.trim().slice(0, 100) : 'Payment reversal';
  return {
    ...initiator,
    CommandID: 'TransactionReversal',
    TransactionID: input.transactionId,
    Amount: input.amount,
    ReceiverParty: creds.shortcode,
    RecieverIdentifierType: '11', // sic: the operator's spelling
    ResultURL: input.resultUrl,
    QueueTimeOutURL: input.timeoutUrl,
    Remarks: remarks,
    Occasion: (input.occasion ?? '').slice(0, 100),
  };
}

// ---------------------------------------------------------------- pull transactions

export const PullRegisterResponseSchema = z
  .object({
    ResponseRefID: z.string().optional(),
    ResponseStatus: WireText.nullish(),
    ResponseCode: WireText.nullish(),
    ShortCode: WireText.nullish(),
    ResponseDescription: z.string().optional().default(''),
  })
  .passthrough();

export interface PullRegistration {
  /** True when the shortcode is registered for pull now (1000 newly, 1001 already). */
  registered: boolean;
  responseCode: string;
  responseDescription: string;
}

const PulledRowSchema = z
  .object({
    transactionId: z.string().trim().min(1),
    trxDate: z.string(),
    msisdn: OptionalWireText,
    sender: OptionalWireText,
    transactiontype: z.string().optional().default(''),
    billreference: OptionalWireText,
    amount: z.union([z.string(), z.number()]),
    organizationname: z.string().optional().default(''),
  })
  .passthrough();

export const PullQueryResponseSchema = z
  .object({
    ResponseRefID: z.string().optional(),
    ResponseCode: WireText,
    ResponseMessage: z.string().optional().default(''),
    // Nested twice: [[row, row, …]] (sometimes several inner lists, or a bare row).
    Response: z.array(z.union([z.array(z.unknown()), z.unknown()])).optional().default([]),
  })
  .passthrough();

export interface PulledTransaction {
  /** The M-Pesa receipt number. */
  transactionId: string;
  trxDate: Date;
  msisdn: string;
  sender: string;
  transactionType: string;
  /** The bill / account reference (our payment's `reference`). */
  billReference: string;
  /** KES minor units. */
  amountMinor: bigint;
  /** The same as Money (KES), for the integrity check. */
  amount: Money;
  organizationName: string;
}

/**
 * The transaction types of a customer's payment to the shortcode (paybill, till). Daraja's pull lists
 * them as `c2b-pay-bill-debit` (its documentation's sample) and `c2b-buy-goods-debit`; only these settle a payment.
 */
const PAYMENT_TRANSACTION_TYPES = new Set(['c2b-pay-bill-debit', 'c2b-buy-goods-debit']);

/** A pulled row that settles nothing: unreadable (no receipt, date or amount we can read) or not a customer payment. */
export interface SkippedPullRow {
  /** The row's receipt when it has one (never the customer's number or name). */
  transactionId: string | null;
  reason: 'unreadable' | 'not_a_payment';
  /** The row's transactiontype, for not_a_payment. */
  transactionType?: string;
}

export interface PulledPage {
  /** How many rows the page held, usable or not (OffSetValue counts them all). */
  rowCount: number;
  transactions: PulledTransaction[];
  skipped: SkippedPullRow[];
}

/**
 * Flattens the doubly nested `Response` into rows. One row that cannot be read, or that is no customer
 * payment, is set aside (skipped) rather than failing the page: the other rows still settle their payments.
 */
export function pulledTransactions(response: z.infer<typeof PullQueryResponseSchema>): PulledPage {
  const rows = response.Response.flatMap((entry) => (Array.isArray(entry) ? entry : [entry]));
  const page: PulledPage = { rowCount: rows.length, transactions: [], skipped: [] };
  for (const row of rows) {
    const parsed = PulledRowSchema.safeParse(row);
    const date = parsed.success ? new Date(parsed.data.trxDate) : null;
    const amountMinor = parsed.success ? wireAmountToMinor(parsed.data.amount) : null;
    if (!parsed.success || !date || Number.isNaN(date.getTime()) || amountMinor === null) {
      const id = (row as { transactionId?: unknown } | null)?.transactionId;
      page.skipped.push({ transactionId: typeof id === 'string' && id.trim() ? id.trim() : null, reason: 'unreadable' });
      continue;
    }
    const r = parsed.data;
    if (!PAYMENT_TRANSACTION_TYPES.has(r.transactiontype.trim().toLowerCase())) {
      page.skipped.push({ transactionId: r.transactionId, reason: 'not_a_payment', transactionType: r.transactiontype.slice(0, 60) });
      continue;
    }
    page.transactions.push({
      transactionId: r.transactionId,
      trxDate: date,
      msisdn: r.msisdn,
      sender: r.sender,
      transactionType: r.transactiontype,
      billReference: r.billreference,
      amountMinor,
      amount: { minor: amountMinor, currency: MOBILEMONEY_CURRENCY },
      organizationName: r.organizationname,
    });
  }
  return page;
}
