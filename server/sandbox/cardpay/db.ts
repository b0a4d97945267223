import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';

/** Raw SQL bound to one EntityManager (inside a transaction: that transaction's connection). */
export interface Db {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

export function dbOf(em: EntityManager): Db {
  return { query: <T>(sql: string, params: unknown[] = []) => em.execute(sql, params) as unknown as Promise<T[]> };
}

/** Runs `fn` in one database transaction; every query made through its Db is part of it. */
export function inTransaction<T>(em: EntityManager, fn: (db: Db) => Promise<T>): Promise<T> {
  return em.transactional((tem) => fn(dbOf(tem)));
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Stripe-looking ids: `pi_3Nx…` (prefix + 24 alphanumerics). */
export function newId(prefix: string, length = 24): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return `${prefix}_${out}`;
}

export const nowSec = (): number => Math.floor(Date.now() / 1000);
