import { MikroORM, type Options } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import type pg from 'pg';
import { entities } from './entities/index.js';
import { migrationsList } from './migrations/index.js';
import { countQueries } from '../lib/count-queries.js';
import { scopedEntityManager } from './orm-scope.js';

export type { EntityManager } from '@mikro-orm/postgresql';

/** How long a query waits for a pooled connection before failing (then answered 503, never 409). */
const DEFAULT_ACQUIRE_TIMEOUT_MS = 5_000;

/** `onQuery`: called for every query a pooled connection sends (db_round_trips_total). */
export function ormOptions(databaseUrl: string, poolMax = 20, acquireTimeoutMs = DEFAULT_ACQUIRE_TIMEOUT_MS, onQuery?: () => void): Options {
  return {
    clientUrl: databaseUrl,
    entities,
    extensions: [Migrator],
    migrations: { migrationsList, transactional: true, allOrNothing: true, tableName: 'mikro_orm_migrations', silent: true },
    pool: {
      min: 0,
      max: poolMax,
      ...(onQuery ? { afterCreate: (conn: pg.Client, done: (err: Error | null, conn: pg.Client) => void) => (countQueries(conn, onQuery), done(null, conn)) } : {}),
    },
    driverOptions: { acquireConnectionTimeout: acquireTimeoutMs },
    // The domain decides what is flushed and when; no implicit writes on fork.
    allowGlobalContext: false,
    // Code run by inOrmScope (requests, jobs, the admin CLI) gets its own fork, made on first use.
    context: scopedEntityManager,
    forceUtcTimezone: true,
    debug: false,
  };
}

export async function openOrm(databaseUrl: string, poolMax?: number, acquireTimeoutMs?: number, onQuery?: () => void): Promise<MikroORM> {
  return MikroORM.init(ormOptions(databaseUrl, poolMax, acquireTimeoutMs, onQuery));
}

/** Applies pending migrations; returns the names applied. */
export async function migrate(orm: MikroORM): Promise<string[]> {
  const applied = await orm.getMigrator().up();
  return applied.map((m) => m.name);
}

/** Names of the applied migrations, oldest first. */
export async function appliedMigrations(orm: MikroORM): Promise<string[]> {
  return (await orm.getMigrator().getExecutedMigrations()).map((m) => m.name);
}

/**
 * Reverts every migration applied after `keep`, newest first, in one transaction (all or nothing);
 * returns their names in the order they were reverted. A `keep` that is not applied is refused.
 */
export async function revertMigrationsAfter(orm: MikroORM, keep: string): Promise<string[]> {
  const applied = await appliedMigrations(orm);
  const at = applied.indexOf(keep);
  if (at < 0) throw new TypeError(`--down-to: ${keep} is not an applied migration (see --status)`);
  const oldestToRevert = applied[at + 1];
  if (!oldestToRevert) return [];
  return (await orm.getMigrator().down({ to: oldestToRevert })).map((m) => m.name);
}

/** Names of the migrations not yet applied. */
export async function pendingMigrations(orm: MikroORM): Promise<string[]> {
  return (await orm.getMigrator().getPendingMigrations()).map((m) => m.name);
}
