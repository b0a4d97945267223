import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { adminDatabaseUrl, sql } from '../support/database.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

// A failover left DATABASE_URL on a hot standby, or someone set default_transaction_read_only: the
// database still answers every read, and every payment, callback and job write fails. The orchestrator
// must be told the process is not ready, and the operator why.

let svc: TestService;
let dbName: string;
let readOnly = false;

/** Closes every session of the service's database but the caller's: the pools reconnect, with the database's settings as they now are. */
async function reconnectPools(): Promise<void> {
  await sql(adminDatabaseUrl(), 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName]);
}

async function readiness() {
  const res = await fetch(`${svc.baseUrl}/readyz`);
  return { status: res.status, data: ((await res.json()) as { data: { status: string; checks: Record<string, boolean>; reason?: string } }).data };
}

beforeAll(async () => {
  svc = await startTestService();
  dbName = new URL(svc.databaseUrl).pathname.slice(1);
}, 60_000);

afterAll(async () => {
  // A failed test left the database read-only: the service's stop writes (Agenda gives its jobs back).
  if (readOnly) {
    await sql(adminDatabaseUrl(), `ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
    await reconnectPools();
  }
  await svc?.stop();
}, 120_000);

describe('/readyz on a database that cannot take writes', () => {
  it('answers 503 not_ready saying the database is read-only, and 200 again once it takes writes', async () => {
    expect(await readiness()).toMatchObject({ status: 200, data: { status: 'ready' } });

    await sql(adminDatabaseUrl(), `ALTER DATABASE ${dbName} SET default_transaction_read_only = on`);
    readOnly = true;
    await reconnectPools();
    // The first probe after the sessions were closed may meet a dead pooled connection: wait for one that answered.
    const notReady = await eventually(async () => {
      const answer = await readiness();
      return answer.data.reason?.includes('read-only') ? answer : null;
    }, 15_000, 'a /readyz that says the database is read-only');
    expect(notReady).toEqual({
      status: 503,
      data: { status: 'not_ready', checks: { database: false, job_runner: false }, reason: expect.stringContaining('the database is read-only') },
    });

    await sql(adminDatabaseUrl(), `ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
    readOnly = false;
    await reconnectPools();
    await eventually(async () => (await readiness()).status === 200 || null, 15_000, '/readyz ready again');
  }, 60_000);
});
