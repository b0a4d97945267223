/**
 * Benchmark 1 — POST /v1/payments (cardpay through the built-in simulator, pm_card_visa, a unique
 * Idempotency-Key each) against a bare Express + pg handler that inserts one row, both measured in the
 * same run, on the same PostgreSQL server, at the same concurrency.
 *
 * The service runs as one `ROLE=api` process with the merchant's webhook URL registered, so every
 * request does the whole write path (key lookup, credential decryption, the idempotency claim with the pending row,
 * the provider's HTTP call to the simulator — which is served by the same process and writes its own
 * rows —, the completing transition, the outbox event + delivery row, whose commit is followed by a NOTIFY to the workers). No worker runs:
 * sending the webhooks is benchmark 3. But the worker's fold of the count changes each create appends (three
 * rows into payment_count_changes) is the create's work: after each service round the benchmark runs that
 * fold (and its VACUUM) as the job does, inside the round's time and CPU — every 2 s, more often than the
 * job's 5 s, so if anything it costs the service more. The api counts every request against its key as
 * production does (service-process.ts).
 *
 * No headline when a check fails (failed requests on either side, fewer completed payments or deliveries than
 * ok answers): the run exits non-zero with the reasons in its JSON.
 *
 * Both sides are measured warm and for the same time: 3,000 warm-up requests each, then 8 s each, in
 * rounds that take turns (2 s of the service, 2 s of the bare insert, four times), so both see the
 * machine as it is during the same 16 s. A shared 2-vCPU machine's speed drifts by 10–20 % from one
 * minute to the next: measured one after the other (8 s, then 8 s), identical code read 11.3–15.6 % in
 * one afternoon. With 200 warm-up requests and 2,000 measured (the defaults until 2026-11-26), the bare
 * insert's measured second was still warming up (1,637–2,043 req/s, against ~3,200 warm) and the
 * service's JIT was too (api CPU per create 2.2 ms, 1.6 ms warm): the ratio read ~20 % instead of ~14 %.
 *
 *   npx tsx bench/create-payment.ts   (BENCH_CONCURRENCY=50 BENCH_WARMUP_REQUESTS=3000 BENCH_CREATE_SECONDS=8 BENCH_CREATE_ROUNDS=4 BENCH_CREATE_REQUESTS=100000)
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { postgresCpuMs, processCpuMs } from './lib/cpu-time.js';
import { failOnProblems, knob, log, runIfMain, type Benchmark } from './lib/harness.js';
import { LoopbackClient, closedLoop, type HttpResponse, type LoadResult } from './lib/http.js';
import { configureMerchant, createMerchant, createPayment } from './lib/merchant.js';
import { query } from './lib/postgres.js';
import { WebhookReceiver } from './lib/receiver.js';
import { kib, printTable, summarize, writeResult } from './lib/report.js';
import { SINCE_BOOT, readRoundTrips, roundTripsPerRequest } from './lib/round-trips.js';
import { startServiceProcess, watchRss, type ServiceProcess } from './lib/service-process.js';

/**
 * What the requests cost PostgreSQL, per request: transactions (every standalone statement is one) and
 * rows written to each table, read after the process stopped (a backend publishes its statistics when
 * it exits; before that they can lag by up to 10 s). Boot and migrations add a few dozen transactions.
 */
async function workPerRequest(url: string, name: string, requests: number) {
  const [db] = await query<{ c: string }>(url, 'SELECT xact_commit AS c FROM pg_stat_database WHERE datname = $1', [name]);
  const tables = await query<{ relname: string; ins: string; upd: string; hot: string }>(
    url,
    `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables
      WHERE relname <> 'mikro_orm_migrations' AND n_tup_ins + n_tup_upd > 0 ORDER BY relname`,
  );
  const per = (n: number) => Math.round((n / requests) * 10) / 10;
  // hotUpdated: updates that wrote no index entry (heap-only tuples).
  const byTable = Object.fromEntries(tables.map((t) => [t.relname, { inserted: per(Number(t.ins)), updated: per(Number(t.upd)), hotUpdated: per(Number(t.hot)) }]));
  return {
    transactions: per(Number(db?.c)),
    rowsInserted: per(tables.reduce((a, t) => a + Number(t.ins), 0)),
    rowsUpdated: per(tables.reduce((a, t) => a + Number(t.upd), 0)),
    byTable,
  };
}

/** Rounds of one side, as one measurement: every request of every round, over the rounds' summed time. */
function combined(rounds: LoadResult[]): LoadResult {
  const ok = rounds.reduce((a, r) => a + r.ok, 0);
  const elapsedMs = rounds.reduce((a, r) => a + r.elapsedMs, 0);
  const statuses: Record<string, number> = {};
  for (const r of rounds) for (const [k, n] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + n;
  return {
    latenciesMs: rounds.flatMap((r) => r.latenciesMs),
    ok,
    failed: rounds.reduce((a, r) => a + r.failed, 0),
    statuses,
    elapsedMs,
    requestsPerSecond: ok / (elapsedMs / 1000),
    failures: rounds.flatMap((r) => r.failures).slice(0, 5),
  };
}

/** The statements of the worker's fold job (foldPaymentCountChanges in server/domain/payments/payment-counts.ts). */
const FOLD_STATEMENTS = ['SELECT fold_payment_count_changes()', 'VACUUM payment_count_changes'];

const completed = (res: HttpResponse) => res.status === 201 && res.body.includes('"status":"completed"');

function row(name: string, r: LoadResult) {
  const s = summarize(r.latenciesMs);
  return { target: name, requests: r.ok + r.failed, ok: r.ok, failed: r.failed, 'req/s': r.requestsPerSecond.toFixed(0), 'p50 ms': s.p50, 'p90 ms': s.p90, 'p99 ms': s.p99, 'max ms': s.max };
}

export const createPaymentBenchmark: Benchmark = async (ctx) => {
  const concurrency = knob('BENCH_CONCURRENCY', 50);
  const maxRequests = knob('BENCH_CREATE_REQUESTS', 100_000);
  const maxMs = knob('BENCH_CREATE_SECONDS', 8) * 1000;
  const rounds = knob('BENCH_CREATE_ROUNDS', 4);
  const warmup = knob('BENCH_WARMUP_REQUESTS', 3000);
  const single = knob('BENCH_SINGLE_REQUESTS', 300);
  const db = await ctx.pg.createDatabase('create');
  // Same server, its own database: each side's statistics are its own.
  const baseDb = await ctx.pg.createDatabase('baseline');
  const receiver = await new WebhookReceiver().start();
  const processes: ServiceProcess[] = [];
  try {
    log('benchmark 1: starting the service (ROLE=api) and the baseline');
    const api = await startServiceProcess({ role: 'api', databaseUrl: db.url });
    processes.push(api);
    await api.waitReady();
    const apiRssAfterBoot = api.rssKb();
    const baseline = await startServiceProcess({ role: 'baseline', databaseUrl: baseDb.url });
    processes.push(baseline);
    await baseline.waitReady();
    const stopWatch = watchRss(processes);

    const merchant = await createMerchant(db.url, 'Bench create-payment');
    const client = new LoopbackClient(api.baseUrl, concurrency);
    const baseClient = new LoopbackClient(baseline.baseUrl, concurrency);
    await configureMerchant(client, merchant, receiver.url);

    const run = (c: LoopbackClient, kind: 'service' | 'baseline', n: number, ms: number, inFlight = concurrency) => {
      const prefix = `${kind}-${randomUUID()}`;
      const body = JSON.stringify({ amount: '25.00', currency: 'USD' });
      return closedLoop({
        concurrency: inFlight,
        maxRequests: n,
        maxDurationMs: ms,
        isOk: kind === 'service' ? completed : (res) => res.status === 201,
        send: (i) =>
          kind === 'service'
            ? createPayment(c, merchant, `${prefix}-${i}`)
            : c.request({ method: 'POST', path: '/payments', headers: { 'idempotency-key': `${prefix}-${i}` }, body }),
      });
    };

    log(`warm-up: ${warmup} requests each`);
    const serviceWarm = await run(client, 'service', warmup, 30_000);
    const bareWarm = await run(baseClient, 'baseline', warmup, 30_000);
    // The worker's fold, on a connection of its own as the worker's job pool would be; the warm-up's changes
    // are folded before measuring so the first round folds only its own.
    const folder = new pg.Client({ connectionString: db.url });
    await folder.connect();
    let foldStatements = 0;
    const fold = async () => {
      for (const sql of FOLD_STATEMENTS) await folder.query(sql);
      foldStatements += FOLD_STATEMENTS.length;
    };
    await fold();
    // CPU time per request of the process answering and of the PostgreSQL server (all its processes), over
    // the concurrent phase: what a request costs the machine, whatever else the machine is doing meanwhile.
    const serverCpu = await postgresCpuMs(db.url);
    const spent = { service: { processMs: 0, postgresMs: 0 }, baseline: { processMs: 0, postgresMs: 0 } };
    const measure = async (kind: 'service' | 'baseline', pid: number, phase: () => Promise<LoadResult>) => {
      const [process0, pg0] = [processCpuMs(pid), serverCpu?.() ?? 0];
      const result = await phase();
      spent[kind].processMs += processCpuMs(pid) - process0;
      spent[kind].postgresMs += (serverCpu?.() ?? 0) - pg0;
      return result;
    };
    const perRequest = (kind: 'service' | 'baseline', result: LoadResult) => {
      const per = (ms: number) => Math.round((ms / Math.max(result.ok + result.failed, 1)) * 100) / 100;
      return { processMs: per(spent[kind].processMs), postgresMs: serverCpu ? per(spent[kind].postgresMs) : null };
    };
    log(`measuring: ${rounds} rounds of ${maxMs / rounds / 1000} s of the service, then of the baseline (at most ${maxRequests} requests each), ${concurrency} concurrent`);
    const tripsBefore = await readRoundTrips(client);
    const serviceRounds: LoadResult[] = [];
    const bareRounds: LoadResult[] = [];
    const serviceRound = async () => {
      const r = await run(client, 'service', Math.ceil(maxRequests / rounds), maxMs / rounds);
      const t0 = performance.now();
      await fold();
      const elapsedMs = r.elapsedMs + (performance.now() - t0);
      return { ...r, elapsedMs, requestsPerSecond: (r.ok / elapsedMs) * 1000 };
    };
    for (let i = 0; i < rounds; i++) {
      serviceRounds.push(await measure('service', api.pid, serviceRound));
      bareRounds.push(await measure('baseline', baseline.pid, () => run(baseClient, 'baseline', Math.ceil(maxRequests / rounds), maxMs / rounds)));
    }
    const service = combined(serviceRounds);
    const bare = combined(bareRounds);
    const serviceCpu = perRequest('service', service);
    const bareCpu = perRequest('baseline', bare);
    const roundTrips = roundTripsPerRequest(tripsBefore, await readRoundTrips(client), service.ok + service.failed, foldStatements - FOLD_STATEMENTS.length);
    // Service over bare insert in each round: how far the machine's drift moved the ratio.
    const roundRatios = serviceRounds.map((r, i) => r.requestsPerSecond / bareRounds[i]!.requestsPerSecond);
    log(`one at a time: ${single} requests each`);
    const serviceOne = await run(client, 'service', single, maxMs, 1);
    const bareOne = await run(baseClient, 'baseline', single, maxMs, 1);
    // Boot to stop, the span PostgreSQL's transaction count covers (below): the same requests on both.
    const allRequests = (...rs: LoadResult[]) => rs.reduce((a, r) => a + r.ok + r.failed, 0);
    const roundTripsLife = roundTripsPerRequest(SINCE_BOOT, await readRoundTrips(client), allRequests(serviceWarm, service, serviceOne), foldStatements);
    await folder.end();
    stopWatch();
    client.close();
    baseClient.close();

    // The rows are really there: every ok response is a completed payment with its outbox delivery.
    const [counts] = await query<{ completed: string; deliveries: string }>(
      db.url,
      `SELECT (SELECT count(*) FROM payments WHERE status = 'completed') AS completed, (SELECT count(*) FROM webhook_deliveries) AS deliveries`,
    );
    const problems: string[] = [];
    const okAnswers = serviceWarm.ok + service.ok + serviceOne.ok;
    for (const [what, r] of Object.entries({ 'service warm-up': serviceWarm, service, 'service one at a time': serviceOne, 'baseline warm-up': bareWarm, baseline: bare, 'baseline one at a time': bareOne })) {
      if (r.failed > 0) problems.push(`${what}: ${r.failed} of ${r.ok + r.failed} requests failed (${r.failures.join(' | ')})`);
    }
    if (Number(counts?.completed) !== okAnswers) problems.push(`${counts?.completed} completed payments in the database for ${okAnswers} completed answers`);
    if (Number(counts?.deliveries) < okAnswers) problems.push(`${counts?.deliveries} webhook deliveries for ${okAnswers} completed payments`);

    failOnProblems('create-payment', problems, {
      benchmark: 'create-payment',
      at: new Date().toISOString(),
      machine: ctx.machine,
      statuses: { service: service.statuses, baseline: bare.statuses, serviceOneAtATime: serviceOne.statuses, baselineOneAtATime: bareOne.statuses },
      database: { completedPayments: Number(counts?.completed), deliveryRows: Number(counts?.deliveries), okAnswers },
    });

    const apiRss = (await api.stop()).peakRssKb;
    const baseRss = (await baseline.stop()).peakRssKb;
    await new Promise((r) => setTimeout(r, 1000));
    const work = {
      service: await workPerRequest(db.url, db.name, allRequests(serviceWarm, service, serviceOne)),
      baseline: await workPerRequest(baseDb.url, baseDb.name, allRequests(bareWarm, bare, bareOne)),
    };
    const table = [
      row('service POST /v1/payments', service),
      row('bare express + pg INSERT', bare),
      row('service, one at a time', serviceOne),
      row('bare, one at a time', bareOne),
    ];
    printTable(`Create payment — ${concurrency} concurrent, then one at a time; unique Idempotency-Keys (cardpay simulator, pm_card_visa)`, table);
    const ratio = bare.requestsPerSecond / service.requestsPerSecond;
    const s = summarize(service.latenciesMs);
    const b = summarize(bare.latenciesMs);
    const s1 = summarize(serviceOne.latenciesMs);
    const b1 = summarize(bareOne.latenciesMs);
    const percent = (r: number) => `${(r * 100).toFixed(1)} %`;
    process.stdout.write(`throughput ratio bare/service: ${ratio.toFixed(1)}x (service ${percent(1 / ratio)} of the bare insert; rounds ${roundRatios.map(percent).join(', ')}); p50 ${s.p50} vs ${b.p50} ms (${(s.p50 / b.p50).toFixed(1)}x)\n`);
    process.stdout.write(`per request in PostgreSQL (every standalone statement is a transaction): service ${work.service.transactions} transactions, ${work.service.rowsInserted} rows inserted, ${work.service.rowsUpdated} updated; baseline ${work.baseline.transactions} / ${work.baseline.rowsInserted} / ${work.baseline.rowsUpdated}\n`);
    const cpuCell = (c: typeof serviceCpu) => `${c.processMs} ms + PostgreSQL ${c.postgresMs ?? 'n/a (server not on this machine)'} ms`;
    process.stdout.write(`CPU per request in the ${concurrency}-concurrent phase (process + PostgreSQL server): service ${cpuCell(serviceCpu)}; baseline ${cpuCell(bareCpu)}\n`);
    const tripsCell = (t: typeof roundTrips) => `${t.service} (ORM ${t.serviceOrm} + jobs ${t.serviceJobs} + listener ${t.serviceListener} + fold ${t.serviceExtra})`;
    printTable('PostgreSQL work per create (round trips by pool, the fold\'s statements counted for the service; transactions and rows: service and simulator together, boot to stop)', [{
      'service round trips, measured run': tripsCell(roundTrips),
      'service round trips, boot to stop': tripsCell(roundTripsLife),
      'simulator round trips, measured / boot to stop': `${roundTrips.simulator} / ${roundTripsLife.simulator}`,
      transactions: work.service.transactions,
      'rows inserted': work.service.rowsInserted,
      'rows updated': work.service.rowsUpdated,
    }]);
    // Every transaction is at least one round trip: more transactions than round trips over the same span means
    // some statements reach PostgreSQL without being counted (another pool, autovacuum, the bench's own SQL).
    const tripsLife = Math.round((roundTripsLife.service + roundTripsLife.simulator) * 100) / 100;
    if (work.service.transactions > tripsLife) {
      process.stdout.write(`WARNING: ${work.service.transactions} transactions per create but ${tripsLife} counted round trips over the same requests (boot to stop): some statements are not counted as round trips\n`);
    }
    // VmHWM: the kernel's own high-water mark over the process's life, so it includes the warm-up and the whole load.
    process.stdout.write(`peak RSS (VmHWM, boot to stop, ${concurrency}-concurrent load included): service api ${kib(apiRss)} (${kib(apiRssAfterBoot)} after boot) started as \`${api.command}\`; baseline ${kib(baseRss)}\n`);
    if (service.failures.length) process.stdout.write(`service failures (first ${service.failures.length}): ${service.failures.join(' | ')}\n`);

    const result = {
      benchmark: 'create-payment',
      at: new Date().toISOString(),
      machine: ctx.machine,
      parameters: { concurrency, single, maxRequests, maxSeconds: maxMs / 1000, rounds, warmup, serviceRole: 'api', paymentMethod: 'pm_card_visa', apiCommand: api.command, baselineCommand: baseline.command },
      service: { ...summarize(service.latenciesMs), ok: service.ok, failed: service.failed, statuses: service.statuses, requestsPerSecond: service.requestsPerSecond, elapsedMs: service.elapsedMs, failures: service.failures },
      baseline: { ...summarize(bare.latenciesMs), ok: bare.ok, failed: bare.failed, statuses: bare.statuses, requestsPerSecond: bare.requestsPerSecond, elapsedMs: bare.elapsedMs },
      oneAtATime: { service: { ...s1, ok: serviceOne.ok, failed: serviceOne.failed }, baseline: { ...b1, ok: bareOne.ok, failed: bareOne.failed } },
      cpuPerRequestMs: { service: serviceCpu, baseline: bareCpu },
      ratio: { throughputBareOverService: ratio, serviceOverBareByRound: roundRatios, p50ServiceOverBare: s.p50 / b.p50, p99ServiceOverBare: s.p99 / b.p99 },
      database: { completedPayments: Number(counts?.completed), deliveryRows: Number(counts?.deliveries), perRequest: work, roundTripsPerRequest: roundTrips, roundTripsPerRequestBootToStop: roundTripsLife, foldStatements },
      peakRssKb: { api: apiRss, baseline: baseRss },
      apiRssAfterBootKb: apiRssAfterBoot,
    };
    return {
      name: 'create-payment',
      headline: {
        'service req/s': Math.round(service.requestsPerSecond),
        'service p50/p99 ms': `${s.p50} / ${s.p99}`,
        'bare req/s': Math.round(bare.requestsPerSecond),
        'bare p50/p99 ms': `${b.p50} / ${b.p99}`,
        'bare/service': `${ratio.toFixed(1)}x (service ${percent(1 / ratio)})`,
        'one at a time p50 service / bare ms': `${s1.p50} / ${b1.p50}`,
        'round trips service / simulator': `${roundTrips.service} / ${roundTrips.simulator}`,
        'boot to stop: transactions / round trips': `${work.service.transactions} / ${tripsLife}`,
        'CPU ms per create, api / PostgreSQL': `${serviceCpu.processMs} / ${serviceCpu.postgresMs ?? 'n/a'}`,
      },
      resultFile: writeResult('create-payment', result),
      peakRssKb: { api: apiRss, baseline: baseRss },
    };
  } finally {
    for (const p of processes) await p.stop();
    await receiver.stop();
    await db.drop();
    await baseDb.drop();
  }
};

runIfMain(import.meta.url, createPaymentBenchmark);
