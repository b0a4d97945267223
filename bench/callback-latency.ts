/**
 * Benchmark 2 — provider callback → merchant webhook received. Creates pending 3DS payments
 * (pm_card_threeDSecureRequired), then POSTs a signed cardpay `payment_intent.succeeded` callback for
 * each to /v1/webhooks/cardpay at a fixed arrival rate (open loop), and measures from the moment the
 * callback POST starts to the moment the `payment.completed` webhook for that payment reaches a local
 * receiver. Real processes: one `ROLE=api`, one `ROLE=worker` (Agenda delivery jobs, woken by
 * LISTEN/NOTIFY). The merchant configured its own cardpay webhook secret, so the simulator sends no
 * callbacks of its own; the status sync is pushed out to 10 min so it does not poll the payments under test.
 * The default rate (25/s) is a fraction of what one worker delivers (benchmark 3), so this measures
 * latency under moderate load; raise BENCH_CALLBACK_RATE to see queueing.
 *
 *   npx tsx bench/callback-latency.ts   (BENCH_CALLBACK_EVENTS=1000 BENCH_CALLBACK_RATE=25)
 */
import { createHmac, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { knob, log, runIfMain, type Benchmark } from './lib/harness.js';
import { LoopbackClient, closedLoop, type HttpResponse } from './lib/http.js';
import { CARDPAY_WEBHOOK_SECRET, configureMerchant, createMerchant, createPayment } from './lib/merchant.js';
import { query } from './lib/postgres.js';
import { WebhookReceiver } from './lib/receiver.js';
import { kib, printTable, summarize, writeResult } from './lib/report.js';
import { startServiceProcess, watchRss, type ServiceProcess } from './lib/service-process.js';

interface PendingPayment {
  id: string;
  providerRef: string;
}

/**
 * A cardpay event signed as the provider signs it: `t=<ts>,v1=<hex HMAC-SHA256 of "<ts>.<body>">`, with
 * the intent's amount and currency (25.00 USD, as bench/lib/merchant.ts creates it): the integrity check
 * applies nothing that does not carry ours.
 */
function signedSucceeded(p: PendingPayment): { body: string; signature: string } {
  const created = Math.floor(Date.now() / 1000);
  const body = JSON.stringify({
    id: `evt_bench_${randomUUID().replace(/-/g, '')}`,
    object: 'event',
    api_version: '2026-07-29',
    created,
    livemode: false,
    type: 'payment_intent.succeeded',
    data: { object: { object: 'payment_intent', id: p.providerRef, status: 'succeeded', amount: 2500, amount_received: 2500, currency: 'usd', metadata: { payment_id: p.id } } },
  });
  const signature = `t=${created},v1=${createHmac('sha256', CARDPAY_WEBHOOK_SECRET).update(`${created}.${body}`).digest('hex')}`;
  return { body, signature };
}

function postCallback(client: LoopbackClient, p: PendingPayment): Promise<HttpResponse> {
  const { body, signature } = signedSucceeded(p);
  return client.request({ method: 'POST', path: '/v1/webhooks/cardpay', headers: { 'cardpay-signature': signature }, body });
}

export const callbackLatencyBenchmark: Benchmark = async (ctx) => {
  const events = knob('BENCH_CALLBACK_EVENTS', 1000);
  const rate = knob('BENCH_CALLBACK_RATE', 25);
  const maxInFlight = knob('BENCH_CONCURRENCY', 50);
  const warmupEvents = 20;
  const db = await ctx.pg.createDatabase('callback');
  const receiver = await new WebhookReceiver().start();
  const processes: ServiceProcess[] = [];
  const env = { STATUS_SYNC_SCHEDULE: '10m,1h' };
  try {
    log('benchmark 2: starting the service (ROLE=api, then ROLE=worker)');
    const api = await startServiceProcess({ role: 'api', databaseUrl: db.url, env });
    processes.push(api);
    await api.waitReady();
    // After the api applied the migrations, so the two never migrate at once.
    const worker = await startServiceProcess({ role: 'worker', databaseUrl: db.url, env });
    processes.push(worker);
    const stopWatch = watchRss(processes);
    const merchant = await createMerchant(db.url, 'Bench callbacks');
    const client = new LoopbackClient(api.baseUrl, maxInFlight);
    await configureMerchant(client, merchant, receiver.url);

    log(`creating ${events + warmupEvents} pending 3DS payments`);
    const pending: PendingPayment[] = [];
    const prefix = `cb-${randomUUID()}`;
    const creation = await closedLoop({
      concurrency: maxInFlight,
      maxRequests: events + warmupEvents,
      maxDurationMs: 300_000,
      isOk: (res) => res.status === 201 && res.body.includes('"status":"pending"'),
      send: async (i) => {
        const res = await createPayment(client, merchant, `${prefix}-${i}`, 'pm_card_threeDSecureRequired');
        if (res.status === 201) {
          const data = (JSON.parse(res.body) as { data: { id: string; provider_ref: string } }).data;
          pending.push({ id: data.id, providerRef: data.provider_ref });
        }
        return res;
      },
    });
    if (creation.failed > 0) throw new Error(`could not create the pending payments: ${creation.failures.join(' | ')}`);

    // Warm-up (also proves the worker is up): a few callbacks whose webhooks must arrive.
    const warm = pending.splice(0, warmupEvents);
    await Promise.all(warm.map((p) => postCallback(client, p)));
    if (!(await receiver.waitForDistinct(warm.length, 90_000))) throw new Error(`warm-up webhooks did not arrive:\n${worker.stderrTail()}`);
    receiver.reset();

    log(`posting ${pending.length} signed callbacks at ${rate}/s (at most ${maxInFlight} in flight)`);
    const postedAt = new Map<string, number>();
    const responseMs: number[] = [];
    let failedCallbacks = 0;
    const failures: string[] = [];
    let maxLagMs = 0;
    let inFlight = 0;
    const start = performance.now();
    const sends: Promise<void>[] = [];
    for (let i = 0; i < pending.length; i += 1) {
      const p = pending[i]!;
      const due = start + (i * 1000) / rate;
      while (performance.now() < due || inFlight >= maxInFlight) await new Promise((r) => setTimeout(r, Math.max(1, Math.min(5, due - performance.now()))));
      maxLagMs = Math.max(maxLagMs, performance.now() - due);
      const t0 = performance.now();
      postedAt.set(p.id, t0);
      inFlight += 1;
      sends.push(
        postCallback(client, p).then(
          (res) => {
            inFlight -= 1;
            responseMs.push(performance.now() - t0);
            if (res.status !== 200) {
              failedCallbacks += 1;
              if (failures.length < 5) failures.push(`${res.status} ${res.body.slice(0, 200)}`);
            }
          },
          (err: Error) => {
            inFlight -= 1;
            failedCallbacks += 1;
            if (failures.length < 5) failures.push(err.message);
          },
        ),
      );
    }
    await Promise.all(sends);
    const sendSeconds = (performance.now() - start) / 1000;
    const allArrived = await receiver.waitForDistinct(pending.length - failedCallbacks, 60_000);
    stopWatch();
    client.close();

    const endToEnd: number[] = [];
    for (const p of pending) {
      const receipt = receiver.byPaymentId.get(p.id);
      const t0 = postedAt.get(p.id);
      if (receipt && t0 !== undefined) endToEnd.push(receipt.at - t0);
    }
    const [{ delivered } = { delivered: '0' }] = await query<{ delivered: string }>(db.url, `SELECT count(*) AS delivered FROM webhook_deliveries WHERE status = 'delivered'`);
    const apiRss = (await api.stop()).peakRssKb;
    const workerRss = (await worker.stop()).peakRssKb;

    const e2e = summarize(endToEnd);
    const resp = summarize(responseMs);
    printTable(`Callback → merchant webhook — ${pending.length} events at ${rate}/s (open loop)`, [
      { measure: 'callback POST → 200 response', count: resp.count, 'p50 ms': resp.p50, 'p90 ms': resp.p90, 'p99 ms': resp.p99, 'max ms': resp.max },
      { measure: 'callback POST → webhook received', count: e2e.count, 'p50 ms': e2e.p50, 'p90 ms': e2e.p90, 'p99 ms': e2e.p99, 'max ms': e2e.max },
    ]);
    process.stdout.write(`callbacks failed: ${failedCallbacks}; webhooks missing: ${pending.length - endToEnd.length}; dispatcher max lag ${maxLagMs.toFixed(0)} ms\n`);
    process.stdout.write(`peak RSS: api ${kib(apiRss)}, worker ${kib(workerRss)}\n`);
    if (failures.length) process.stdout.write(`callback failures (first ${failures.length}): ${failures.join(' | ')}\n`);
    if (!allArrived) process.stdout.write('WARNING: not every webhook arrived within 60 s\n');

    const result = {
      benchmark: 'callback-latency',
      at: new Date().toISOString(),
      machine: ctx.machine,
      parameters: { events: pending.length, ratePerSecond: rate, maxInFlight, warmupEvents, processes: ['api', 'worker'], env },
      creation: { ...summarize(creation.latenciesMs), requestsPerSecond: creation.requestsPerSecond },
      callbackResponse: resp,
      callbackToWebhook: e2e,
      failedCallbacks,
      failures,
      missingWebhooks: pending.length - endToEnd.length,
      deliveredRows: Number(delivered),
      sendSeconds,
      dispatcherMaxLagMs: maxLagMs,
      peakRssKb: { api: apiRss, worker: workerRss },
    };
    return {
      name: 'callback-latency',
      headline: { events: e2e.count, 'rate /s': rate, 'callback→webhook p50/p99 ms': `${e2e.p50} / ${e2e.p99}`, 'callback 200 p50/p99 ms': `${resp.p50} / ${resp.p99}` },
      resultFile: writeResult('callback-latency', result),
      peakRssKb: { api: apiRss, worker: workerRss },
    };
  } finally {
    for (const p of processes) await p.stop();
    await receiver.stop();
    await db.drop();
  }
};

runIfMain(import.meta.url, callbackLatencyBenchmark);
