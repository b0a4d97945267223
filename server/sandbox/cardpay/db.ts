import { randomBytes } from 'node:crypto';

export type { Db } from '../sql.js';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Stripe-looking ids: `pi_3Nx…` (prefix + 24 alphanumerics). */
export function newId(prefix: string, length = 24): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return `${prefix}_${out}`;
}

export const nowSec = (): number => Math.floor(Date.now() / 1000);
