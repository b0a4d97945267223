import { pathToFileURL } from 'node:url';
import { startPgServer, type PgServer } from './postgres.js';
import { machineInfo, writeResult, type MachineInfo } from './report.js';

export interface BenchContext {
  pg: PgServer;
  machine: MachineInfo;
}

/** What a benchmark hands back to run-all: the headline numbers and where the full JSON went. */
export interface BenchOutcome {
  name: string;
  headline: Record<string, string | number>;
  resultFile: string;
  peakRssKb: Record<string, number | null>;
}

export type Benchmark = (ctx: BenchContext) => Promise<BenchOutcome>;

export function log(message: string): void {
  process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** An integer knob from the environment (BENCH_*), with a default. */
export function knob(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${raw}`);
  return value;
}

export async function withContext<T>(fn: (ctx: BenchContext) => Promise<T>): Promise<T> {
  const machine = machineInfo();
  const pg = await startPgServer((line) => log(`postgres: ${line}`));
  machine.postgres = { kind: pg.kind, version: pg.version, settings: pg.settings };
  log(`PostgreSQL ${pg.version} (${pg.kind}); node ${machine.node}; ${machine.nproc} CPUs; ${machine.memory}`);
  try {
    return await fn({ pg, machine });
  } finally {
    await pg.stop();
  }
}

/** `tsx bench/<name>.ts` runs one benchmark on its own. */
export function runIfMain(metaUrl: string, bench: Benchmark): void {
  if (!process.argv[1] || metaUrl !== pathToFileURL(process.argv[1]).href) return;
  withContext(bench).then(
    () => process.exit(0),
    (err: Error) => {
      process.stderr.write(`benchmark failed: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}

/**
 * A benchmark whose own checks failed (requests that failed, rows missing, deliveries lost) has no
 * headline: its numbers would describe something other than the service working. Writes the JSON with
 * the reasons under `failed`, then throws, so the process exits non-zero.
 */
export function failOnProblems(name: string, problems: string[], result: object): void {
  if (problems.length === 0) return;
  writeResult(name, { ...result, failed: problems });
  throw new Error(`${name}: check failed, no headline — ${problems.join('; ')}`);
}
