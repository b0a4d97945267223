import http from 'node:http';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { sql } from '../support/database.js';
import { adminMerchant, baseEnv, databaseForProcesses, logWithLine, startProcess } from '../support/processes.js';
import { eventually } from '../support/webhook-receiver.js';

/**
 * The boot goes on after the API listens (Agenda, the recurring jobs, the webhook drain loop). A stop
 * signal in that stretch drains at once: /readyz answers 503 and responses close their connections while
 * the boot finishes, instead of inviting traffic to a process about to stop. A step of that stretch that
 * fails stops the process the graceful way: the requests being served are answered, then exit 1.
 *
 * The boot is held there by the database, as another session can hold it: a trigger on agenda_jobs makes
 * the first recurring job's insert (the boot's first write after listening) wait for an advisory lock the
 * test holds, and (second test) refuse the row once the lock is let go.
 */

const db = databaseForProcesses();
/** The advisory lock the trigger waits for (two-int form: no clash with the service's own keys). */
const HOLD = '4242, 1';
const REFUSAL = 'agenda_jobs refused by the test';

/** The trigger that holds the boot at its first recurring job; with `refuse`, the insert then fails. */
async function holdBootAtRecurringJobs(refuse: boolean): Promise<void> {
  await sql(db.url, `CREATE OR REPLACE FUNCTION test_hold_boot() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(${HOLD});
      ${refuse ? `RAISE EXCEPTION '${REFUSAL}';` : ''}
      RETURN NEW;
    END $$`);
  await sql(db.url, 'DROP TRIGGER IF EXISTS test_hold_boot ON agenda_jobs');
  await sql(db.url, "CREATE TRIGGER test_hold_boot BEFORE INSERT ON agenda_jobs FOR EACH ROW WHEN (NEW.name = 'webhook.sweep') EXECUTE FUNCTION test_hold_boot()");
}

/** Sessions waiting for the test's advisory lock: the boot, stuck at the trigger. */
async function bootsWaiting(): Promise<number> {
  const [row] = await sql<{ n: number }>(db.url, "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = 4242 AND objid = 1 AND NOT granted");
  return row!.n;
}

/** A GET on a keep-alive connection: status, the Connection header it was answered with, body. */
function get(url: string, agent: http.Agent, headers: Record<string, string> = {}): Promise<{ status: number; connection: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

describe('a boot still under way after the API listens', () => {
  let holder: pg.Client;
  beforeAll(async () => {
    holder = new pg.Client({ connectionString: db.url, application_name: 'boot-holder' });
    await holder.connect();
  });
  afterAll(async () => {
    await holder.end();
  });

  it('a SIGTERM then drains at once (/readyz 503 draining, Connection: close) until the boot ends, then exits 0', async () => {
    await holdBootAtRecurringJobs(false);
    await holder.query(`SELECT pg_advisory_lock(${HOLD})`);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      // Ready (listening, /readyz 200) while the boot waits at its recurring jobs.
      const proc = await startProcess('all', baseEnv(db.url, 'http://127.0.0.1:9'), { name: 'heldboot' });
      await eventually(async () => (await bootsWaiting()) === 1, 10_000, 'the boot waiting at the trigger');
      expect(await get(`${proc.url}/readyz`, agent)).toMatchObject({ status: 200, connection: 'keep-alive' });

      process.kill(proc.pid, 'SIGTERM');
      expect(await logWithLine(proc.logFile, '"msg":"signal received"')).toContain('"booting":true');
      // The boot is still held (and says nothing of its end), yet the process already tells the
      // orchestrator to go elsewhere, on the connection it had kept alive.
      const readyz = await get(`${proc.url}/readyz`, agent);
      expect(await bootsWaiting()).toBe(1);
      expect(readFileSync(proc.logFile, 'utf8')).not.toContain('boot finished');
      expect(readyz).toMatchObject({ status: 503, connection: 'close' });
      expect(JSON.parse(readyz.body)).toMatchObject({ success: false, data: { status: 'draining' } });
      expect(await get(`${proc.url}/healthz`, agent)).toMatchObject({ status: 200, connection: 'close' });

      await holder.query(`SELECT pg_advisory_unlock(${HOLD})`);
      expect(await proc.exited).toBe(0);
      const log = readFileSync(proc.logFile, 'utf8');
      expect(log).toContain('boot finished after a stop was requested');
      expect(log).not.toContain('payments service started');
    } finally {
      agent.destroy();
      await holder.query('SELECT pg_advisory_unlock_all()');
    }
  }, 90_000);

  it('a later step that fails lets the requests being served finish, then exits 1 with "failed to start"', async () => {
    const { apiKey } = await adminMerchant(db.url, 'Boot Failure Ltd');
    // The first test's process scheduled the recurring jobs: gone, so this boot inserts them again.
    await sql(db.url, 'DELETE FROM agenda_jobs');
    await holdBootAtRecurringJobs(true);
    await holder.query(`SELECT pg_advisory_lock(${HOLD})`);
    // A second session that holds the merchants table: a merchant's request waits on it, under way.
    const tableHolder = new pg.Client({ connectionString: db.url, application_name: 'merchants-holder' });
    await tableHolder.connect();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const proc = await startProcess('all', baseEnv(db.url, 'http://127.0.0.1:9'), { name: 'failedboot' });
      await eventually(async () => (await bootsWaiting()) === 1, 10_000, 'the boot waiting at the trigger');

      await tableHolder.query('BEGIN');
      await tableHolder.query('LOCK TABLE merchants IN ACCESS EXCLUSIVE MODE');
      const underWay = get(`${proc.url}/v1/merchant`, agent, { 'X-API-Key': apiKey }).then(
        (answer) => answer,
        (err: NodeJS.ErrnoException) => ({ cut: err.code ?? err.message }),
      );
      await eventually(async () => {
        const [row] = await sql<{ n: number }>(db.url, "SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'merchants' AND NOT l.granted");
        return row!.n > 0;
      }, 10_000, 'the merchant request waiting for the merchants table');

      // The boot's next step fails while that request is under way.
      await holder.query(`SELECT pg_advisory_unlock(${HOLD})`);
      const failing = await logWithLine(proc.logFile, 'boot failed: stopping what had started', 15_000);
      expect(failing).toContain(REFUSAL);
      await tableHolder.query('COMMIT');

      // Answered, not cut.
      const answer = await underWay;
      expect(answer).toMatchObject({ status: 200 });
      expect(JSON.parse((answer as { body: string }).body)).toMatchObject({ success: true, data: { name: 'Boot Failure Ltd' } });
      expect(await proc.exited).toBe(1);
      const log = readFileSync(proc.logFile, 'utf8');
      expect(log).toContain(`failed to start: ${REFUSAL}`);
      expect(log).not.toContain('graceful shutdown timed out');
    } finally {
      agent.destroy();
      await tableHolder.end();
      await holder.query('SELECT pg_advisory_unlock_all()');
    }
  }, 90_000);
});
