import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { adminDatabaseUrl, sql } from '../support/database.js';
import { startTestService, type TestService } from '../support/service.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/webhook-receiver.js';

// Agenda's wake-ups (LISTEN/NOTIFY on agenda:jobs) used to LISTEN on a connection borrowed for good from
// Agenda's own pool. PostgreSQL closing the connections (a restart, a failover, an operator's
// pg_terminate_backend) made it borrow another about 100 ms later; a stop during that borrow found
// nothing to give back, the borrow then completed, and closing the pool waited for that connection for
// ever: the process hung until SHUTDOWN_TIMEOUT_MS and exited 1 ("graceful shutdown timed out"), with the
// ORM's and the other pools never closed. And /readyz judged the job runner on the ORM's pool, so a
// process whose Agenda pool was used up said it was ready while no job could run.

const SHUTDOWN_TIMEOUT_MS = 8_000;
/** How long a new connection takes to reach the database once the relay slows them. */
const SLOW_CONNECT_MS = 3_000;

let svc: TestService;
let proxy: TcpProxy;
let dbName: string;

async function readiness() {
  const res = await fetch(`${svc.baseUrl}/readyz`);
  return { status: res.status, data: ((await res.json()) as { data: { status: string; checks: Record<string, boolean>; reason?: string } }).data };
}

const sessionsOfDatabase = async () =>
  Number((await sql<{ n: string }>(adminDatabaseUrl(), 'SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName]))[0]!.n);

beforeAll(async () => {
  const { hostname, port } = new URL(adminDatabaseUrl());
  proxy = new TcpProxy({ host: hostname, port: Number(port || 5432) });
  // A provider timeout the 8 s stop covers (the boot refuses a stop shorter than one provider call).
  // The recurring jobs seldom: a job running at the stop would wait for a (slow) connection and hold the
  // stop until the listening connection was made again, hiding the race this is about. (The sweep's lock
  // lifetime follows its interval, and Agenda keeps a timer of half of it after a run: jest's exit waits.)
  const quiet = { STATUS_SYNC_POLL_INTERVAL: '1h', DELIVERY_SWEEP_INTERVAL: '5s', PAYMENT_COUNT_FOLD_INTERVAL: '1h', RATE_LIMIT_PRUNE_INTERVAL: '1h' };
  svc = await startTestService(
    { ...quiet, SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS), PROVIDER_TIMEOUT_MS: '2000' },
    { connectVia: (url) => proxy.start(url) },
  );
  dbName = new URL(svc.databaseUrl).pathname.slice(1);
}, 60_000);

afterAll(async () => {
  proxy?.delayConnections(0);
  await svc?.stop();
  await proxy?.stop();
}, 60_000);

describe("Agenda's listening connection and its pool", () => {
  it('/readyz answers 503 "job_runner": false while Agenda cannot get a connection from its pool, and 200 once it can', async () => {
    expect(await readiness()).toMatchObject({ status: 200, data: { status: 'ready', checks: { database: true, job_runner: true } } });

    // Whatever holds them (a leak, jobs stuck on their queries): every connection of Agenda's pool asked
    // for at once, and kept; those not given at once are given as Agenda's own queries hand theirs back.
    const pool = (svc.service.container.agenda.db as unknown as { getPool(): pg.Pool }).getPool();
    const max = (pool as unknown as { options: { max: number } }).options.max;
    const taken = Array.from({ length: max }, () => pool.connect().catch(() => null));
    try {
      await eventually(() => pool.totalCount === max && pool.idleCount === 0, 10_000, "every connection of Agenda's pool taken");
      expect(await readiness()).toEqual({
        status: 503,
        data: { status: 'not_ready', checks: { database: true, job_runner: false }, reason: expect.stringContaining('job runner') },
      });
    } finally {
      for (const client of taken) void client.then((c) => c?.release());
    }
    await eventually(async () => (await readiness()).status === 200 || null, 10_000, '/readyz ready again');
  }, 30_000);

  it('a stop while the listening connection is being made again ends within SHUTDOWN_TIMEOUT_MS and leaves no session behind', async () => {
    await eventually(async () => (await readiness()).status === 200 || null, 10_000, '/readyz ready');
    // The runs the boot started are over.
    await eventually(async () => (await svc.sql('SELECT 1 FROM agenda_jobs WHERE locked_at IS NOT NULL')).length === 0, 20_000, 'no job running');

    // The database closes every session of the service (a restart, a failover); new connections are slow to reach it.
    proxy.delayConnections(SLOW_CONNECT_MS);
    await sql(adminDatabaseUrl(), 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName]);
    // The listening connection is being made again (its reconnect starts ~100 ms after the loss).
    await new Promise((r) => setTimeout(r, 400));

    const started = Date.now();
    const outcome = await Promise.race([
      svc.service.stop().then(() => 'stopped' as const),
      new Promise<'still stopping'>((resolve) => setTimeout(() => resolve('still stopping'), SHUTDOWN_TIMEOUT_MS + 2_000).unref()),
    ]);
    expect(outcome).toBe('stopped');
    expect(Date.now() - started).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
    // Every pool closed, the listening connection included (a late connect ends as it arrives).
    proxy.delayConnections(0);
    await new Promise((r) => setTimeout(r, SLOW_CONNECT_MS + 500));
    expect(await sessionsOfDatabase()).toBe(0);
  }, 40_000);
});
