import { inOrmScope } from '../../persistence/orm-scope.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { RequestHandler } from 'express';

/**
 * Runs the rest of the request with its own identity map (a fork of `em`): no entity leaks between
 * requests. Only the contract's routes use it; the simulators, health checks and static pages query
 * through the connection and skip the fork.
 */
export function ormContext(em: EntityManager): RequestHandler {
  return (_req, _res, next) => inOrmScope(em, next);
}
