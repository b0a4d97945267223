import { invalidRequest, missingParam, unknownParam } from './errors.js';

/**
 * Readers for Stripe's form-encoded parameters (already decoded by express.urlencoded({extended:true}):
 * `metadata[k]=v` arrives as `{metadata: {k: v}}`, `a[0]=x` as `{a: ['x']}`). Every value is a string.
 */
export type Params = Record<string, unknown>;

export function onlyKnown(params: Params, allowed: readonly string[]): void {
  for (const key of Object.keys(params)) {
    if (!allowed.includes(key) && key !== 'expand') throw unknownParam(key);
  }
}

export function optString(params: Params, name: string): string | undefined {
  const value = params[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw invalidRequest(`Invalid string: ${name}`, name);
  return value;
}

export function reqString(params: Params, name: string): string {
  const value = optString(params, name);
  if (value === undefined) throw missingParam(name);
  return value;
}

/** Positive integers only (amounts are integer minor units). */
export function optInt(params: Params, name: string): bigint | undefined {
  const value = optString(params, name);
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value)) throw invalidRequest(`Invalid integer: ${value}`, name);
  return BigInt(value);
}

export function optBool(params: Params, name: string): boolean | undefined {
  const value = optString(params, name);
  if (value === undefined) return undefined;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw invalidRequest(`Invalid boolean: ${value}`, name);
}

export function optHash(params: Params, name: string): Params | undefined {
  const value = params[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidRequest(`Invalid hash`, name);
  return value as Params;
}

/** `metadata[k]=v`: at most 50 keys, keys ≤ 40 characters, values ≤ 500 characters (Stripe's limits). */
export function metadata(params: Params, name = 'metadata'): Record<string, string> {
  const hash = optHash(params, name) ?? {};
  const out: Record<string, string> = {};
  const entries = Object.entries(hash);
  if (entries.length > 50) throw invalidRequest('Metadata can have at most 50 keys.', name);
  for (const [key, value] of entries) {
    if (typeof value !== 'string') throw invalidRequest(`Invalid string: ${name}[${key}]`, `${name}[${key}]`);
    if (key.length > 40) throw invalidRequest(`Metadata keys can have at most 40 characters.`, `${name}[${key}]`);
    if (value.length > 500) throw invalidRequest(`Metadata values can have at most 500 characters.`, `${name}[${key}]`);
    out[key] = value;
  }
  return out;
}

/**
 * `a[]=x&a[]=y` or `a[0]=x&a[1]=y` (qs turns indexes past 20 into an object: accept that too). A plain
 * `a=x` is not an array: Stripe answers 400 "Invalid array" (as for `enabled_events=…` or `expand=…`
 * sent without brackets), so does the simulator.
 */
export function stringArray(params: Params, name: string): string[] | undefined {
  const value = params[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'object' || value === null) throw invalidRequest('Invalid array', name);
  const entries = Array.isArray(value) ? null : Object.entries(value as Record<string, unknown>);
  if (entries?.some(([index]) => !/^\d+$/.test(index))) throw invalidRequest('Invalid array', name);
  const items = entries ? entries.sort(([a], [b]) => Number(a) - Number(b)).map(([, v]) => v) : (value as unknown[]);
  if (!items.every((v): v is string => typeof v === 'string' && v !== '')) throw invalidRequest('Invalid array', name);
  return items;
}

export function httpUrl(value: string, name: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalidRequest(`Invalid URL: ${name} must be a valid URL.`, name, 'url_invalid');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalidRequest(`Invalid URL: ${name} must use http or https.`, name, 'url_invalid');
  return value;
}
