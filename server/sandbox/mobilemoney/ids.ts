import { randomBytes, randomInt } from 'node:crypto';
import { operatorTimestamp } from './eat-clock.js';

/** Identifiers shaped like the operator's. */

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function pick(alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

/** `1459-15094918-1`: requestId, MerchantRequestID, OriginatorConversationID. */
export const dashedId = () => `${randomInt(1000, 100000)}-${randomInt(1_000_000, 100_000_000)}-1`;

/** `ws_CO_<DDMMYYYYHHmmss><digits>`. */
export function checkoutRequestId(now: Date): string {
  const t = operatorTimestamp(now);
  return `ws_CO_${t.slice(6, 8)}${t.slice(4, 6)}${t.slice(0, 4)}${t.slice(8)}${pick('0123456789', 10)}`;
}

/** `AG_<YYYYMMDD>_<hex>`. */
export const conversationId = (now: Date) => `AG_${operatorTimestamp(now).slice(0, 8)}_${randomBytes(10).toString('hex')}`;

/** A 10-character M-Pesa receipt such as `NLJ7RT61SV` (starts with a letter). */
export const receiptNumber = () => `${pick('ABCDEFGHIJKLMNOPQRSTUVWXYZ', 1)}${pick(ALNUM, 9)}`;

export const accessToken = () => pick(BASE62, 28);

export const responseRefId = () => randomBytes(16).toString('hex');
