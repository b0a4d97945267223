import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PRUNE_RATE_LIMIT_WINDOWS_SQL, RATE_LIMIT_WINDOW_RETENTION_MS } from '../../server/domain/auth/rate-limit-retention.js';
import { COUNT_HITS_SQL, RateLimiter } from '../../server/domain/auth/rate-limiter.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

// The rows the per-key (and per-callback-address) rate limits are counted in, `rate_limit_windows`:
// - a worker job (`rate-limit-windows.prune`, every RATE_LIMIT_PRUNE_INTERVAL) deletes the windows that
//   have ended, through an index on window_start; requests never prune (each ~100th new window fired a
//   DELETE that read the whole table, on the requests' pool);
// - a window's row names its length, so a limiter per second and one per minute of the same key (a
//   rolling change of RATE_LIMIT_PER_MINUTE to RATE_LIMIT_PER_SECOND) never read each other's count;
// - the table is UNLOGGED: a count writes no WAL and its commit waits for no flush (it holds no money).

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ RATE_LIMIT_PRUNE_INTERVAL: '500ms' });
});
afterAll(async () => {
  await t?.stop();
});

const limiter = (limit: number, windowMs: number) => new RateLimiter(t.service.container.orm.em, { limit, windowMs });
const rowsOf = (bucket: string) =>
  t.sql<{ bucket: string; count: number }>(`SELECT bucket, count FROM rate_limit_windows WHERE bucket LIKE $1 || '%' ORDER BY bucket`, [bucket]);

describe('a rolling change from a per-minute to a per-second limit', () => {
  it('counts each window length apart: the per-second processes do not read the per-minute count', async () => {
    const keyId = randomUUID();
    const perMinute = limiter(1000, 60_000);
    const perSecond = limiter(5, 1000);
    // The start of the current minute: the first second of the minute begins at the same instant.
    const t0 = Math.floor(Date.now() / 60_000) * 60_000;
    for (let i = 0; i < 20; i += 1) expect((await t.inContext(() => perMinute.hit(keyId, t0))).allowed).toBe(true);

    const verdict = await t.inContext(() => perSecond.hit(keyId, t0 + 10));
    expect(verdict).toMatchObject({ allowed: true, limit: 5, remaining: 4 });
    expect(await rowsOf(keyId)).toEqual([{ bucket: `${keyId}/1s`, count: 1 }, { bucket: `${keyId}/60s`, count: 20 }]);
  });
});

describe('ended windows are deleted by a worker job, not by requests', () => {
  it('the job deletes the windows that started more than two minutes ago and keeps the others', async () => {
    expect(RATE_LIMIT_WINDOW_RETENTION_MS).toBe(120_000);
    const bucket = `prune-${randomUUID()}`;
    const ages = { old20m: '20 minutes', old3m: '3 minutes', recent90s: '90 seconds', current: '0 seconds' };
    for (const [name, age] of Object.entries(ages)) {
      await t.sql(`INSERT INTO rate_limit_windows (bucket, window_start, count) VALUES ($1, date_trunc('second', now()) - $2::interval, 1)`, [`${bucket}-${name}/1s`, age]);
    }
    await eventually(async () => (await rowsOf(`${bucket}-old`)).length === 0, 15_000, 'the ended windows to be pruned');
    expect((await rowsOf(bucket)).map((r) => r.bucket)).toEqual([`${bucket}-current/1s`, `${bucket}-recent90s/1s`]);
    const [job] = await t.sql<{ name: string }>(`SELECT name FROM agenda_jobs WHERE name = 'rate-limit-windows.prune'`);
    expect(job?.name).toBe('rate-limit-windows.prune');
  }, 30_000);

  it('a prune reads the ended windows through the window_start index, not the whole table', async () => {
    // 300 keys counting per second for the last 100 seconds (30,000 live rows), and 50 ended windows.
    await t.sql(
      `INSERT INTO rate_limit_windows (bucket, window_start, count)
       SELECT 'explain-' || k || '/1s', date_trunc('second', now()) - s * interval '1 second', 1
       FROM generate_series(1, 300) AS k, generate_series(0, 99) AS s`,
    );
    await t.sql(
      `INSERT INTO rate_limit_windows (bucket, window_start, count)
       SELECT 'explain-ended-' || k || '/1s', now() - interval '5 minutes', 1 FROM generate_series(1, 50) AS k`,
    );
    await t.sql('ANALYZE rate_limit_windows');
    const plan = (await t.sql<{ 'QUERY PLAN': string }>(`EXPLAIN ${PRUNE_RATE_LIMIT_WINDOWS_SQL.replace('?', '$1')}`, [RATE_LIMIT_WINDOW_RETENTION_MS]))
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan).toContain('rate_limit_windows_start_idx');
    expect(plan).not.toMatch(/Seq Scan/);
  });
});

describe('counting a hit', () => {
  it('writes no WAL: the counters are ephemeral and a count does not wait for a WAL flush', async () => {
    const bucket = `wal-${randomUUID()}/1s`;
    type Explained = { 'QUERY PLAN': { Plan: { 'WAL Records': number; 'WAL Bytes': number } }[] };
    const sql = COUNT_HITS_SQL.replace('?', '$1').replace('?', '$2').replace('?', '$3');
    // A new window (an insert) and the next hits of it (updates).
    for (let i = 0; i < 3; i += 1) {
      const [explained] = await t.sql<Explained>(`EXPLAIN (ANALYZE, WAL, FORMAT JSON) ${sql}`, [bucket, new Date(Math.floor(Date.now() / 1000) * 1000), 1]);
      const plan = explained!['QUERY PLAN'][0]!.Plan;
      expect([i, plan['WAL Records'], plan['WAL Bytes']]).toEqual([i, 0, 0]);
    }
    const [{ relpersistence }] = (await t.sql<{ relpersistence: string }>(`SELECT relpersistence FROM pg_class WHERE relname = 'rate_limit_windows'`)) as [{ relpersistence: string }];
    expect(relpersistence).toBe('u');
  });
});
