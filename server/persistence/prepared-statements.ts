import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { numberPlaceholders } from '../lib/sql-placeholders.js';
import { isInTransaction } from './orm-scope.js';

/** What node-postgres needs to run a named prepared statement. */
interface NamedStatement {
  name: string;
  text: string;
}

/** node-postgres' client as far as this file uses it. */
interface PgClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
}

/** knex's client (the ORM's pool) as far as this file uses it. */
interface KnexPoolClient {
  acquireConnection(): Promise<PgClient>;
  releaseConnection(connection: PgClient): Promise<unknown>;
}

/** One entry per distinct statement text; the hot path has a handful (a few variants of two statements). */
const statements = new Map<string, NamedStatement>();

function named(sql: string): NamedStatement {
  let statement = statements.get(sql);
  if (!statement) {
    // Named by its text's hash: one name never means two texts, on any connection.
    statement = { name: `hot_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`, text: numberPlaceholders(sql).text };
    statements.set(sql, statement);
  }
  return statement;
}

/**
 * Runs one statement of the hot path (POST /v1/payments) as a named prepared statement on a connection
 * of the ORM's pool: PostgreSQL parses and plans it once per connection instead of on every request (the
 * ORM's `execute` sends the text with its values inlined, which a server can never reuse), and the
 * values travel as parameters instead of being escaped into the text.
 *
 * For single statements outside any transaction (autocommit); inside one, it is an error to call this.
 * Statements run here must name their result columns (no `RETURNING *` / `SELECT *`): a prepared
 * statement whose result shape changes under it (a migration adding a column) fails with "cached plan
 * must not change result type". Behind PgBouncer in transaction mode this needs PgBouncer ≥ 1.21 with
 * `max_prepared_statements` set (README "Going live").
 */
export async function queryPrepared<T>(em: EntityManager, sql: string, params: unknown[]): Promise<T[]> {
  if (isInTransaction(em)) throw new Error('queryPrepared runs single statements outside a transaction');
  const pool = em.getConnection().getKnex().client as unknown as KnexPoolClient;
  const connection = await pool.acquireConnection();
  try {
    const { name, text } = named(sql);
    const result = await connection.query({ name, text, values: params });
    return result.rows as T[];
  } finally {
    await pool.releaseConnection(connection);
  }
}
