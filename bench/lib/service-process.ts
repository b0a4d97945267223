import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './postgres.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** One encryption key per benchmark run, shared by its processes (they read each other's secrets). */
export const BENCH_ENCRYPTION_KEY = randomBytes(32).toString('base64');

export interface ServiceProcess {
  role: 'api' | 'worker' | 'all' | 'baseline';
  pid: number;
  /** The command line the process was started with (what its RSS belongs to). */
  command: string;
  /** http://127.0.0.1:<port> (the worker role listens on nothing; the address is unused). */
  baseUrl: string;
  /** Peak resident set size so far, from the kernel (VmHWM), in KiB. */
  peakRssKb(): number | null;
  /** Resident set size now (VmRSS), in KiB. */
  rssKb(): number | null;
  stop(): Promise<{ peakRssKb: number | null }>;
  /** Resolves when /readyz (the baseline: /healthz) answers 200; not for the worker role. */
  waitReady(timeoutMs?: number): Promise<void>;
  stderrTail(): string;
}

function readStatusKb(pid: number, field: 'VmHWM' | 'VmRSS'): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

/**
 * How the benchmarks start the service (BENCH_START), exactly as the npm script does, without the npm
 * wrapper (so the pid measured is the service itself):
 * - `prod` (default): `npm run start:prod`'s — node on the output of `npm run build`, as the image runs
 *   it; the benchmark builds once first so it measures the current code;
 * - `dev`: `npm start`'s command line — node with tsx compiling the TypeScript in memory.
 */
export type StartMode = 'dev' | 'prod';

export function startMode(): StartMode {
  const mode = process.env.BENCH_START ?? 'prod';
  if (mode !== 'dev' && mode !== 'prod') throw new Error(`BENCH_START must be dev or prod, got ${mode}`);
  return mode;
}

let built = false;
function buildOnce(): void {
  if (built) return;
  execFileSync('npm', ['run', '-s', 'build'], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  built = true;
}

/**
 * The node arguments of an npm script that runs `exec node …` or `node …` (its node options included),
 * after any leading variable assignments (start:prod's NODE_ENV default: the benchmark sets NODE_ENV itself).
 */
function nodeArgsOfScript(name: 'start' | 'start:prod'): string[] {
  const scripts = (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const [command, ...args] = (scripts[name] ?? '').replace(/^(?:\w+=\S*\s+)*/, '').replace(/^exec\s+/, '').split(/\s+/).filter(Boolean);
  if (command !== 'node') throw new Error(`the ${name} script does not run node directly: ${scripts[name]}`);
  return args;
}

function startCommand(role: ServiceProcess['role'], mode: StartMode): string[] {
  // The baseline gets start:prod's node options too (heap sizes change GC work): only the code differs.
  if (role === 'baseline') return [...nodeArgsOfScript('start:prod').filter((a) => a.startsWith('-')), '--import', 'tsx', 'bench/baseline-server.ts'];
  if (mode === 'prod') buildOnce();
  return nodeArgsOfScript(mode === 'prod' ? 'start:prod' : 'start');
}

/**
 * Starts the real service (or the bare baseline) as a child process, as BENCH_START says (see StartMode).
 * Role `baseline` runs bench/baseline-server.ts under tsx in either mode, with start:prod's node options.
 */
export async function startServiceProcess(options: {
  role: 'api' | 'worker' | 'all' | 'baseline';
  databaseUrl: string;
  env?: Record<string, string>;
}): Promise<ServiceProcess> {
  const readyPath = options.role === 'baseline' ? '/healthz' : '/readyz';
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'payments-bench-data-'));
  // e.g. BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' to profile the processes under load.
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const args = [...nodeArgs, ...startCommand(options.role, startMode())];
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? os.tmpdir(),
      NODE_ENV: 'development',
      ROLE: options.role,
      PORT: String(port),
      DATABASE_URL: options.databaseUrl,
      ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
      PUBLIC_BASE_URL: baseUrl,
      SANDBOX: 'true',
      SANDBOX_CALLBACK_DELAY_MS: '0',
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      // Production counts every authenticated request against its key (100/s by default; NODE_ENV=development
      // leaves the limiter off): the same counter upsert per request, with a limit no benchmark reaches.
      RATE_LIMIT_PER_SECOND: '1000000000',
      ...options.env,
    },
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8000);
  });
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once('exit', () => {
    exited = true;
    resolve();
  }));
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not start the service process');
  let lastPeak: number | null = null;
  const peakRssKb = () => {
    if (!exited) lastPeak = readStatusKb(pid, 'VmHWM') ?? lastPeak;
    return lastPeak;
  };

  return {
    role: options.role,
    pid,
    command: `node ${args.join(' ')}`,
    baseUrl,
    peakRssKb,
    rssKb: () => (exited ? null : readStatusKb(pid, 'VmRSS')),
    stderrTail: () => stderr,
    async waitReady(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        if (exited) throw new Error(`service (${options.role}) exited during start:\n${stderr}`);
        const ok = await fetch(`${baseUrl}${readyPath}`).then((r) => r.status === 200, () => false);
        if (ok) return;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(`service (${options.role}) not ready after ${timeoutMs} ms:\n${stderr}`);
    },
    async stop() {
      const peak = peakRssKb();
      if (!exited) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await exit;
        clearTimeout(killer);
      }
      return { peakRssKb: peak };
    },
  };
}

/** Samples the peak RSS of the given processes every second until stopped (VmHWM is the kernel's own peak). */
export function watchRss(processes: ServiceProcess[]): () => void {
  const timer = setInterval(() => processes.forEach((p) => p.peakRssKb()), 1000);
  timer.unref();
  return () => clearInterval(timer);
}
