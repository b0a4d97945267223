import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../server/persistence/embedded-postgres.js';
import { PRUNE_RATE_LIMIT_WINDOWS_JOB } from '../../server/jobs/prune-rate-limit-windows.job.js';
import { sql } from '../support/database.js';
import { runJobOnce } from '../support/job-run.js';
import { startTestService, type TestService } from '../support/service.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { eventually } from '../support/webhook-receiver.js';

// A failover that left DATABASE_URL on a hot standby, then the standby promoted: PostgreSQL refuses
// LISTEN during recovery ("cannot execute LISTEN during recovery"; default_transaction_read_only does not:
// LISTEN and NOTIFY run in read-only transactions, so read-only-database.test.ts never saw this). Agenda's
// wake-ups LISTENed on a connection taken from its pool and, refused, tried again ~100 ms later without
// giving it back: the pool was used up within a second or two, and once the database took writes again
// no job ran in that process (no webhook retry, no status sync, no reconciliation) while /readyz said
// ready. Here on a cluster of the test's own: stopped, restarted as a standby (standby.signal), promoted.

const SETTINGS = { fsync: 'off', max_connections: '100' };
let tempDir: string;
let clusterDir: string;
let cluster: EmbeddedDatabase;
let proxy: TcpProxy;
let svc: TestService;

const addressOf = (url: string) => ({ host: '127.0.0.1', port: Number(new URL(url).port) });

async function readiness() {
  const res = await fetch(`${svc.baseUrl}/readyz`);
  return { status: res.status, data: ((await res.json()) as { data: { status: string; checks: Record<string, boolean>; reason?: string } }).data };
}

/** Resolves with the job's run, or 'no run' when it did not finish within `ms`. */
async function jobRunsWithin(ms: number): Promise<'ran' | string> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    runJobOnce(svc, PRUNE_RATE_LIMIT_WINDOWS_JOB).then(() => 'ran', (err: Error) => `failed: ${err.message}`),
    new Promise<string>((resolve) => (timer = setTimeout(() => resolve(`no run within ${ms} ms`), ms))),
  ]);
  clearTimeout(timer);
  return outcome;
}

beforeAll(async () => {
  tempDir = await mkdtemp(path.join(os.tmpdir(), 'payments-standby-'));
  // As root the server runs as the postgres OS user, which must enter it.
  await chmod(tempDir, 0o755);
  clusterDir = path.join(tempDir, 'cluster');
  cluster = await startEmbeddedPostgres(clusterDir, { settings: SETTINGS });
  // The service keeps one address while the cluster comes back on another port.
  proxy = new TcpProxy(addressOf(cluster.url));
  // A fresh database: the boot migrates it. A stop shorter than the default (it must outlast a provider call).
  svc = await startTestService({ SHUTDOWN_TIMEOUT_MS: '8000', PROVIDER_TIMEOUT_MS: '2000' }, { database: { url: cluster.url }, connectVia: (url) => proxy.start(url) });
}, 120_000);

afterAll(async () => {
  await svc?.stop();
  await proxy?.stop();
  await cluster?.stop();
  await rm(tempDir, { recursive: true, force: true });
}, 60_000);

describe('a database that comes back as a hot standby, then takes writes again', () => {
  it('leaves no connection of Agenda taken: jobs run again once it takes writes, and /readyz says ready only when they can', async () => {
    expect(await readiness()).toMatchObject({ status: 200, data: { status: 'ready' } });
    expect(await jobRunsWithin(10_000)).toBe('ran');

    await cluster.stop();
    await writeFile(path.join(clusterDir, 'standby.signal'), '');
    cluster = await startEmbeddedPostgres(clusterDir, { settings: SETTINGS });
    proxy.retarget(addressOf(cluster.url));
    expect(await sql(cluster.url, 'SELECT pg_is_in_recovery() AS standby')).toEqual([{ standby: true }]);

    const notReady = await eventually(async () => {
      const answer = await readiness().catch(() => null);
      return answer?.data.reason?.includes('read-only') ? answer : null;
    }, 20_000, 'a /readyz that says the database is read-only');
    expect(notReady.status).toBe(503);
    // Meanwhile the process goes on trying to LISTEN again, refused each time.
    await new Promise((r) => setTimeout(r, 3_000));

    await sql(cluster.url, 'SELECT pg_promote()');
    expect(await sql(cluster.url, 'SELECT pg_is_in_recovery() AS standby')).toEqual([{ standby: false }]);
    await eventually(async () => (await readiness()).status === 200 || null, 20_000, '/readyz ready again');
    // Ready means the jobs run: one asked for now runs at once.
    expect(await jobRunsWithin(15_000)).toBe('ran');
  }, 90_000);
});
