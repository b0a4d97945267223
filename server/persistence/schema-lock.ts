import pg from 'pg';
import { PG_SOCKET_OPTIONS } from '../lib/pg-connection.js';

/** One fixed advisory-lock key for every schema change (migrations, Agenda's table among them). */
const SCHEMA_LOCK = 'payments:schema';

/** How long a wait for the lock goes unreported: longer than any boot's own schema work on a busy host. */
export const SCHEMA_LOCK_WAIT_REPORT_MS = 3_000;

/** The session holding the lock, as pg_stat_activity shows it (null fields when the role may not see them). */
export interface SchemaLockHolder {
  pid: number;
  applicationName: string | null;
  clientAddr: string | null;
  /** pg_stat_activity's state: `idle` for a session that holds it and does nothing (a stray one). */
  state: string | null;
}

export interface SchemaLockOptions {
  /** Called once when the wait passes `reportAfterMs`, with the holder if it could be found. */
  onWaiting?: (waitedMs: number, holder: SchemaLockHolder | null) => void;
  reportAfterMs?: number;
}

/**
 * Runs `fn` holding a PostgreSQL advisory lock shared by every process on the database. Processes
 * that start together on a fresh database would otherwise race to apply the same migrations, and all but one would crash with "already exists".
 * A wait that lasts (a migration running, a stray session holding the lock) is reported once through
 * `onWaiting`: a booting process is otherwise silent until the lock is released.
 */
export async function withSchemaLock<T>(databaseUrl: string, fn: () => Promise<T>, options: SchemaLockOptions = {}): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl, ...PG_SOCKET_OPTIONS });
  client.on('error', () => undefined);
  await client.connect();
  const { onWaiting, reportAfterMs = SCHEMA_LOCK_WAIT_REPORT_MS } = options;
  let waiting = true;
  const report = onWaiting
    ? setTimeout(() => void lockHolder(databaseUrl).then((holder) => waiting && onWaiting(reportAfterMs, holder)), reportAfterMs)
    : null;
  try {
    try {
      await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [SCHEMA_LOCK]);
    } finally {
      waiting = false;
      if (report) clearTimeout(report);
    }
    return await fn();
  } finally {
    // Closing the session releases the lock even if the unlock fails.
    await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [SCHEMA_LOCK]).catch(() => undefined);
    await client.end().catch(() => undefined);
  }
}

/** The session that holds the schema lock on this database, on a short connection of its own; null when not found. */
async function lockHolder(databaseUrl: string): Promise<SchemaLockHolder | null> {
  const client = new pg.Client({ connectionString: databaseUrl, ...PG_SOCKET_OPTIONS });
  client.on('error', () => undefined);
  try {
    await client.connect();
    // A bigint advisory key is shown split in two: classid the high 32 bits, objid the low, objsubid 1.
    const { rows } = await client.query<{ pid: number; application_name: string | null; client_addr: string | null; state: string | null }>(
      `SELECT l.pid, a.application_name, host(a.client_addr) AS client_addr, a.state
         FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)
        LIMIT 1`,
      [SCHEMA_LOCK],
    );
    const row = rows[0];
    if (!row) return null;
    return {
      pid: row.pid,
      applicationName: row.application_name || null,
      clientAddr: row.client_addr,
      state: row.state,
    };
  } catch {
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}
