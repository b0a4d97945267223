import { createHmac, createPublicKey, timingSafeEqual, verify } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { inAllowlistRange, parseAllowlistEntry, type AllowlistRange } from '../../lib/ip-allowlist.js';
import type { Money } from '../../domain/ports.js';
import { MOBILEMONEY_CURRENCY, wireAmountToMinor } from './transformers.js';

/**
 * Inbound operator callbacks: parsing the STK and result bodies, and the checks that make an
 * unsigned callback trustworthy (source allowlist; per-payment token in sandbox; RSA signature live).
 * Pure functions: no I/O.
 */

export class MalformedCallbackError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedCallbackError';
  }
}

const scalar = z.union([z.string(), z.number()]);

const StkCallbackSchema = z.object({
  Body: z.object({
    stkCallback: z.object({
      MerchantRequestID: z.string().min(1),
      CheckoutRequestID: z.string().min(1),
      // Numeric for the operator's own results, a string for others (SFC_IC0003: the operator does not exist).
      ResultCode: z.union([z.number().int(), z.string().trim().min(1)]).transform(String),
      ResultDesc: z.string(),
      CallbackMetadata: z
        .object({ Item: z.array(z.object({ Name: z.string(), Value: scalar.optional().nullable() }).passthrough()) })
        .passthrough()
        .optional(),
    }),
  }),
});

export interface StkCallback {
  checkoutRequestId: string;
  merchantRequestId: string;
  resultCode: string;
  resultDesc: string;
  receiptNumber?: string;
  amountMinor?: bigint;
  /** The Amount the operator reports (always KES), on a successful push only. */
  amount?: Money;
  phone?: string;
  /** `YYYYMMDDHHmmss` in EAT, as sent. */
  transactionDate?: string;
}

/** `{Body:{stkCallback:{…}}}` → its facts; throws MalformedCallbackError on any other shape. */
export function parseStkCallback(body: unknown): StkCallback {
  const parsed = StkCallbackSchema.safeParse(body);
  if (!parsed.success) throw new MalformedCallbackError('not an STK callback body');
  const cb = parsed.data.Body.stkCallback;
  const items = new Map<string, string | number>();
  for (const item of cb.CallbackMetadata?.Item ?? []) {
    if (item.Value !== undefined && item.Value !== null) items.set(item.Name, item.Value);
  }
  const result: StkCallback = {
    checkoutRequestId: cb.CheckoutRequestID,
    merchantRequestId: cb.MerchantRequestID,
    resultCode: cb.ResultCode,
    resultDesc: cb.ResultDesc,
  };
  const receipt = items.get('MpesaReceiptNumber');
  if (receipt !== undefined) result.receiptNumber = String(receipt);
  const amount = items.get('Amount');
  if (amount !== undefined) {
    const minor = wireAmountToMinor(amount);
    if (minor === null) throw new MalformedCallbackError('STK callback Amount is not an amount');
    result.amountMinor = minor;
    result.amount = { minor, currency: MOBILEMONEY_CURRENCY };
  }
  // PhoneNumber and TransactionDate arrive as JSON numbers; 12/14 digits are exact in a double.
  const phone = items.get('PhoneNumber');
  if (phone !== undefined) result.phone = String(phone);
  const date = items.get('TransactionDate');
  if (date !== undefined) result.transactionDate = String(date);
  return result;
}

const ResultParameterSchema = z.object({ Key: z.string(), Value: scalar.optional().nullable() }).passthrough();

const ResultSchema = z.object({
  Result: z.object({
    ResultType: scalar.optional(),
    ResultCode: scalar,
    ResultDesc: z.string().optional().default(''),
    OriginatorConversationID: z.string().min(1),
    ConversationID: z.string().optional().default(''),
    TransactionID: z.string().optional().default(''),
    ResultParameters: z
      .object({ ResultParameter: z.union([z.array(ResultParameterSchema), ResultParameterSchema]) })
      .passthrough()
      .optional()
      .nullable(),
  }),
});

export interface OperatorResult {
  originatorConversationId: string;
  conversationId: string;
  transactionId: string;
  /** Always a string: the operator sends 0 as a number and failures as strings ("R000001", "2001"). */
  resultCode: string;
  resultDesc: string;
  parameters: Record<string, string>;
  /** The `Amount` result parameter (transaction status, reversal), in KES; null when absent or unreadable. */
  amount: Money | null;
}

/** A transaction-status or reversal `{Result:{…}}` body (also queue timeouts); throws when malformed. */
export function parseResult(body: unknown): OperatorResult {
  const parsed = ResultSchema.safeParse(body);
  if (!parsed.success) throw new MalformedCallbackError('not an operator Result body');
  const r = parsed.data.Result;
  const list = r.ResultParameters ? [r.ResultParameters.ResultParameter].flat() : [];
  const parameters: Record<string, string> = {};
  for (const p of list) parameters[p.Key] = p.Value === undefined || p.Value === null ? '' : String(p.Value);
  const amountMinor = parameters.Amount ? wireAmountToMinor(parameters.Amount) : null;
  return {
    originatorConversationId: r.OriginatorConversationID,
    conversationId: r.ConversationID,
    transactionId: r.TransactionID,
    resultCode: String(r.ResultCode).trim(),
    resultDesc: r.ResultDesc,
    parameters,
    amount: amountMinor === null ? null : { minor: amountMinor, currency: MOBILEMONEY_CURRENCY },
  };
}

/** The per-payment token the sandbox callback URL carries: hex HMAC-SHA256(paymentId) keyed by the passkey. */
export function callbackToken(passkey: string, paymentId: string): string {
  return createHmac('sha256', passkey).update(paymentId).digest('hex');
}

export function verifyCallbackToken(passkey: string, paymentId: string, token: string | undefined | null): boolean {
  if (typeof token !== 'string' || !/^[0-9a-f]{64}$/i.test(token)) return false;
  const expected = Buffer.from(callbackToken(passkey, paymentId), 'hex');
  return timingSafeEqual(expected, Buffer.from(token, 'hex'));
}

/** Live env: RSA-SHA256 over the raw body, base64 in `X-Mobilemoney-Signature`, checked with the operator's certificate (or public key) PEM. */
export function verifyLiveSignature(rawBody: Buffer, signatureB64: string | undefined | null, certPem: string): boolean {
  if (typeof signatureB64 !== 'string' || signatureB64.length === 0) return false;
  try {
    const signature = Buffer.from(signatureB64, 'base64');
    if (signature.length === 0) return false;
    return verify('sha256', rawBody, createPublicKey(certPem), signature);
  } catch {
    return false;
  }
}

/**
 * Whether a callback's source address may post to us: an entry of the allowlist (address or CIDR,
 * IPv4 or IPv6; IPv4-mapped IPv6 sources count as IPv4). Loopback only while the sandbox is on.
 */
export function isAllowedSource(ip: string | undefined | null, allowlist: string[], sandbox: boolean): boolean {
  if (!ip) return false;
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    address = ipaddr.process(ip.trim());
  } catch {
    return false;
  }
  if (address.range() === 'loopback') return sandbox;
  for (const entry of allowlist) {
    let range: AllowlistRange;
    try {
      range = parseAllowlistEntry(entry);
    } catch {
      continue; // A malformed entry matches nothing (loadConfig refuses one at boot).
    }
    if (inAllowlistRange(address, range)) return true;
  }
  return false;
}
