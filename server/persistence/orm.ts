import { MikroORM, type Options, type Transaction } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import type pg from 'pg';
import { entities } from './entities/index.js';
import { migrationsList } from './migrations/index.js';
import { countQueries } from '../lib/count-queries.js';
import { scopedEntityManager } from './orm-scope.js';
import { PG_SOCKET_OPTIONS } from '../lib/pg-connection.js';
import { markAcquireFailures } from './acquire-failures.js';

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
    driverOptions: {
      acquireConnectionTimeout: acquireTimeoutMs,
      // From clientUrl MikroORM keeps only the host, port, user, password and database: sslmode,
      // sslrootcert, application_name, options… would be dropped. pg reads the whole URL itself, as it
      // does for every other pool (merged into MikroORM's connection settings, its type parsers kept).
      connection: { connectionString: databaseUrl, ...PG_SOCKET_OPTIONS },
    },
    // The domain decides what is flushed and when; no implicit writes on fork.
    allowGlobalContext: false,
    // Code run by inOrmScope (requests, jobs, the admin CLI) gets its own fork, made on first use.
    context: scopedEntityManager,
    forceUtcTimezone: true,
    // MikroORM would create a missing database through the server's `postgres` database, a switch the
    // full DATABASE_URL above overrides; the database is the operator's to create.
    ensureDatabase: false,
    debug: false,
  };
}

export async function openOrm(databaseUrl: string, poolMax?: number, acquireTimeoutMs?: number, onQuery?: () => void): Promise<MikroORM> {
  const orm = await MikroORM.init(ormOptions(databaseUrl, poolMax, acquireTimeoutMs, onQuery));
  markAcquireFailures(orm);
  return orm;
}

/**
 * The first row the database answers `sql` with within `timeoutMs` on a pooled connection, or null when no
 * answer came (the wait for a free connection is bounded by the pool's acquire timeout). A connection whose
 * answer did not come in time is closed, not pooled again: its path may be dead (half-open TCP after a
 * failover), and the next query sent on it would wait as long.
 */
export async function answerWithin(orm: MikroORM, sql: string, timeoutMs: number): Promise<Record<string, unknown> | null> {
  return orm.em
    .getKnex()
    .raw(sql)
    .timeout(timeoutMs)
    .then(
      (result: { rows: Record<string, unknown>[] }) => result.rows[0] ?? {},
      () => null,
    );
}

/**
 * How long a migration's DDL waits for a table's lock. An ALTER TABLE waiting behind a long transaction
 * would queue every later query on that table — reads included — behind itself, taking the service down
 * while the migration waits: it gives up instead, the batch rolls back, and it is tried again.
 */
export interface MigrationLockOptions {
  lockTimeoutMs?: number;
  attempts?: number;
  retryDelayMs?: number;
}
const MIGRATION_LOCK_DEFAULTS = { lockTimeoutMs: 5_000, attempts: 3, retryDelayMs: 2_000 };
/** PostgreSQL's lock_not_available, raised when lock_timeout runs out. */
const LOCK_NOT_AVAILABLE = '55P03';

/** Runs the migrator in one transaction (all or nothing) whose statements wait at most `lockTimeoutMs` for a lock. */
async function withMigrationLockTimeout<T>(orm: MikroORM, options: MigrationLockOptions, run: (trx: Transaction) => Promise<T>): Promise<T> {
  const { lockTimeoutMs, attempts, retryDelayMs } = { ...MIGRATION_LOCK_DEFAULTS, ...options };
  const connection = orm.em.getConnection();
  for (let attempt = 1; ; attempt++) {
    try {
      return await connection.transactional(async (trx) => {
        await connection.execute(`SET LOCAL lock_timeout = ${Math.max(1, Math.trunc(lockTimeoutMs))}`, [], 'run', trx);
        return run(trx);
      });
    } catch (err) {
      if (!lockNotAvailable(err)) throw err;
      if (attempt >= attempts) {
        throw new Error(`a table the migrations change stayed locked by another transaction (${attempts} attempts, ${lockTimeoutMs} ms each); nothing was changed`);
      }
      await new Promise((resolve) => setTimeout(resolve, retryDelayMs));
    }
  }
}

/** The migrator wraps the driver's error (umzug's MigrationError): look down the `cause` chain. */
function lockNotAvailable(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (e.code === LOCK_NOT_AVAILABLE) return true;
  }
  return false;
}

/** Applies pending migrations; returns the names applied. */
export async function migrate(orm: MikroORM, options: MigrationLockOptions = {}): Promise<string[]> {
  const applied = await withMigrationLockTimeout(orm, options, (transaction) => orm.getMigrator().up({ transaction }));
  return applied.map((m) => m.name);
}

/** Names of the applied migrations, oldest first. */
export async function appliedMigrations(orm: MikroORM): Promise<string[]> {
  return (await orm.getMigrator().getExecutedMigrations()).map((m) => m.name);
}

/** `keep` (revertMigrationsAfter, migrate --down-to) names no applied migration: nothing was reverted. */
export class NotAppliedMigrationError extends Error {}

/**
 * Reverts every migration applied after `keep`, newest first, in one transaction (all or nothing);
 * returns their names in the order they were reverted. A `keep` that is not applied is refused.
 */
export async function revertMigrationsAfter(orm: MikroORM, keep: string, options: MigrationLockOptions = {}): Promise<string[]> {
  const applied = await appliedMigrations(orm);
  const at = applied.indexOf(keep);
  if (at < 0) throw new NotAppliedMigrationError(`--down-to: ${keep} is not an applied migration (see --status)`);
  const oldestToRevert = applied[at + 1];
  if (!oldestToRevert) return [];
  const reverted = await withMigrationLockTimeout(orm, options, (transaction) => orm.getMigrator().down({ to: oldestToRevert, transaction }));
  return reverted.map((m) => m.name);
}

/**
 * Why a process that does not migrate (MIGRATE_ON_BOOT=false; the admin CLI in production) refuses to
 * run on a schema with migrations pending: the same words from the services and the admin CLI.
 */
export function migrationsPendingError(pending: readonly string[], why: string): Error {
  const names = pending.length > 3 ? `${pending.slice(0, 3).join(', ')}, …` : pending.join(', ');
  return new Error(`${why} and ${pending.length} migration(s) are pending (${names}): run the migrate command first (npm run migrate, or npm run migrate:prod from the build)`);
}

/** Names of the migrations not yet applied. */
export async function pendingMigrations(orm: MikroORM): Promise<string[]> {
  return (await orm.getMigrator().getPendingMigrations()).map((m) => m.name);
}
