import { createHash } from 'node:crypto';
import type { CreatePaymentBody, Provider } from '../../../contract/index.js';
import { DomainError, type FieldIssue } from '../errors.js';
import { currencyDigits, isPaymentCurrency, toMinorUnits } from '../money/money.js';
import { normalisePhone } from '../../providers/mobilemoney/phone.js';

/** decisions.md "Money": 999,999,999.99 in major units at most; 250,000 KES for mobilemoney. */
const MAX_MAJOR_TIMES_100 = 99_999_999_999n;
const MOBILEMONEY_MAX_KES = 250_000n;

export interface NormalizedPaymentRequest {
  provider: Provider;
  amountMinor: bigint;
  currency: string;
  /** Provider-specific fields, normalised (phone in 254… form, …). */
  fields: Record<string, string | undefined>;
  /** SHA-256 of the normalised request: the same key with another body is a conflict. */
  requestHash: string;
}

function invalid(details: FieldIssue[]): DomainError {
  const first = details[0]!;
  return new DomainError('VALIDATION_ERROR', `Invalid request: ${first.field} ${first.issue}`, details);
}

/** Checks the money and provider rules the schema cannot express, and normalises the request. */
export function normalizePaymentRequest(body: CreatePaymentBody): NormalizedPaymentRequest {
  const currency = body.currency.toUpperCase();
  const digits = currencyDigits(currency);
  if (digits === null) throw invalid([{ field: 'currency', issue: 'must be a known ISO 4217 code' }]);
  if (!isPaymentCurrency(currency)) throw invalid([{ field: 'currency', issue: `must be a currency payments can be made in (${currency} is not money)` }]);
  const amountMinor = toMinorUnits(body.amount, currency);
  if (amountMinor <= 0n) throw invalid([{ field: 'amount', issue: 'must be greater than 0' }]);
  if (amountMinor * 100n > MAX_MAJOR_TIMES_100 * 10n ** BigInt(digits)) {
    throw invalid([{ field: 'amount', issue: 'must be at most 999999999.99' }]);
  }
  const fields: Record<string, string | undefined> = {};
  switch (body.provider) {
    case 'cardpay': {
      if (!body.payment_method && !body.saved_card_id) {
        throw invalid([{ field: 'payment_method', issue: 'payment_method or saved_card_id is required' }]);
      }
      if (body.payment_method && body.saved_card_id) {
        throw invalid([{ field: 'saved_card_id', issue: 'give either payment_method or saved_card_id, not both' }]);
      }
      Object.assign(fields, { payment_method: body.payment_method, return_url: body.return_url, saved_card_id: body.saved_card_id });
      break;
    }
    case 'mobilemoney': {
      const issues: FieldIssue[] = [];
      if (currency !== 'KES') issues.push({ field: 'currency', issue: 'must be KES for mobilemoney' });
      else if (amountMinor % 100n !== 0n) issues.push({ field: 'amount', issue: 'must be a whole number for mobilemoney' });
      else if (amountMinor > MOBILEMONEY_MAX_KES * 100n) issues.push({ field: 'amount', issue: 'must be at most 250000 KES for mobilemoney' });
      const phone = normalisePhone(body.phone);
      if (!phone) issues.push({ field: 'phone', issue: 'must be a Kenyan mobile number in the format 254XXXXXXXXX' });
      if (issues.length > 0) throw invalid(issues);
      Object.assign(fields, { phone: phone!, callback_url: body.callback_url });
      break;
    }
    case 'walletpay':
      Object.assign(fields, { return_url: body.return_url, cancel_url: body.cancel_url });
      break;
  }
  const canonical = JSON.stringify({ provider: body.provider, amountMinor: amountMinor.toString(), currency, fields: sortKeys(fields) });
  return { provider: body.provider, amountMinor, currency, fields, requestHash: createHash('sha256').update(canonical).digest('hex') };
}

function sortKeys(obj: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(obj).sort()) if (obj[key] !== undefined) out[key] = obj[key]!;
  return out;
}
