import { readdirSync, readFileSync } from 'node:fs';
import { query } from './postgres.js';

/** Kernel clock ticks per second for /proc/<pid>/stat times (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** utime + stime of one process in ms, and its parent pid; null when it is gone. */
function readStat(pid: number): { cpuMs: number; ppid: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces), from field 3 on: state ppid … utime(14) stime(15).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND, ppid: Number(fields[1]) };
  } catch {
    return null;
  }
}

/** CPU time (user + system) a process has used so far, in ms. */
export function processCpuMs(pid: number): number {
  return readStat(pid)?.cpuMs ?? 0;
}

/**
 * CPU time used so far by the PostgreSQL server a database URL points at, when it runs on this machine:
 * the postmaster's children (backends, WAL writer, checkpointer…), found from the checkpointer's parent. A
 * backend that has exited takes its time with it; the services' pooled connections live through a run.
 * Null when the server is not local (its processes are not visible here).
 */
export async function postgresCpuMs(url: string): Promise<(() => number) | null> {
  // The checkpointer lives as long as the server (a backend of our own would be gone once we look).
  const [row] = await query<{ pid: number }>(url, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'`);
  const postmaster = row ? readStat(Number(row.pid))?.ppid : undefined;
  if (!postmaster) return null;
  return () => {
    let total = 0;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const stat = readStat(Number(entry));
      if (stat && stat.ppid === postmaster) total += stat.cpuMs;
    }
    return total;
  };
}
