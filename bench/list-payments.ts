/**
 * Benchmark 4 — GET /v1/payments at 1,000,000 payments for one merchant: p50/p99 of the HTTP request
 * (one at a time, keep-alive, through a `ROLE=api` process) for several filter combinations, each with
 * its exact `total`. Then EXPLAIN ANALYZE of the very SQL `PaymentService.list` sends (captured from
 * the ORM), and — unless BENCH_LIST_COMPARE=0 — the same filters as the service ran them before the
 * list indexes and the deferred join (old indexes restored inside a transaction that is rolled back).
 *
 * Every request must answer 200, the measured ones included: one that does not stops the run (no headline).
 *
 *   npx tsx bench/list-payments.ts   (BENCH_LIST_ROWS=1000000 BENCH_LIST_SAMPLES=30)
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { ListPaymentsQuery } from '../contract/index.js';
import { captureListSql } from './lib/capture-list-sql.js';
import { knob, log, runIfMain, type Benchmark } from './lib/harness.js';
import { LoopbackClient, closedLoop } from './lib/http.js';
import { createMerchant } from './lib/merchant.js';
import { query } from './lib/postgres.js';
import { kib, printTable, summarize, writeResult, type LatencySummary } from './lib/report.js';
import { startServiceProcess, watchRss, type ServiceProcess } from './lib/service-process.js';
import { seedPayments, seededIdempotencyKey } from './seed-payments.js';

interface Case {
  name: string;
  params: Record<string, string>;
}

function cases(rows: number): Case[] {
  const day = 86_400_000;
  const now = Date.now();
  const deepPage = Math.max(1, Math.floor(rows / 2 / 100));
  return [
    { name: 'no filter', params: {} },
    { name: 'status=completed', params: { status: 'completed' } },
    { name: 'status=pending', params: { status: 'pending' } },
    { name: 'status=failed + provider=walletpay', params: { status: 'failed', provider: 'walletpay' } },
    { name: 'currency=EUR + amount 100..500', params: { currency: 'EUR', min_amount: '100', max_amount: '500' } },
    { name: 'since/until (7-day window)', params: { since: new Date(now - 30 * day).toISOString(), until: new Date(now - 23 * day).toISOString() } },
    { name: 'search=idempotency key', params: { search: seededIdempotencyKey(Math.ceil(rows / 3)) } },
    { name: `deep page (page ${deepPage} × 100)`, params: { page: String(deepPage), page_size: '100' } },
    { name: `status=completed, page ${Math.floor(deepPage / 2)} × 100`, params: { status: 'completed', page: String(Math.floor(deepPage / 2)), page_size: '100' } },
  ];
}

/** The query the service parses from these parameters (the contract's defaults filled in). */
function asListQuery(params: Record<string, string>): ListPaymentsQuery {
  return { ...params, page: Number(params.page ?? 1), page_size: Number(params.page_size ?? 50) } as ListPaymentsQuery;
}

async function explain(client: pg.Client, sql: string): Promise<{ ms: number; plan: string }> {
  const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`);
  const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
  const ms = Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN);
  return { ms, plan };
}

/** The form MikroORM's findAndCount produced before the deferred join, from the count's WHERE clause. */
function previousPageSql(countSql: string, q: ListPaymentsQuery): string {
  const where = countSql.slice(countSql.indexOf(' where ') + 1);
  const offset = (q.page - 1) * q.page_size;
  return `select "p0".* from "payments" as "p0" ${where} order by "p0"."created_at" desc, "p0"."id" desc limit ${q.page_size}${offset ? ` offset ${offset}` : ''}`;
}

const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : 'n/a');

export const listPaymentsBenchmark: Benchmark = async (ctx) => {
  const rows = knob('BENCH_LIST_ROWS', 1_000_000);
  const samples = knob('BENCH_LIST_SAMPLES', 30);
  const compare = process.env.BENCH_LIST_COMPARE !== '0';
  const db = await ctx.pg.createDatabase('list');
  const processes: ServiceProcess[] = [];
  try {
    log('benchmark 4: starting the service (ROLE=api)');
    const api = await startServiceProcess({ role: 'api', databaseUrl: db.url });
    processes.push(api);
    await api.waitReady();
    const stopWatch = watchRss(processes);
    const merchant = await createMerchant(db.url, 'Bench list');
    log(`seeding ${rows.toLocaleString('en')} payments (one INSERT … SELECT generate_series)`);
    const seeded = await seedPayments(db.url, merchant.merchantId, rows);
    log(`seeded in ${(seeded.ms / 1000).toFixed(1)} s; VACUUM ANALYZE payments`);
    const vacuumStart = performance.now();
    await query(db.url, 'VACUUM (ANALYZE) payments');
    const vacuumMs = performance.now() - vacuumStart;
    const [size] = await query<{ table: string; indexes: string }>(
      db.url,
      `SELECT pg_size_pretty(pg_table_size('payments')) AS table, pg_size_pretty(pg_indexes_size('payments')) AS indexes`,
    );

    const client = new LoopbackClient(api.baseUrl, 4);
    const list = cases(rows);
    const http: { name: string; params: Record<string, string>; latency: LatencySummary; total: number; returned: number }[] = [];
    for (const c of list) {
      const path = `/v1/payments?${new URLSearchParams(c.params).toString()}`;
      const get = () => client.request({ method: 'GET', path, headers: { 'x-api-key': merchant.apiKey } });
      const answered = (res: Awaited<ReturnType<typeof get>>) => {
        if (res.status !== 200) throw new Error(`${c.name}: ${res.status} ${res.body.slice(0, 300)}`);
        return res;
      };
      let last = answered(await get());
      answered(await get());
      const latencies: number[] = [];
      const deadline = performance.now() + 15_000;
      while (latencies.length < samples && performance.now() < deadline) {
        const t0 = performance.now();
        last = await get();
        latencies.push(performance.now() - t0);
        answered(last);
      }
      const body = JSON.parse(last.body) as { data: unknown[]; meta: { total: number } };
      http.push({ name: c.name, params: c.params, latency: summarize(latencies), total: body.meta.total, returned: body.data.length });
    }
    client.close();

    // The exact count is CPU work in PostgreSQL (parallel index-only scans): what concurrency does to it.
    const concurrency = knob('BENCH_LIST_CONCURRENCY', 8);
    const concurrentClient = new LoopbackClient(api.baseUrl, concurrency);
    const concurrent = await closedLoop({
      concurrency,
      maxRequests: 200,
      maxDurationMs: 10_000,
      send: () => concurrentClient.request({ method: 'GET', path: '/v1/payments', headers: { 'x-api-key': merchant.apiKey } }),
    });
    concurrentClient.close();
    if (concurrent.failed > 0) throw new Error(`no filter, ${concurrency} concurrent: ${concurrent.failed} of ${concurrent.ok + concurrent.failed} requests failed (${concurrent.failures.join(' | ')})`);
    stopWatch();
    const concurrentSummary = { concurrency, ...summarize(concurrent.latenciesMs), requestsPerSecond: concurrent.requestsPerSecond, failed: concurrent.failed };

    log('EXPLAIN ANALYZE of the SQL the service sends');
    const captured = await captureListSql(db.url, merchant.merchantId, list.map((c) => asListQuery(c.params)));
    const pgClient = new pg.Client({ connectionString: db.url });
    await pgClient.connect();
    const explained: { page: { sql: string; ms: number; plan: string }; count: { sql: string; ms: number; plan: string }; rowCount: { sql: string; ms: number; plan: string }; previousPage?: { sql: string; ms: number; plan: string }; previousCount?: { ms: number; plan: string } }[] = [];
    try {
      for (const sql of captured) {
        explained.push({
          page: { sql: sql.page, ...(await explain(pgClient, sql.page)) },
          count: { sql: sql.count, ...(await explain(pgClient, sql.count)) },
          rowCount: { sql: sql.rowCount, ...(await explain(pgClient, sql.rowCount)) },
        });
      }
      if (compare) {
        log('the same filters before the list indexes and the deferred join (rolled back afterwards)');
        await pgClient.query('BEGIN');
        try {
          await pgClient.query('CREATE INDEX payments_merchant_status_created_idx ON payments (merchant_id, status, created_at DESC)');
          await pgClient.query('DROP INDEX payments_merchant_status_created_id_idx, payments_merchant_currency_amount_idx, payments_merchant_provider_status_created_idx');
          for (const [i, c] of list.entries()) {
            const entry = explained[i]!;
            const sql = previousPageSql(entry.rowCount.sql, asListQuery(c.params));
            entry.previousPage = { sql, ...(await explain(pgClient, sql)) };
            entry.previousCount = await explain(pgClient, entry.rowCount.sql);
          }
        } finally {
          await pgClient.query('ROLLBACK');
        }
      }
    } finally {
      await pgClient.end();
    }
    const apiRss = (await api.stop()).peakRssKb;

    const table = http.map((h, i) => {
      const e = explained[i];
      const row: Record<string, string | number> = {
        filter: h.name,
        total: h.total,
        rows: h.returned,
        'HTTP p50 ms': h.latency.p50,
        'HTTP p99 ms': h.latency.p99,
        'page SQL ms': ms(e?.page.ms ?? NaN),
        'count SQL ms': ms(e?.count.ms ?? NaN),
        // count(*) of the rows for the same filter (what the total cost before the counters).
        'count(*) ms': ms(e?.rowCount.ms ?? NaN),
      };
      if (compare) {
        row['before: page ms'] = ms(e?.previousPage?.ms ?? NaN);
        row['before: count ms'] = ms(e?.previousCount?.ms ?? NaN);
      }
      return row;
    });
    printTable(`GET /v1/payments — ${rows.toLocaleString('en')} payments, one merchant, ${samples} sequential requests per filter (exact totals)`, table);
    process.stdout.write(`no filter, ${concurrency} concurrent: ${concurrent.requestsPerSecond.toFixed(1)} req/s, p50 ${concurrentSummary.p50} ms, p99 ${concurrentSummary.p99} ms (${concurrent.failed} failed)\n`);
    process.stdout.write(`payments table ${size?.table}, its indexes ${size?.indexes}; seed ${(seeded.ms / 1000).toFixed(1)} s; api peak RSS ${kib(apiRss)}\n`);

    const result = {
      benchmark: 'list-payments',
      at: new Date().toISOString(),
      machine: ctx.machine,
      parameters: { rows, samplesPerFilter: samples, concurrency: 1, compare },
      seed: { ms: seeded.ms, vacuumAnalyzeMs: vacuumMs, tableSize: size?.table, indexesSize: size?.indexes },
      cases: http.map((h, i) => ({ ...h, explain: explained[i] })),
      concurrentNoFilter: concurrentSummary,
      peakRssKb: { api: apiRss },
    };
    const worst = http.reduce((a, b) => (b.latency.p99 > a.latency.p99 ? b : a));
    return {
      name: 'list-payments',
      headline: {
        rows,
        'no filter p50/p99 ms': `${http[0]?.latency.p50} / ${http[0]?.latency.p99}`,
        'search p50 ms': http.find((h) => h.name.startsWith('search'))?.latency.p50 ?? 'n/a',
        'slowest p99': `${worst.name}: ${worst.latency.p99} ms`,
        [`no filter ×${concurrency} req/s`]: concurrent.requestsPerSecond.toFixed(1),
      },
      resultFile: writeResult('list-payments', result),
      peakRssKb: { api: apiRss },
    };
  } finally {
    for (const p of processes) await p.stop();
    await db.drop();
  }
};

runIfMain(import.meta.url, listPaymentsBenchmark);
