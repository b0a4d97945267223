import { createHash } from 'node:crypto';
import type { CreatePaymentBody, Provider } from '../../../contract/index.js';
import { DomainError, type FieldIssue } from '../errors.js';
import { currencyDigits, isPaymentCurrency, toMinorUnits } from '../money/money.js';
import type { ProviderPort } from '../ports.js';

/** decisions.md "Money": 999,999,999.99 in major units at most. */
const MAX_MAJOR_TIMES_100 = 99_999_999_999n;

export interface NormalizedPaymentRequest {
  provider: Provider;
  amountMinor: bigint;
  currency: string;
  /** Provider-specific fields, normalised by the provider (phone in 254… form, …). */
  fields: Record<string, string | undefined>;
  /** The merchant's own key-value pairs, keys sorted ({} when none). */
  metadata: Record<string, string>;
  /** SHA-256 of the normalised request: the same key with another body is a conflict. */
  requestHash: string;
  /** The hashes releases before stored for this request (still the same request for a key they stored). */
  formerHashes: string[];
  /**
   * Set when the amount has more decimal places than the currency as written, trailing zeros only
   * (`"10.000"` USD): refused for a new key, but a key an earlier release accepted it under (it read the
   * value) still answers its payment (PaymentService.refusedBeforeClaim).
   */
  refusal?: DomainError;
}

function invalid(details: FieldIssue[]): DomainError {
  const first = details[0]!;
  return new DomainError('VALIDATION_ERROR', `Invalid request: ${first.field} ${first.issue}`, details);
}

/**
 * A currency a payment can be made in, upper-cased, and its minor-unit digits; else the 422 naming
 * `currency`. The one rule for a payment's currency and for the list's currency filter (decisions.md:
 * "an unknown filter value → 422": a currency no payment can have is one, not an empty list).
 */
export function paymentCurrency(code: string): { currency: string; digits: number } {
  const currency = code.toUpperCase();
  const digits = currencyDigits(currency);
  if (digits === null) throw invalid([{ field: 'currency', issue: 'must be a known ISO 4217 code' }]);
  if (!isPaymentCurrency(currency)) throw invalid([{ field: 'currency', issue: `must be a currency payments can be made in (${currency} is not money)` }]);
  return { currency, digits };
}

/** Checks the money rules the schema cannot express, then the provider's own rules, and normalises the request. */
export function normalizePaymentRequest(body: CreatePaymentBody, port: ProviderPort): NormalizedPaymentRequest {
  const { currency, digits } = paymentCurrency(body.currency);
  // Before 2026-11-29 trailing zeros were not decimal places: the value decides the hash, so a key stored
  // then for `"10.000"` is found, and the refusal below is the answer for a new key only.
  const amountMinor = toMinorUnits(body.amount, currency, 'amount', 'significant');
  let refusal: DomainError | undefined;
  try {
    toMinorUnits(body.amount, currency);
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    refusal = err;
  }
  if (amountMinor <= 0n) throw invalid([{ field: 'amount', issue: 'must be greater than 0' }]);
  if (amountMinor * 100n > MAX_MAJOR_TIMES_100 * 10n ** BigInt(digits)) {
    throw invalid([{ field: 'amount', issue: 'must be at most 999999999.99' }]);
  }
  const normalised = port.normaliseRequest(body, { minor: amountMinor, currency });
  if ('issues' in normalised) throw invalid(normalised.issues);
  const fields = normalised.fields;
  const metadata = sortKeys(body.metadata ?? {});
  // Metadata joins the hash only when there is some: a request without it hashes as it did before
  // metadata existed, so a retry across the upgrade is still the same request.
  const hashOf = (hashedFields: Record<string, string | undefined>) => createHash('sha256').update(JSON.stringify({
    provider: body.provider, amountMinor: amountMinor.toString(), currency, fields: sortKeys(hashedFields), ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
  })).digest('hex');
  // Before 2026-11-28 a saved card's id was hashed as sent (now lower-cased): a key stored then still matches.
  const savedCardAsSent = 'saved_card_id' in body ? body.saved_card_id : undefined;
  const formerHashes = fields.saved_card_id !== undefined && savedCardAsSent !== undefined && fields.saved_card_id !== savedCardAsSent
    ? [hashOf({ ...fields, saved_card_id: savedCardAsSent })] : [];
  return { provider: body.provider, amountMinor, currency, fields, metadata, requestHash: hashOf(fields), formerHashes, ...(refusal ? { refusal } : {}) };
}

/** The pairs with their keys sorted (undefined values dropped): the same pairs in any order hash alike. */
export function sortKeys(obj: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(obj).sort()) if (obj[key] !== undefined) out[key] = obj[key]!;
  return out;
}
