import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { baseEnv, databaseForProcesses, freePort, startProcess } from '../support/processes.js';
import { eventually } from '../support/webhook-receiver.js';

// Every boot takes the schema lock. While another session holds it (a migration running, a stray psql
// session that took it by hand) a booting process used to wait without a word: now it says so.

const WAITING = 'waiting for the schema lock held by another process';
const LOG_DIR = path.resolve('test-results', 'logs');

const db = databaseForProcesses();

/** The log of the process started with `name` (startProcess names its file after the database and the process). */
function logOf(name: string): string {
  const file = readdirSync(LOG_DIR).find((f) => f.startsWith(`${db.name}-${name}-${process.pid}-`));
  return file ? readFileSync(path.join(LOG_DIR, file), 'utf8') : '';
}

describe('a process booting while another session holds the schema lock', () => {
  it('logs a warning naming the holder within a few seconds, then boots once the lock is released', async () => {
    const holder = new pg.Client({ connectionString: db.url, application_name: 'stray-psql' });
    await holder.connect();
    try {
      await holder.query("SELECT pg_advisory_lock(hashtextextended('payments:schema', 0))");
      const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const port = await freePort();
      const started = Date.now();
      const booting = startProcess('api', baseEnv(db.url, `http://127.0.0.1:${port}`, { PORT: String(port) }), { name: 'lockwait', readyTimeoutMs: 60_000 });
      // The wait's own clock is in the line (waitedMs); the bound here also covers a process start on a loaded CI host.
      const line = await eventually(() => logOf('lockwait').split('\n').find((l) => l.includes(WAITING)), 30_000, 'the schema-lock warning');
      // The warning after ~3 s of waiting (process start included), not at once: a short wait is normal.
      expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
      expect(JSON.parse(line)).toMatchObject({ level: 40, waitedMs: 3_000, holder: { pid: holderPid, applicationName: 'stray-psql', state: 'idle' } });
      // Still waiting: not serving yet.
      expect(await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status, () => 'refused')).toBe('refused');

      await holder.query("SELECT pg_advisory_unlock(hashtextextended('payments:schema', 0))");
      const api = await booting;
      expect((await fetch(`${api.url}/readyz`)).status).toBe(200);
      // Said once, not at every interval of the wait.
      expect(logOf('lockwait').split('\n').filter((l) => l.includes(WAITING))).toHaveLength(1);
    } finally {
      await holder.end();
    }
  }, 120_000);

  it('says nothing when the lock is free', async () => {
    const api = await startProcess('api', baseEnv(db.url, 'http://127.0.0.1:1'), { name: 'nolockwait' });
    expect((await fetch(`${api.url}/readyz`)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 3_500));
    expect(logOf('nolockwait')).not.toContain(WAITING);
  }, 60_000);
});
