import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import type pg from 'pg';
import { onPool } from '../sql.js';
import { SimError, unauthorized } from './errors.js';

/**
 * The secret key from `Authorization: Bearer sk_…` or Basic (key as the username). The simulator is test
 * mode only: it takes `sk_test_…`/`rk_test_…` keys; any other key, or a test key containing `invalid` or
 * ending in `_revoked`, is refused with 401 (a way to exercise bad credentials). Only the key's sha256 is
 * ever kept or compared.
 */
const KEY_PATTERN = /^(sk|rk)_test_[A-Za-z0-9_]{4,247}$/;

/** A key as the simulator keeps it: its sha256, its type prefix (`sk_test`, `rk_test`) and its masked form for messages. */
export interface PresentedKey {
  hash: string;
  prefix: string;
  masked: string;
}

export const keyHash = (key: string): string => createHash('sha256').update(key).digest('hex');
const masked = (key: string): string => `${key.slice(0, 8)}****${key.slice(-4)}`;

/** The request's key, or the 401 Stripe answers without one or with one it does not take (thrown). */
export function presentedKey(req: Request): PresentedKey {
  const header = req.get('authorization');
  if (!header) {
    throw unauthorized(
      "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
    );
  }
  const [scheme, value = ''] = header.trim().split(/\s+/, 2);
  let key = '';
  if (scheme?.toLowerCase() === 'bearer') key = value;
  else if (scheme?.toLowerCase() === 'basic') key = Buffer.from(value, 'base64').toString('utf8').split(':')[0] ?? '';
  else throw unauthorized('Invalid API Key provided: use Bearer or Basic authentication.');
  if (!KEY_PATTERN.test(key) || key.includes('invalid') || key.endsWith('_revoked')) {
    throw unauthorized(`Invalid API Key provided: ${masked(key)}`);
  }
  return { hash: keyHash(key), prefix: key.slice(0, 7), masked: masked(key) };
}

/** Stripe's answer to a key rolled past its expiry (401 api_key_expired, the key masked as Stripe masks it). */
export function expiredKey(key: PresentedKey): SimError {
  return unauthorized(`Expired API Key provided: ${key.masked}`, 'api_key_expired');
}

/**
 * The account a key acts on, as a FROM item (`account`, `expired`) whose one parameter is the key's hash:
 * the account of the key it was rolled from when a roll issued it (roll-key.ts; sandbox_cardpay_keys),
 * else the key's own hash, as every key that was never rolled (each its own account). `expired`: rolled,
 * and its chosen expiry has passed (by the database's clock, the same for every process).
 */
export const KEY_ACCOUNT = `(SELECT COALESCE(k.account, p.key_hash) AS account, COALESCE(k.expires_at <= now(), false) AS expired
    FROM (SELECT ?::text AS key_hash) AS p LEFT JOIN sandbox_cardpay_keys k ON k.key_hash = p.key_hash)`;

/**
 * The calling key's account, in a statement of its own, for the routes off the API's path (the controls,
 * unknown URLs); the API reads it with its first statement (switches.ts). Throws the 401 to answer.
 */
export async function accountOf(pool: pg.Pool, req: Request): Promise<string> {
  const key = presentedKey(req);
  const [row] = await onPool(pool)<{ account: string; expired: boolean }>(`SELECT account, expired FROM ${KEY_ACCOUNT} AS one`, [key.hash]);
  if (row!.expired) throw expiredKey(key);
  return row!.account;
}

/**
 * For a control that acts on the caller's account: its account, or null once the 401 is answered (in the
 * controls' own shape, saying what is needed).
 */
export async function controlAccount(pool: pg.Pool, req: Request, res: Response): Promise<string | null> {
  try {
    return await accountOf(pool, req);
  } catch (err) {
    if (!(err instanceof SimError)) throw err;
    refuseControl(res, err);
    return null;
  }
}

/** A control's answer to a key it does not take (the 401's message, in the controls' own shape). */
export function refuseControl(res: Response, err: SimError): void {
  res.status(err.status).json({ error: `the account's secret key is needed (Authorization: Bearer sk_test_…): ${err.message}` });
}
