import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from './service-process.js';

export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile over a sorted copy; milliseconds rounded to 0.1. */
export function summarize(samplesMs: number[]): LatencySummary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? NaN;
  const round = (n: number) => Math.round(n * 10) / 10;
  const mean = sorted.reduce((a, b) => a + b, 0) / (sorted.length || 1);
  return { count: sorted.length, p50: round(at(0.5)), p90: round(at(0.9)), p99: round(at(0.99)), max: round(sorted.at(-1) ?? NaN), mean: round(mean) };
}

/** Prints rows as an aligned text table (also valid Markdown). */
export function printTable(title: string, rows: Record<string, string | number>[]): string {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: string | number | undefined) => (v === undefined ? '' : String(v));
  const width = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) => `| ${values.map((v, i) => v.padEnd(width[i] ?? 0)).join(' | ')} |`;
  const text = [
    `\n${title}`,
    line(columns),
    `|${width.map((w) => '-'.repeat(w + 2)).join('|')}|`,
    ...rows.map((r) => line(columns.map((c) => cell(r[c])))),
  ].join('\n');
  process.stdout.write(`${text}\n`);
  return text;
}

export interface MachineInfo {
  nproc: number;
  cpuModel: string;
  memory: string;
  node: string;
  platform: string;
  postgres?: { kind: string; version: string; settings: Record<string, string> };
}

export function machineInfo(): MachineInfo {
  let memory = `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB total`;
  try {
    memory = execFileSync('free', ['-h'], { encoding: 'utf8' }).split('\n')[1]?.replace(/\s+/g, ' ').trim() ?? memory;
  } catch {
    // `free` missing: keep the os.totalmem() figure
  }
  return {
    nproc: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memory,
    node: process.version,
    platform: `${os.type()} ${os.release()}`,
  };
}

export const kib = (kb: number | null) => (kb === null ? 'n/a' : `${(kb / 1024).toFixed(0)} MiB`);

/** Writes bench/results/<name>-<timestamp>.json and returns its path (relative to the repository). */
export function writeResult(name: string, result: unknown): string {
  const dir = path.join(REPO_ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const file = path.join(dir, `${name}-${stamp}.json`);
  // The 1/5/15-minute load averages when the benchmark ended: other work on the machine shows here.
  writeFileSync(file, `${JSON.stringify({ ...(result as object), loadAverageAtEnd: os.loadavg() }, null, 2)}\n`);
  const relative = path.relative(REPO_ROOT, file);
  process.stdout.write(`\nresults: ${relative}\n`);
  return relative;
}
