import { randomFillSync } from 'node:crypto';

export type { Db } from '../sql.js';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * Random bytes for ids, drawn from a buffer refilled from the system's generator 4 KiB at a time: one
 * call per ~170 ids instead of one per id. Each byte is used once.
 */
const random = Buffer.alloc(4096);
let used = random.length;

/** Stripe-looking ids: `pi_3Nx…` (prefix + 24 alphanumerics). */
export function newId(prefix: string, length = 24): string {
  if (used + length > random.length) {
    randomFillSync(random);
    used = 0;
  }
  let out = '';
  for (let i = used; i < used + length; i++) out += ALPHABET[random[i]! % ALPHABET.length];
  used += length;
  return `${prefix}_${out}`;
}

export const nowSec = (): number => Math.floor(Date.now() / 1000);
