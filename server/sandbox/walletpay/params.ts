import type { Request } from 'express';
import { paypalDigits } from './currencies.js';
import { invalid, unprocessable } from './errors.js';

type Obj = Record<string, unknown>;

export const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export const missing = (field: string) =>
  invalid('MISSING_REQUIRED_PARAMETER', field, 'A required field / parameter is missing.');

/** `PayPal-Request-Id`: 1–108 characters; optional, except for an order with a payment_source (orders.ts). */
export function requestIdOf(req: Request): string | null {
  const value = req.header('paypal-request-id');
  if (value === undefined || value === '') return null;
  if (value.length > 108) {
    throw invalid('INVALID_STRING_MAX_LENGTH', 'PayPal-Request-Id', 'The value of a field is too long.', 'header');
  }
  return value;
}

/** `Prefer: return=representation` asks for the full resource; `return=minimal` is the default. */
export const wantsRepresentation = (req: Request) => /return=representation/i.test(req.header('prefer') ?? '');

/** An optional string field of at most `max` characters. */
export function optionalString(parent: Obj, key: string, field: string, max: number): string | undefined {
  const value = parent[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalid('INVALID_PARAMETER_SYNTAX', field, 'The value of a field does not conform to the expected format.');
  if (value.length > max) throw invalid('INVALID_STRING_MAX_LENGTH', field, 'The value of a field is too long.');
  if (value.length === 0) throw invalid('INVALID_STRING_MIN_LENGTH', field, 'The value of a field is too short.');
  return value;
}

/** An optional absolute http(s) URL (return_url, cancel_url, webhook url). */
export function optionalUrl(parent: Obj, key: string, field: string): string | undefined {
  const value = optionalString(parent, key, field, 4000);
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid('INVALID_PARAMETER_SYNTAX', field, 'The value of a field does not conform to the expected format.', 'body', value);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw invalid('INVALID_PARAMETER_SYNTAX', field, 'The URL must use http or https.', 'body', value);
  }
  return value;
}

/**
 * A `money` object `{currency_code, value}` as integer minor units: the decimal string is split into
 * digits, never parsed as a float. PayPal's issues: syntax 400s, then DECIMAL_PRECISION,
 * CANNOT_BE_ZERO_OR_NEGATIVE and CURRENCY_NOT_SUPPORTED 422s.
 */
export function parseMoney(raw: unknown, field: string): { minor: bigint; currency: string } {
  if (raw === undefined || raw === null) throw missing(field);
  if (!isObject(raw)) throw invalid('INVALID_PARAMETER_SYNTAX', field, 'The value of a field does not conform to the expected format.');
  const currency = raw.currency_code;
  if (currency === undefined) throw missing(`${field}/currency_code`);
  if (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency)) {
    throw invalid('INVALID_PARAMETER_SYNTAX', `${field}/currency_code`, 'The value of a field does not conform to the expected format.');
  }
  const digits = paypalDigits(currency);
  if (digits === null) throw unprocessable('CURRENCY_NOT_SUPPORTED', 'Currency code is not currently supported.', `${field}/currency_code`);
  const value = raw.value;
  if (value === undefined) throw missing(`${field}/value`);
  const match = typeof value === 'string' && value.length <= 32 ? /^(-?)(\d+)?(?:\.(\d+))?$/.exec(value) : null;
  if (!match || (match[2] === undefined && match[3] === undefined)) {
    throw invalid('INVALID_PARAMETER_SYNTAX', `${field}/value`, 'The value of a field does not conform to the expected format.', 'body', String(value));
  }
  const fraction = match[3] ?? '';
  if (fraction.length > digits) {
    throw unprocessable('DECIMAL_PRECISION', 'If the currency supports decimals, only two decimal place precision is supported.', `${field}/value`);
  }
  const minor = BigInt(match[2] ?? '0') * 10n ** BigInt(digits) + BigInt(fraction.padEnd(digits, '0') || '0');
  if (match[1] === '-' || minor === 0n) {
    throw unprocessable('CANNOT_BE_ZERO_OR_NEGATIVE', 'Must be greater than zero. If the currency supports decimals, only two decimal place precision is supported.', `${field}/value`);
  }
  return { minor, currency };
}
