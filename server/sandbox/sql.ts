import { createHash } from 'node:crypto';
import pg from 'pg';
import { countQueries } from '../lib/count-queries.js';
import { PG_SOCKET_OPTIONS } from '../lib/pg-connection.js';
import { numberPlaceholders } from '../lib/sql-placeholders.js';

/**
 * The simulators' own connection pool and unit of work (plain SQL with `?` placeholders). Apart from
 * the service's pools, so what a simulator costs PostgreSQL is counted on its own
 * (db_round_trips_total{pool="sandbox"}) and never competes with the service for a connection.
 */

/** One SQL statement with `?` placeholders, in order. */
export interface Statement {
  sql: string;
  params: unknown[];
}

/** How a statement is sent: PostgreSQL's text and, for a prepared statement, its name. */
interface Prepared {
  text: string;
  name: string | undefined;
}

/**
 * Statements go as named prepared statements, parsed and analysed once per connection (and planned
 * once when PostgreSQL keeps a generic plan) instead of on every call. The name is a hash of the text,
 * so one name never means two texts, in this process or another. Every text is one of the code's own
 * shapes (values are always parameters), so the statements per connection stay few.
 *
 * Not prepared: a statement with a `*` outside quotes. A prepared statement's result columns are fixed;
 * `SELECT *` or `RETURNING *` would change them when a migration adds a column, and PostgreSQL would
 * then refuse every later call on that connection ("cached plan must not change result type"). A
 * prepared statement names its columns, or returns none of a table's (the writes' final selects).
 *
 * Behind PgBouncer in transaction pooling, named statements need PgBouncer 1.21 or later with
 * max_prepared_statements > 0 (it tracks them per server connection); session pooling needs nothing.
 */
const sent = new Map<string, Prepared>();

function prepared(sql: string): Prepared {
  let statement = sent.get(sql);
  if (!statement) {
    const { text, star } = numberPlaceholders(sql);
    statement = { text, name: star ? undefined : `sandbox_${createHash('sha256').update(text).digest('hex').slice(0, 32)}` };
    sent.set(sql, statement);
  }
  return statement;
}

export type Query = <T = Record<string, unknown>>(sql: string, params?: unknown[]) => Promise<T[]>;

/** What the simulators' code reads and writes through: a unit of work, or the pool for plain reads. */
export interface Db {
  query: Query;
  /** A write whose result is not needed: sent with the commit (see UnitOfWork). */
  write(sql: string, params?: unknown[]): void;
}

const run = (target: pg.Pool | pg.PoolClient, statement: Statement) => {
  const { text, name } = prepared(statement.sql);
  return target.query({ text, name, values: statement.params });
};

/** One statement straight on the pool, its own transaction (a read, or a write that stands alone). */
export function onPool(pool: pg.Pool): Query {
  return async <T>(sql: string, params: unknown[] = []) => (await run(pool, { sql, params })).rows as T[];
}

/** Reads straight from the pool, each its own statement (no transaction). */
export function readsOnly(pool: pg.Pool): Db {
  return {
    query: onPool(pool),
    write: () => {
      throw new Error('a read-only request cannot write');
    },
  };
}

export function createSandboxPool(databaseUrl: string, max: number, onQuery?: () => void): pg.Pool {
  // Timestamps stay PostgreSQL's text, as the simulators read them through the ORM's connection.
  const types = new pg.TypeOverrides();
  for (const oid of [1082, 1114, 1184, 1186]) types.setTypeParser(oid, (s: string) => s);
  // The simulators hold no money: their commits need not wait for the disk (a crash may forget their last
  // few hundred milliseconds of sandbox state, as a provider outage would), while the service's own
  // commits stay durable.
  const pool = new pg.Pool({ connectionString: databaseUrl, ...PG_SOCKET_OPTIONS, max, types, options: '-c synchronous_commit=off' });
  // An idle connection the server drops is an error event here, not a process crash.
  pool.on('error', () => undefined);
  if (onQuery) pool.on('connect', (client) => countQueries(client, onQuery));
  return pool;
}

const NOTHING: Statement = { sql: 'SELECT 1', params: [] };

/** Statements run as one: `WITH w0 AS (…), w1 AS (…) <select>` (each write sees none of the others' effects). */
function combine(writes: (Statement & { name?: string })[], select: Statement): Statement {
  if (writes.length === 0) return select;
  return {
    sql: `WITH ${writes.map((w, i) => `${w.name ?? `w${i}`} AS (${w.sql})`).join(',\n')}\n${select.sql}`,
    params: [...writes.flatMap((w) => w.params), ...select.params],
  };
}

export interface UnitOfWorkOptions {
  /** Run once, right after BEGIN, when the work first needs a transaction (e.g. claiming an idempotency key). */
  onBegin?: (query: Query) => Promise<void>;
}

/**
 * One simulator request's database work, in one transaction, in as few round trips as it allows.
 * `query` runs now (reads, locks, writes whose result is needed): the first one opens the transaction.
 * `write` is held and sent with the commit, together with the caller's final statement, as ONE
 * statement: a request that only writes costs one round trip, atomically, with no BEGIN or COMMIT.
 * A query after held writes sends them first, so the work always reads its own writes.
 */
export class UnitOfWork implements Db {
  private client: pg.PoolClient | null = null;
  private held: Statement[] = [];

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: UnitOfWorkOptions = {},
  ) {}

  async query<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
    const client = await this.begun();
    const held = this.held.splice(0);
    if (held.length > 0) await run(client, combine(held, NOTHING));
    return (await run(client, { sql, params })).rows as T[];
  }

  write(sql: string, params: unknown[] = []): void {
    this.held.push({ sql, params });
  }

  /** Sends the held writes, `writes` (named CTEs the select may read) and `select` as one statement, and commits. */
  async commit<T = Record<string, unknown>>(writes: (Statement & { name: string })[] = [], select: Statement = NOTHING): Promise<T[]> {
    const all = [...this.held.splice(0), ...writes];
    if (all.length === 0 && select === NOTHING) {
      if (this.client) await this.client.query('COMMIT');
      this.release();
      return [];
    }
    const statement = combine(all, select);
    if (!this.client) return (await run(this.pool, statement)).rows as T[];
    const client = this.client;
    const rows = (await run(client, statement)).rows as T[];
    await client.query('COMMIT');
    this.release();
    return rows;
  }

  /** Abandons the work: nothing held is sent, an open transaction is rolled back. */
  async rollback(): Promise<void> {
    this.held = [];
    if (!this.client) return;
    await this.client.query('ROLLBACK').catch(() => undefined);
    this.release(true);
  }

  private async begun(): Promise<pg.PoolClient> {
    if (this.client) return this.client;
    const client = await this.pool.connect();
    this.client = client;
    try {
      await client.query('BEGIN');
      await this.options.onBegin?.(async <T>(sql: string, params: unknown[] = []) => (await run(client, { sql, params })).rows as T[]);
    } catch (err) {
      await this.rollback();
      throw err;
    }
    return client;
  }

  private release(destroy = false): void {
    this.client?.release(destroy || undefined);
    this.client = null;
  }
}

/** Runs `fn` as one unit of work: committed when it returns, rolled back when it throws. */
export async function unitOfWork<T>(pool: pg.Pool, fn: (work: UnitOfWork) => Promise<T>, options?: UnitOfWorkOptions): Promise<T> {
  const work = new UnitOfWork(pool, options);
  try {
    const result = await fn(work);
    await work.commit();
    return result;
  } catch (err) {
    await work.rollback();
    throw err;
  }
}
