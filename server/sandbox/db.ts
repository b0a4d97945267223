import type { EntityManager } from '@mikro-orm/postgresql';

/** Raw SQL bound to one EntityManager (inside a transaction: that transaction's connection). */
export interface Db {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

/** The simulators keep their state with plain SQL on the service's own database. */
export function dbOf(em: EntityManager): Db {
  return { query: <T>(sql: string, params: unknown[] = []) => em.execute(sql, params) as unknown as Promise<T[]> };
}

/** Runs `fn` in one database transaction; every query made through its Db is part of it. */
export function inTransaction<T>(em: EntityManager, fn: (db: Db) => Promise<T>): Promise<T> {
  return em.transactional((tem) => fn(dbOf(tem)));
}
