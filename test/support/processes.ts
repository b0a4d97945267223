import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll } from '@jest/globals';
import { createTestDatabase } from './database.js';
import { TEST_ENCRYPTION_KEY } from './test-key.js';
import { freePort } from '../../server/net/free-port.js';

export { freePort };

/**
 * The service as real child processes (`node server/main.js` of the build `npm test` compiles, as
 * `npm run start:prod` runs it), the way it runs in production: each its own Node process, its own
 * pools and Agenda instance, sharing one database. Stdout and stderr go to a log file under
 * test-results/logs/ so a test can read (and audit) them.
 */

export type Role = 'api' | 'worker' | 'all';

export interface ServiceProcess {
  role: Role;
  name: string;
  /** The API address (null for a worker, which serves no HTTP). */
  url: string | null;
  pid: number;
  logFile: string;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  exited: Promise<number | string>;
  /** Sends `signal` (SIGKILL by default) and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Graceful stop: SIGTERM, then SIGKILL if it is still running after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

const REPO_ROOT = path.resolve(new URL('../..', import.meta.url).pathname);
/** Where `npm test` compiled the server code (scripts/run-tests.mjs); without it, the sources run through tsx. */
const SERVER_BUILD = process.env.TEST_SERVER_BUILD;

/** Node's arguments to run one of the project's entry points (`server/….ts`). */
function entryPoint(script: string): string[] {
  if (!SERVER_BUILD) return ['--import', 'tsx', script];
  return [path.join(SERVER_BUILD, script.replace(/\.ts$/, '.js'))];
}
const LOG_DIR = path.join(REPO_ROOT, 'test-results', 'logs');
const live = new Set<ChildProcess>();
const logFiles: string[] = [];
let counter = 0;

// Last line of defence: a jest worker that exits (or crashes) takes its children with it.
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});


/** Configuration every test process shares; `env` adds to or overrides it. */
export function baseEnv(databaseUrl: string, publicBaseUrl: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    DATABASE_URL: databaseUrl,
    // Several processes share the test server's connections (100 by default) with other test files.
    DATABASE_POOL_MAX: '4',
    PUBLIC_BASE_URL: publicBaseUrl,
    ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    SANDBOX: 'true',
    SANDBOX_CALLBACK_DELAY_MS: '50',
    WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms,200ms',
    WEBHOOK_TIMEOUT_MS: '2000',
    // Longer than an in-process simulator takes to answer on a loaded 2-core CI host; tests about provider timeouts set their own.
    PROVIDER_TIMEOUT_MS: '10000',
    DELIVERY_SWEEP_INTERVAL: '1s',
    STATUS_SYNC_POLL_INTERVAL: '1s',
    LOG_LEVEL: 'info',
    ...env,
  };
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/**
 * Starts one service process in `role` and waits until it is ready: an api process when its
 * `/readyz` answers 200, a worker when it logs that it started. `env` must carry DATABASE_URL and
 * PUBLIC_BASE_URL (see `baseEnv`); an api process gets `env.PORT` or a free port.
 */
export async function startProcess(
  role: Role,
  env: Record<string, string>,
  options: { name?: string; readyTimeoutMs?: number } = {},
): Promise<ServiceProcess> {
  mkdirSync(LOG_DIR, { recursive: true });
  const dbName = env.DATABASE_URL ? new URL(env.DATABASE_URL).pathname.slice(1) : 'nodb';
  const name = options.name ?? `${role}${++counter}`;
  const logFile = path.join(LOG_DIR, `${dbName}-${name}-${process.pid}-${++counter}.log`);
  logFiles.push(logFile);
  const servesHttp = role !== 'worker';
  const port = servesHttp ? (env.PORT ?? String(await freePort())) : '0';
  const fd = openSync(logFile, 'a');
  // Only what the service reads, plus PATH/HOME for node itself: nothing of jest's environment leaks in.
  const childEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    // A worker's /healthz listener takes any free port: two workers (or two test runs) never collide on 3001.
    WORKER_PORT: '0',
    ...env,
    ROLE: role,
    PORT: port,
  };
  const child = spawn(process.execPath, entryPoint('server/main.ts'), {
    cwd: REPO_ROOT,
    env: childEnv,
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  live.add(child);
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve(code ?? signal ?? 'unknown');
    });
  });
  let hasExited = false;
  void exited.then(() => (hasExited = true));

  const url = servesHttp ? `http://127.0.0.1:${port}` : null;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (hasExited) throw new Error(`${name} (${role}) exited before it was ready:\n${tail(logFile)}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${name} (${role}) was not ready in time:\n${tail(logFile)}`);
    }
    if (url) {
      const ready = await fetch(`${url}/readyz`).then((r) => r.status === 200, () => false);
      if (ready) break;
    } else if (readFileSync(logFile, 'utf8').includes('"msg":"payments service started"')) {
      break;
    }
    await sleep(100);
  }

  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (!hasExited) child.kill(signal);
    await exited;
  };
  return {
    role,
    name,
    url,
    pid: child.pid!,
    logFile,
    exited,
    kill,
    async stop(graceMs = 15_000) {
      if (hasExited) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Stops every child this test file started (gracefully, then by force); call it in afterAll. */
export async function stopAllProcesses(graceMs = 10_000): Promise<void> {
  await Promise.all(
    [...live].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
          setTimeout(() => child.kill('SIGKILL'), graceMs).unref();
        }),
    ),
  );
}

/**
 * A fresh database for this test file's processes: created before its tests, dropped after them once
 * every process the file started has stopped. Its `url` and `name` are set by the time a test runs.
 */
export function databaseForProcesses(): { url: string; name: string } {
  const handle = { url: '', name: '' };
  let created: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  beforeAll(async () => {
    created = await createTestDatabase();
    Object.assign(handle, { url: created.url, name: created.name });
  });
  // Each process gets 10 s to stop before it is killed; the drop then waits for its connections to close.
  afterAll(async () => {
    await stopAllProcesses();
    await created?.drop();
  }, 60_000);
  return handle;
}

/** A process's log once it holds `line` (the logger writes asynchronously: a loaded host flushes it late), or as it is after `waitMs`. */
export async function logWithLine(logFile: string, line: string, waitMs = 5_000): Promise<string> {
  const deadline = Date.now() + waitMs;
  let log = readFileSync(logFile, 'utf8');
  while (!log.includes(line) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    log = readFileSync(logFile, 'utf8');
  }
  return log;
}

/** Every log file the processes of this test file wrote (for the secrets audit). */
export function processLogFiles(): readonly string[] {
  return logFiles;
}

/** One of the project's command-line entry points (`server/….ts`), run as an operator runs it: exit code and output. */
export async function runCli(script: string, args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...entryPoint(script), ...args],
      { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env }, timeout: 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** The admin CLI (`server/admin/cli.ts …`) against `databaseUrl`; returns its JSON output, throws on a non-zero exit. */
export async function adminCli<T = Record<string, unknown>>(databaseUrl: string, args: string[], env: Record<string, string> = {}): Promise<T> {
  const run = await runCli('server/admin/cli.ts', args, { DATABASE_URL: databaseUrl, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, NODE_ENV: 'test', ...env });
  if (run.code !== 0) throw new Error(`admin ${args.join(' ')} failed: ${run.stderr || `exit ${run.code}`}`);
  return JSON.parse(run.stdout) as T;
}

/** `npm run migrate` (server/migrate.ts) against `databaseUrl`. */
export function migrateCli(databaseUrl: string, args: string[] = []): Promise<{ code: number; stdout: string; stderr: string }> {
  return runCli('server/migrate.ts', args, { DATABASE_URL: databaseUrl, NODE_ENV: 'test' });
}

/** A merchant and an all-scopes API key made with the admin CLI, as an operator would. */
export async function adminMerchant(databaseUrl: string, name: string): Promise<{ merchantId: string; apiKey: string }> {
  const { merchant_id: merchantId } = await adminCli<{ merchant_id: string }>(databaseUrl, ['merchant', 'create', '--name', name]);
  const scopes = 'payments:read,payments:write,refunds:read,refunds:write,merchant:read,merchant:write,webhooks:read,webhooks:write';
  const { key } = await adminCli<{ key: string }>(databaseUrl, ['key', 'create', '--merchant', merchantId, '--scopes', scopes]);
  return { merchantId, apiKey: key };
}

/** One request to a running api process, as a merchant's client sends it (JSON body, X-API-Key when given): status, headers (lower-case names) and parsed body. */
export async function callApi(baseUrl: string, method: string, path: string, apiKey: string | null, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { ...(apiKey ? { 'X-API-Key': apiKey } : {}), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: Object.fromEntries([...(res.headers as unknown as Iterable<[string, string]>)]), body: (await res.json()) as Record<string, any> };
}

/** Stores cardpay credentials for the merchant of `apiKey` through the public API of a running api process. */
export async function storeCardpayCredentials(baseUrl: string, apiKey: string, secretKey: string): Promise<number> {
  const res = await fetch(`${baseUrl}/v1/merchant/credentials`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
    body: JSON.stringify({ provider: 'cardpay', cardpay: { secret_key: secretKey } }),
  });
  await res.arrayBuffer();
  return res.status;
}
