/**
 * Benchmark 3 — webhook deliveries per second from ONE worker process. With no worker running, a
 * `ROLE=api` process creates N completed cardpay payments (pm_card_visa): each commits its
 * `payment.completed` event and the delivery row (transactional outbox), whose NOTIFY no worker hears
 * yet. The api then stops, and one `ROLE=worker` process starts and drains the backlog (it looks for
 * due deliveries as its listener connects) to a local receiver that answers 200 at once.
 * Throughput is counted from the first delivery received to the last (the worker's boot is reported
 * separately), and checked against the database: every delivery row must end `delivered`. A check that
 * fails (a delivery missing or duplicated, a row not `delivered`) leaves no headline: the run exits non-zero.
 *
 * Load-independent facts next to the rate: the worker's PostgreSQL work per delivery (transactions —
 * every standalone statement is one — and rows written per table, boot included, read after the
 * worker exited so its statistics are published) and the receiver's own CPU time per delivery (it runs
 * in this process, which does nothing else while the worker drains), to show it is not the bottleneck.
 *
 * Then, with a fresh api and worker running, BENCH_LATENCY_PAYMENTS payments are created one at a time:
 * how long from the create request to the webhook's arrival (the first attempt starts from the NOTIFY
 * of the commit), next to the create request's own answer time.
 *
 *   npx tsx bench/webhook-throughput.ts   (BENCH_DELIVERIES=1000 BENCH_LATENCY_PAYMENTS=50; BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=…' to profile)
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { failOnProblems, knob, log, runIfMain, type Benchmark } from './lib/harness.js';
import { LoopbackClient, closedLoop } from './lib/http.js';
import { configureMerchant, createMerchant, createPayment, type BenchMerchant } from './lib/merchant.js';
import { query } from './lib/postgres.js';
import { WebhookReceiver } from './lib/receiver.js';
import { kib, printTable, summarize, writeResult } from './lib/report.js';
import { startServiceProcess, watchRss, type ServiceProcess } from './lib/service-process.js';

/** Database-wide counters of the bench database: transactions, and rows written per table. */
async function databaseWork(url: string, name: string) {
  const [db] = await query<{ c: string }>(url, 'SELECT xact_commit + xact_rollback AS c FROM pg_stat_database WHERE datname = $1', [name]);
  const tables = await query<{ relname: string; ins: string; upd: string; del: string }>(
    url,
    `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_del AS del FROM pg_stat_user_tables
      WHERE relname IN ('webhook_deliveries', 'delivery_attempts', 'agenda_jobs', 'merchants', 'events')`,
  );
  return { transactions: Number(db?.c), tables: Object.fromEntries(tables.map((t) => [t.relname, { ins: Number(t.ins), upd: Number(t.upd), del: Number(t.del) }])) };
}

/** One payment at a time through a running api and worker: create request → 201, and → webhook received. */
async function firstAttemptLatency(client: LoopbackClient, merchant: BenchMerchant, receiver: WebhookReceiver, count: number) {
  const toAnswer: number[] = [];
  const toWebhook: number[] = [];
  for (let i = 0; i < count; i += 1) {
    const started = performance.now();
    const res = await createPayment(client, merchant, `latency-${randomUUID()}`);
    toAnswer.push(performance.now() - started);
    const paymentId = (JSON.parse(res.body) as { data?: { id?: string } }).data?.id;
    if (res.status !== 201 || !paymentId) throw new Error(`create failed: ${res.status} ${res.body.slice(0, 200)}`);
    const deadline = performance.now() + 10_000;
    while (!receiver.byPaymentId.has(paymentId) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    const receipt = receiver.byPaymentId.get(paymentId);
    if (!receipt) throw new Error(`the webhook of payment ${paymentId} did not arrive within 10 s`);
    toWebhook.push(receipt.at - started);
  }
  return { toAnswer: summarize(toAnswer), toWebhook: summarize(toWebhook) };
}

export const webhookThroughputBenchmark: Benchmark = async (ctx) => {
  const deliveries = knob('BENCH_DELIVERIES', 1000);
  const latencyPayments = knob('BENCH_LATENCY_PAYMENTS', 50);
  const concurrency = knob('BENCH_CONCURRENCY', 50);
  const db = await ctx.pg.createDatabase('delivery');
  const receiver = await new WebhookReceiver().start();
  const processes: ServiceProcess[] = [];
  try {
    log('benchmark 3: starting the service (ROLE=api only)');
    const api = await startServiceProcess({ role: 'api', databaseUrl: db.url });
    processes.push(api);
    await api.waitReady();
    const merchant = await createMerchant(db.url, 'Bench deliveries');
    const client = new LoopbackClient(api.baseUrl, concurrency);
    await configureMerchant(client, merchant, receiver.url);

    log(`creating ${deliveries} completed payments with no worker running`);
    const prefix = `wh-${randomUUID()}`;
    const creation = await closedLoop({
      concurrency,
      maxRequests: deliveries,
      maxDurationMs: 300_000,
      isOk: (res) => res.status === 201 && res.body.includes('"status":"completed"'),
      send: (i) => createPayment(client, merchant, `${prefix}-${i}`),
    });
    client.close();
    if (creation.failed > 0) throw new Error(`could not create the payments: ${creation.failures.join(' | ')}`);
    const [queued] = await query<{ deliveries: string; jobs: string }>(
      db.url,
      `SELECT (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending') AS deliveries,
              (SELECT count(*) FROM agenda_jobs WHERE name = 'webhook.deliver') AS jobs`,
    );
    const pendingRows = Number(queued?.deliveries);
    const apiRss = (await api.stop()).peakRssKb;
    log(`${pendingRows} deliveries pending, ${queued?.jobs} delivery jobs queued; api stopped; starting one worker`);

    const before = await databaseWork(db.url, db.name);
    const spawnedAt = performance.now();
    const worker = await startServiceProcess({ role: 'worker', databaseUrl: db.url });
    processes.push(worker);
    const stopWatch = watchRss(processes);
    const receiverCpuBefore = process.cpuUsage();
    const connectionsBefore = receiver.connections;
    const allArrived = await receiver.waitForDistinct(pendingRows, 180_000);
    const receiverCpu = process.cpuUsage(receiverCpuBefore);
    const workerConnections = receiver.connections - connectionsBefore;
    stopWatch();
    const receipts = [...receiver.byWebhookId.values()].map((r) => r.at).sort((a, b) => a - b);
    // Counted now: the latency phase below adds deliveries of its own.
    const duplicates = receiver.receipts.length - receipts.length;
    const first = receipts[0] ?? NaN;
    const last = receipts.at(-1) ?? NaN;
    // Let the worker record the last attempts before counting rows.
    let delivered = 0;
    for (let i = 0; i < 50; i += 1) {
      const [row] = await query<{ n: string }>(db.url, `SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'delivered'`);
      delivered = Number(row?.n);
      if (delivered >= pendingRows) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const workerRss = (await worker.stop()).peakRssKb;
    const after = await databaseWork(db.url, db.name);
    const problems: string[] = [];
    if (pendingRows < creation.ok) problems.push(`${pendingRows} pending deliveries for ${creation.ok} completed payments`);
    if (!allArrived) problems.push(`${receipts.length} of ${pendingRows} deliveries arrived within 180 s`);
    if (delivered < pendingRows) problems.push(`${delivered} of ${pendingRows} delivery rows delivered`);
    if (duplicates > 0) problems.push(`${duplicates} duplicate deliveries`);
    // What the run measured, written as it is when a check fails and as the head of the full result.
    const counted = {
      benchmark: 'webhook-throughput',
      at: new Date().toISOString(),
      machine: ctx.machine,
      parameters: { deliveries: pendingRows, workers: 1, creationConcurrency: concurrency },
      received: receipts.length,
      duplicates,
      deliveredRows: delivered,
    };
    failOnProblems('webhook-throughput', problems, counted);

    log(`first-attempt latency: ${latencyPayments} payments one at a time, with an api and a worker running`);
    const [api2, worker2] = await Promise.all([
      startServiceProcess({ role: 'api', databaseUrl: db.url }),
      startServiceProcess({ role: 'worker', databaseUrl: db.url }),
    ]);
    processes.push(api2, worker2);
    await api2.waitReady();
    const latencyClient = new LoopbackClient(api2.baseUrl, 1);
    // A few first, unmeasured: connections and JIT warm up.
    await firstAttemptLatency(latencyClient, merchant, receiver, 5);
    const latency = await firstAttemptLatency(latencyClient, merchant, receiver, latencyPayments);
    latencyClient.close();

    const steadyPerSecond = receipts.length > 1 ? ((receipts.length - 1) / (last - first)) * 1000 : NaN;
    const overallPerSecond = (receipts.length / (last - spawnedAt)) * 1000;
    const per = (n: number) => Math.round((n / Math.max(1, pendingRows)) * 100) / 100;
    const rowsPerDelivery = Object.fromEntries(
      Object.entries(after.tables).map(([table, t]) => {
        const b = before.tables[table] ?? { ins: 0, upd: 0, del: 0 };
        return [table, { inserted: per(t.ins - b.ins), updated: per(t.upd - b.upd), deleted: per(t.del - b.del) }];
      }),
    );
    const transactionsPerDelivery = per(after.transactions - before.transactions);
    // The receiver's CPU (user + system) while the worker drained, per delivery and as a share of one core.
    const receiverCpuMs = (receiverCpu.user + receiverCpu.system) / 1000;
    const receiverCoreShare = receiverCpuMs / (last - spawnedAt);
    printTable(`Webhook delivery — one worker process, ${pendingRows} queued deliveries, local receiver`, [
      {
        received: receipts.length,
        'delivered rows': delivered,
        duplicates,
        'deliveries/s (first→last)': steadyPerSecond.toFixed(0),
        'deliveries/s (incl. worker boot)': overallPerSecond.toFixed(0),
        'worker boot → first ms': (first - spawnedAt).toFixed(0),
        'worker peak RSS': kib(workerRss),
      },
    ]);
    printTable('Work per delivery — PostgreSQL (worker, boot included) and the receiver', [
      {
        'transactions/delivery': transactionsPerDelivery,
        ...Object.fromEntries(Object.entries(rowsPerDelivery).map(([table, r]) => [`${table} ins/upd/del`, `${r.inserted}/${r.updated}/${r.deleted}`])),
        'connections to the receiver': workerConnections,
        'receiver CPU ms/delivery': (receiverCpuMs / Math.max(1, receipts.length)).toFixed(3),
        'receiver share of a core': `${(receiverCoreShare * 100).toFixed(0)} %`,
      },
    ]);
    printTable(`First attempt — ${latencyPayments} payments one at a time, api and worker running (ms from the create request)`, [
      { measure: 'create answered (201)', ...pick(latency.toAnswer) },
      { measure: 'webhook received', ...pick(latency.toWebhook) },
    ]);

    const result = {
      ...counted,
      at: new Date().toISOString(),
      deliveriesPerSecondFirstToLast: steadyPerSecond,
      deliveriesPerSecondIncludingBoot: overallPerSecond,
      workerBootToFirstMs: first - spawnedAt,
      drainMs: last - first,
      transactionsPerDelivery,
      rowsPerDelivery,
      receiver: { cpuMsPerDelivery: receiverCpuMs / Math.max(1, receipts.length), shareOfOneCore: receiverCoreShare },
      workerConnectionsToReceiver: workerConnections,
      firstAttemptLatencyMs: latency,
      peakRssKb: { worker: workerRss, api: apiRss },
    };
    return {
      name: 'webhook-throughput',
      headline: {
        deliveries: receipts.length,
        'deliveries/s': Math.round(steadyPerSecond),
        'incl. boot /s': Math.round(overallPerSecond),
        'create → webhook p50 ms': latency.toWebhook.p50,
      },
      resultFile: writeResult('webhook-throughput', result),
      peakRssKb: { worker: workerRss, api: apiRss },
    };
  } finally {
    for (const p of processes) await p.stop();
    await receiver.stop();
    await db.drop();
  }
};

function pick(s: ReturnType<typeof summarize>) {
  return { 'p50 ms': s.p50, 'p90 ms': s.p90, 'p99 ms': s.p99, 'max ms': s.max };
}

runIfMain(import.meta.url, webhookThroughputBenchmark);
