import pg from 'pg';
import { PG_SOCKET_OPTIONS } from '../lib/pg-connection.js';

/** One fixed advisory-lock key for every schema change (migrations, Agenda's table among them). */
const SCHEMA_LOCK = 'payments:schema';

/**
 * Runs `fn` holding a PostgreSQL advisory lock shared by every process on the database. Processes
 * that start together on a fresh database would otherwise race to apply the same migrations, and all but one would crash with "already exists".
 */
export async function withSchemaLock<T>(databaseUrl: string, fn: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl, ...PG_SOCKET_OPTIONS });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [SCHEMA_LOCK]);
    return await fn();
  } finally {
    // Closing the session releases the lock even if the unlock fails.
    await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [SCHEMA_LOCK]).catch(() => undefined);
    await client.end().catch(() => undefined);
  }
}
