/**
 * Benchmark — POST /v1/payments against a slow provider. The cardpay simulator answers every request
 * after SANDBOX_LATENCY_MS (2 s, then 300 ms for comparison); 300 closed-loop clients, each with its own
 * Idempotency-Keys, for 20 s per latency. The database connections the test database has open are
 * sampled from pg_stat_activity all the while.
 *
 * What it shows: an idempotency claim is a lease, not a lock, so no pooled connection waits on the
 * provider — a slow provider lowers throughput only by Little's law (300 clients / latency), never by
 * pool exhaustion, and no answer is a 409. Goal: zero non-201 answers, and created/s at 2 s within 20 %
 * of created/s at 300 ms (when the machine, not the connections, is the limit).
 *
 *   npm run bench -- slow-provider   (BENCH_SLOW_CONCURRENCY=300 BENCH_SLOW_SECONDS=20 BENCH_SLOW_LATENCIES_MS=2000,300)
 */
import { randomUUID } from 'node:crypto';
import { knob, log, runIfMain, type Benchmark } from './lib/harness.js';
import { LoopbackClient, closedLoop, type HttpResponse } from './lib/http.js';
import { configureMerchant, createMerchant, createPayment } from './lib/merchant.js';
import { printTable, summarize, writeResult } from './lib/report.js';
import { readRoundTrips, roundTripsPerRequest } from './lib/round-trips.js';
import { startServiceProcess, watchRss } from './lib/service-process.js';
import { sampleConnections } from '../test/support/connection-sampler.js';

/** The ORM pool of the api process; Agenda's pool is min(8, this), the scheduling-lock pool 2, the simulators' min(10, this), the access-change listener 1. */
const POOL_MAX = 20;
const CONFIGURED_CONNECTIONS = POOL_MAX + Math.min(8, POOL_MAX) + 2 + Math.min(10, POOL_MAX) + 1;

/** Counted as created: 201 with the payment completed (a 201 still pending is reported on its own). */
const created = (res: HttpResponse) => res.status === 201 && res.body.includes('"status":"completed"');

export const slowProviderBenchmark: Benchmark = async (ctx) => {
  const concurrency = knob('BENCH_SLOW_CONCURRENCY', 300);
  const seconds = knob('BENCH_SLOW_SECONDS', 20);
  const latencies = (process.env.BENCH_SLOW_LATENCIES_MS ?? '2000,300').split(',').map((s) => Number(s.trim()));
  const runs = [];
  const peakRssKb: Record<string, number | null> = {};
  for (const latencyMs of latencies) {
    const db = await ctx.pg.createDatabase(`slow${latencyMs}`);
    const api = await startServiceProcess({
      role: 'api',
      databaseUrl: db.url,
      env: { SANDBOX_LATENCY_MS: String(latencyMs), DATABASE_POOL_MAX: String(POOL_MAX) },
    });
    try {
      await api.waitReady();
      const stopWatch = watchRss([api]);
      const merchant = await createMerchant(db.url, `Bench slow provider ${latencyMs} ms`);
      const client = new LoopbackClient(api.baseUrl, concurrency);
      await configureMerchant(client, merchant, null);
      const prefix = `slow-${latencyMs}-${randomUUID()}`;
      log(`slow provider ${latencyMs} ms: warm-up (${concurrency} requests)`);
      await closedLoop({ concurrency, maxRequests: concurrency, maxDurationMs: 60_000, isOk: created, send: (i) => createPayment(client, merchant, `${prefix}-warm-${i}`) });
      log(`slow provider ${latencyMs} ms: ${concurrency} concurrent clients for ${seconds} s`);
      const tripsBefore = await readRoundTrips(client);
      const sampler = sampleConnections(db.url, 50);
      const load = await closedLoop({
        concurrency,
        maxRequests: Number.MAX_SAFE_INTEGER,
        maxDurationMs: seconds * 1000,
        isOk: created,
        send: (i) => createPayment(client, merchant, `${prefix}-${i}`),
      });
      const connections = await sampler.stop();
      const roundTrips = roundTripsPerRequest(tripsBefore, await readRoundTrips(client), load.ok + load.failed);
      stopWatch();
      client.close();
      const latency = summarize(load.latenciesMs);
      const non201 = Object.entries(load.statuses).filter(([status]) => status !== '201').reduce((a, [, n]) => a + n, 0);
      runs.push({
        providerLatencyMs: latencyMs,
        statuses: load.statuses,
        created: load.ok,
        non201,
        // 201 with the payment still pending: the provider call outlived PROVIDER_TIMEOUT_MS (the status sync settles it).
        pendingAt201: load.failed - non201,
        createdPerSecond: load.requestsPerSecond,
        latency,
        peakConnections: connections.peak,
        peakActiveConnections: connections.peakActive,
        configuredConnections: CONFIGURED_CONNECTIONS,
        roundTripsPerRequest: roundTrips,
        failures: load.failures,
      });
      if (load.failures.length) process.stdout.write(`failures at ${latencyMs} ms (first ${load.failures.length}): ${load.failures.join(' | ')}\n`);
    } finally {
      peakRssKb[`api (${latencyMs} ms)`] = (await api.stop()).peakRssKb;
      await db.drop();
    }
  }

  const table = runs.map((r) => ({
    'provider latency': `${r.providerLatencyMs} ms`,
    statuses: Object.entries(r.statuses).map(([s, n]) => `${s}×${n}`).join(' '),
    'created/s': r.createdPerSecond.toFixed(1),
    // Little's law: closed-loop clients can create at most clients ÷ provider latency per second.
    'clients ÷ latency': (concurrency / (r.providerLatencyMs / 1000)).toFixed(0),
    '201 still pending': r.pendingAt201,
    'p50 ms': r.latency.p50,
    'p99 ms': r.latency.p99,
    'peak db connections (active)': `${r.peakConnections} (${r.peakActiveConnections}) of ${r.configuredConnections}`,
    'round trips service / simulator': `${r.roundTripsPerRequest.service} / ${r.roundTripsPerRequest.simulator}`,
  }));
  printTable(`Create payment against a slow provider — ${concurrency} concurrent clients, unique Idempotency-Keys, ${seconds} s each`, table);
  const slow = runs[0];
  const fast = runs[runs.length - 1];
  const ratio = slow && fast && fast.createdPerSecond > 0 ? slow.createdPerSecond / fast.createdPerSecond : null;
  const non201 = runs.reduce((a, r) => a + r.non201, 0);
  const goalMet = non201 === 0 && ratio !== null && ratio >= 0.8;
  process.stdout.write(
    `non-201 answers: ${non201}; created/s at ${slow?.providerLatencyMs} ms is ${ratio === null ? 'n/a' : `${(ratio * 100).toFixed(0)} %`} of ` +
      `created/s at ${fast?.providerLatencyMs} ms (goal: zero non-201 and at least 80 %: ${goalMet ? 'met' : 'not met'})\n`,
  );
  if (slow) {
    const ceiling = concurrency / (slow.providerLatencyMs / 1000);
    process.stdout.write(
      `at ${slow.providerLatencyMs} ms, ${concurrency} closed-loop clients cannot create more than ${ceiling.toFixed(0)}/s (clients ÷ latency); ` +
        `the service reached ${((slow.createdPerSecond / ceiling) * 100).toFixed(0)} % of that\n`,
    );
  }
  const result = {
    benchmark: 'slow-provider',
    at: new Date().toISOString(),
    machine: ctx.machine,
    parameters: { concurrency, seconds, latenciesMs: latencies, databasePoolMax: POOL_MAX, serviceRole: 'api', paymentMethod: 'pm_card_visa' },
    runs,
    slowOverFastCreatedPerSecond: ratio,
    goalMet,
  };
  return {
    name: 'slow-provider',
    headline: Object.fromEntries(runs.flatMap((r) => [
      [`created/s @${r.providerLatencyMs} ms`, r.createdPerSecond.toFixed(1)],
      [`non-201 @${r.providerLatencyMs} ms`, r.non201],
      [`peak conns @${r.providerLatencyMs} ms`, r.peakConnections],
    ])),
    resultFile: writeResult('slow-provider', result),
    peakRssKb,
  };
};

runIfMain(import.meta.url, slowProviderBenchmark);
