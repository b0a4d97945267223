import { AsyncLocalStorage } from 'node:async_hooks';
import { TransactionContext, type EntityManager } from '@mikro-orm/core';

interface OrmScope {
  root: EntityManager;
  fork?: EntityManager;
  forking?: boolean;
}

const scopes = new AsyncLocalStorage<OrmScope>();

/**
 * Runs `fn` with an identity map of its own, as MikroORM's RequestContext does, but forks it from `root`
 * only when something in `fn` first uses the EntityManager: a request answered with SQL alone (a payment
 * creation) does not pay for an EntityManager, a unit of work and their maps it never touches.
 */
export function inOrmScope<T>(root: EntityManager, fn: () => T): T {
  return scopes.run({ root }, fn);
}

/** MikroORM's `context` option (ormOptions): the current scope's EntityManager, forked on first use. */
export function scopedEntityManager(): EntityManager | undefined {
  const scope = scopes.getStore();
  if (!scope || scope.forking) return undefined; // while forking, the new fork asks for itself
  if (!scope.fork) {
    scope.forking = true;
    try {
      // disableContextResolution: fork the root itself (resolving the context would come back here).
      scope.fork = scope.root.fork({ useContext: true, disableContextResolution: true });
    } finally {
      scope.forking = false;
    }
  }
  return scope.fork;
}

/**
 * `em.isInTransaction()` without forking the scope's EntityManager to answer it: when nothing in the
 * scope has used the root yet, nothing began a transaction on it.
 */
export function isInTransaction(em: EntityManager): boolean {
  if (TransactionContext.getEntityManager(em.name)) return true;
  const scope = scopes.getStore();
  if (scope && !scope.fork && em === scope.root) return false;
  return em.isInTransaction();
}
