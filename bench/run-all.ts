/**
 * `npm run bench`: every benchmark in turn on one PostgreSQL server (embedded, fresh, unless
 * BENCH_DATABASE_URL / DATABASE_URL is set), each in its own fresh database with its own service
 * processes. Prints each benchmark's table, then a summary with the peak RSS of every service process,
 * and writes bench/results/<name>-<timestamp>.json per benchmark plus summary-<timestamp>.json.
 *
 *   npm run bench                          # all five
 *   npm run bench -- list-payments         # a subset, by name
 */
import os from 'node:os';
import { callbackLatencyBenchmark } from './callback-latency.js';
import { createPaymentBenchmark } from './create-payment.js';
import { log, withContext, type Benchmark, type BenchOutcome } from './lib/harness.js';
import { kib, printTable, writeResult } from './lib/report.js';
import { listPaymentsBenchmark } from './list-payments.js';
import { slowProviderBenchmark } from './slow-provider.js';
import { webhookThroughputBenchmark } from './webhook-throughput.js';

const ALL: Record<string, Benchmark> = {
  'create-payment': createPaymentBenchmark,
  'callback-latency': callbackLatencyBenchmark,
  'webhook-throughput': webhookThroughputBenchmark,
  'list-payments': listPaymentsBenchmark,
  'slow-provider': slowProviderBenchmark,
};

async function main() {
  const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const unknown = wanted.filter((w) => !(w in ALL));
  if (unknown.length) throw new Error(`unknown benchmark(s): ${unknown.join(', ')}; known: ${Object.keys(ALL).join(', ')}`);
  const names = wanted.length ? wanted : Object.keys(ALL);
  const started = Date.now();
  const loadBefore = os.loadavg();
  await withContext(async (ctx) => {
    if (loadBefore[0]! > ctx.machine.nproc * 0.5) {
      log(`note: load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')} on ${ctx.machine.nproc} CPUs — other work is running; numbers will be lower and noisier`);
    }
    const outcomes: BenchOutcome[] = [];
    for (const name of names) {
      const t0 = Date.now();
      outcomes.push(await ALL[name]!(ctx));
      log(`${name} finished in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    }
    process.stdout.write('\n==================== summary ====================\n');
    for (const o of outcomes) printTable(o.name, [o.headline]);
    printTable(
      'Peak RSS (VmHWM) of the service processes',
      outcomes.flatMap((o) => Object.entries(o.peakRssKb).map(([process, kb]) => ({ benchmark: o.name, process, 'peak RSS': kib(kb) }))),
    );
    const totalSeconds = (Date.now() - started) / 1000;
    process.stdout.write(`\ntotal ${totalSeconds.toFixed(0)} s; load average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
    writeResult('summary', {
      at: new Date().toISOString(),
      machine: ctx.machine,
      totalSeconds,
      loadAverageBefore: loadBefore,
      loadAverageAfter: os.loadavg(),
      benchmarks: outcomes,
    });
  });
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    process.stderr.write(`bench failed: ${err.stack ?? err.message}\n`);
    process.exit(1);
  },
);
