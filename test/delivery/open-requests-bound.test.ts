import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

// Test events and manual retries are the merchant's own requests, not bounded by its in-flight share of
// the workers' claims. A merchant whose URL accepts connections and never answers, sending test events
// as fast as its API key allows, must not open sockets without end in the process (every merchant's
// database and provider connections need file descriptors too).

const SHARE = 4; // WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: a merchant's open requests per process are bounded at twice it
const BOUND = 2 * SHARE;
const BUDGET = 1000; // RATE_LIMIT_PER_MINUTE

/** An endpoint that accepts connections and answers nothing until told to; counts its connections. */
async function silentEndpoint() {
  const open = new Set<Socket>();
  let connections = 0;
  let mostOpen = 0;
  let answering = false;
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests += 1;
    req.resume();
    if (answering) req.on('end', () => res.writeHead(200).end('ok'));
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    open.add(socket);
    mostOpen = Math.max(mostOpen, open.size);
    socket.on('close', () => open.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    stats: () => ({ connections, open: open.size, mostOpen, requests }),
    /** Cuts the connections it holds (their attempts fail) and answers from now on. */
    answerFromNowOn: () => {
      answering = true;
      server.closeAllConnections();
    },
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let t: TestService;
let receiver: WebhookReceiver;
let silent: Awaited<ReturnType<typeof silentEndpoint>>;
beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  silent = await silentEndpoint();
  // Attempts wait 60 s for an answer: none times out (freeing its connection) while the test looks. The
  // per-key budget is on, far above what the test sends, to show the bound's 429 is not the budget's.
  t = await startTestService({ WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: String(SHARE), RATE_LIMIT_PER_MINUTE: String(BUDGET) });
});
afterAll(async () => {
  await silent.stop();
  await receiver.stop();
  await t.stop();
});

describe("a merchant's open webhook requests in a process", () => {
  it("200 test events at once to an endpoint that never answers: at most twice the share are sent, the rest are refused at once with 429; another merchant's goes on", async () => {
    const a = await t.createMerchant('Never Answers');
    await registerWebhook(t, a.apiKey, silent.url);
    const b = await t.createMerchant('Answers');
    await registerWebhook(t, b.apiKey, receiver.url('/b'));

    const answered: { status: number; body: { error?: { code: string; message: string } }; retryAfter: string | undefined; limit: string | undefined; remaining: number }[] = [];
    const all = Array.from({ length: 200 }, () =>
      t.http.post('/v1/webhooks/test').set('X-API-Key', a.apiKey).send({})
        .then((res) => answered.push({
          status: res.status, body: res.body, retryAfter: res.headers['retry-after'], limit: res.headers['x-ratelimit-limit'], remaining: Number(res.headers['x-ratelimit-remaining']),
        })),
    );
    // The refusals come while the requests let through are still waiting for their answers (60 s away).
    // 200 requests at once on a loaded 2-CPU CI machine: up to a minute (10 s when it is quiet).
    await waitFor(async () => (answered.length >= 200 - BOUND && silent.stats().requests >= BOUND ? true : null), 'the test events beyond the bound to be refused', 60_000);
    expect(silent.stats()).toEqual({ connections: BOUND, open: BOUND, mostOpen: BOUND, requests: BOUND });
    expect(answered).toHaveLength(200 - BOUND);
    for (const r of answered) {
      expect({ status: r.status, code: r.body.error?.code, retryAfter: r.retryAfter }).toEqual({ status: 429, code: 'RATE_LIMITED', retryAfter: '1' });
    }
    expect(answered[0]!.body.error!.message).toBe(
      `Too many requests to your webhook endpoint: at most ${BOUND} open at once, deliveries included; retry once some are answered`,
    );
    // Each refused request was counted against the key's budget like any other, and says what the budget
    // has left (openapi.json: X-RateLimit-Remaining is 0 only on the budget's own 429).
    expect(new Set(answered.map((r) => r.limit))).toEqual(new Set([String(BUDGET)]));
    expect(Math.min(...answered.map((r) => r.remaining))).toBeGreaterThan(0);
    // A refused test event leaves nothing in the delivery log.
    const [{ n }] = (await t.sql<{ n: number }>("SELECT count(*)::int AS n FROM webhook_deliveries WHERE merchant_id = $1 AND event_type = 'webhook.test'", [a.merchantId])) as [{ n: number }];
    expect(n).toBe(BOUND);

    // A manual retry of a dead delivery is refused alike, not sent.
    const { deliveryId: deadId } = await emitEvent(t, a.merchantId, {
      notify: false,
      adjust: (tx, ids) => tx.execute(`UPDATE webhook_deliveries SET status = 'dead', next_attempt_at = NULL WHERE id = ?`, [ids.deliveryId]),
    });
    const retry = await t.http.post(`/v1/webhooks/logs/${deadId}/retry`).set('X-API-Key', a.apiKey);
    expect([retry.status, retry.body.error?.code, retry.headers['retry-after']]).toEqual([429, 'RATE_LIMITED', '1']);
    expect(Number(retry.headers['x-ratelimit-remaining'])).toBeGreaterThan(0);
    expect(silent.stats().requests).toBe(BOUND);

    // Another merchant's test event is sent and answered meanwhile.
    const other = await t.http.post('/v1/webhooks/test').set('X-API-Key', b.apiKey).send({});
    expect([other.status, other.body.data.delivered]).toEqual([200, true]);
    expect(receiver.on('/b')).toHaveLength(1);

    // Once the endpoint's connections end, the merchant's test events are let through again.
    silent.answerFromNowOn();
    await Promise.all(all);
    const again = await t.http.post('/v1/webhooks/test').set('X-API-Key', a.apiKey).send({});
    expect([again.status, again.body.data.delivered]).toEqual([200, true]);
  }, 120_000);
});
