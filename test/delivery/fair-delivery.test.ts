import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { WebhookReceiver, eventually } from '../support/webhook-receiver.js';
import { emitEvent } from './events.js';

/**
 * One merchant's webhook endpoint accepts connections and never answers, and that merchant has queued
 * far more events than a worker has slots. Another merchant's events must still go out at once: a
 * merchant holds at most WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT of the workers' slots, and claims go round
 * the merchants with something due.
 */
const PER_MERCHANT = 4;

/** An endpoint that takes every request and never answers, counting the ones it holds (and the most at once). */
class HangingEndpoint {
  readonly held = new Set<http.ServerResponse>();
  received = 0;
  maxHeld = 0;
  private server = http.createServer((_req, res) => {
    this.received += 1;
    this.held.add(res);
    this.maxHeld = Math.max(this.maxHeld, this.held.size);
    res.on('close', () => this.held.delete(res));
  });
  url = '';

  async start() {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
    return this;
  }

  async stop() {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

interface SlowEndpoint {
  url: string;
  stop(): Promise<void>;
}

/**
 * An endpoint that answers every request 200 after 200 ms, handing `onBody` its JSON body as it arrives;
 * with a small share, deliveries to it queue.
 */
async function slowEndpoint<T>(onBody: (body: T) => void): Promise<SlowEndpoint> {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      onBody(JSON.parse(body) as T);
      setTimeout(() => res.writeHead(200).end('ok'), 200);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let t: TestService;
let hanging: HangingEndpoint;
let receiver: WebhookReceiver;
beforeAll(async () => {
  // Attempts wait 30 s for an answer: far longer than the other merchant may wait for its event.
  // Attempts wait 60 s for an answer: longer than making this file's payments takes on a loaded host, so no
  // timeout frees a slot while a test looks (CI at 529aad3 saw one freed after 20 s).
  t = await startTestService({ WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: String(PER_MERCHANT) });
  hanging = await new HangingEndpoint().start();
  receiver = await new WebhookReceiver().start();
});
afterAll(async () => {
  await hanging.stop(); // the held attempts fail now, so the stop does not wait for them
  await receiver.stop();
  await t.stop();
});

async function merchantWithEndpoint(name: string, url: string, service: TestService = t) {
  const m = await service.createMerchant(name);
  await service.http.put('/v1/merchant/webhook').set('X-API-Key', m.apiKey).send({ webhook_url: url }).expect(200);
  await service.http.put('/v1/merchant/credentials').set('X-API-Key', m.apiKey).send({ provider: 'cardpay', cardpay: { secret_key: `sk_test_${randomUUID().replace(/-/g, '')}` } }).expect(200);
  return m;
}

const pay = (apiKey: string, service: TestService = t) =>
  service.http.post('/v1/payments').set('X-API-Key', apiKey).set('Idempotency-Key', randomUUID())
    .send({ provider: 'cardpay', amount: '5.00', currency: 'USD', payment_method: 'pm_card_visa' }).expect(201);
/** `count` completed payments, ten at a time (each queues one delivery). */
async function payMany(apiKey: string, count: number, service: TestService = t): Promise<void> {
  for (let done = 0; done < count; done += 10) {
    await Promise.all(Array.from({ length: Math.min(10, count - done) }, () => pay(apiKey, service)));
  }
}

describe('webhook delivery between merchants', () => {
  it("a merchant whose endpoint hangs holds only its share of the slots; another merchant's event goes out at once", async () => {
    const slow = await merchantWithEndpoint('Hanging endpoint', hanging.url);
    // More events than the worker's 64 slots: each completed payment queues one delivery.
    await payMany(slow.apiKey, 70);
    await eventually(() => hanging.received >= PER_MERCHANT, 10_000, 'the slow merchant\'s first attempts');
    await new Promise((r) => setTimeout(r, 500));
    expect(hanging.held.size).toBe(PER_MERCHANT);

    const other = await merchantWithEndpoint('Answers at once', receiver.url);
    const payment = (await pay(other.apiKey)).body.data as { id: string };
    // Delivered while every one of the slow merchant's attempts is still waiting for its answer.
    await eventually(() => receiver.events('payment.completed').find((e) => e.json.data.payment_id === payment.id), 10_000, "the other merchant's event");
    expect(hanging.held.size).toBe(PER_MERCHANT);
    expect(hanging.received).toBe(PER_MERCHANT);
  }, 120_000);
});

describe('webhook delivery when two merchants\' endpoints hang', () => {
  // Two hanging merchants at their share hold 60 of the worker's 64 slots: 4 are left, fewer than a
  // batched claim waits for. Attempts wait 60 s for an answer, so only a claim of those 6 explains
  // another merchant's event going out within a few seconds.
  const SHARE = 30;
  let s: TestService;
  let first: HangingEndpoint;
  let second: HangingEndpoint;
  let answering: WebhookReceiver;
  beforeAll(async () => {
    s = await startTestService({ WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: String(SHARE) });
    first = await new HangingEndpoint().start();
    second = await new HangingEndpoint().start();
    answering = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await first.stop();
    await second.stop();
    await answering.stop();
    await s.stop();
  });

  it("the slots they leave free still send another merchant's event at once", async () => {
    const a = await merchantWithEndpoint('Hangs A', first.url, s);
    const b = await merchantWithEndpoint('Hangs B', second.url, s);
    await Promise.all([payMany(a.apiKey, SHARE + 5, s), payMany(b.apiKey, SHARE + 5, s)]);
    // Both are sending all they may (or all a worker claimed before it stopped claiming).
    await eventually(() => first.held.size + second.held.size >= 2 * SHARE - 1 || null, 10_000, 'the hanging merchants\' attempts');
    await new Promise((r) => setTimeout(r, 300));
    const heldBefore = first.received + second.received;
    expect(first.held.size).toBeLessThanOrEqual(SHARE);
    expect(second.held.size).toBeLessThanOrEqual(SHARE);

    const other = await merchantWithEndpoint('Answers at once', answering.url, s);
    const payment = (await pay(other.apiKey, s)).body.data as { id: string };
    await eventually(() => answering.events('payment.completed').find((e) => e.json.data.payment_id === payment.id), 5_000, "the other merchant's event");
    // Every hanging attempt is still waiting for its answer: no timeout freed the slot that sent it.
    expect(first.received + second.received).toBeLessThanOrEqual(2 * SHARE);
    expect(first.received + second.received).toBeGreaterThanOrEqual(heldBefore);
    expect(first.held.size + second.held.size).toBe(first.received + second.received);
  }, 120_000);
});

describe('retries of a merchant whose endpoint hangs', () => {
  // Attempts time out after 1 s and are retried 100 ms later, each retry booked as an Agenda job: the
  // retries must stay within the merchant's share too, while the merchant's other events wait.
  const SHARE = 4;
  let s: TestService;
  let endpoint: HangingEndpoint;
  beforeAll(async () => {
    s = await startTestService({ WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms', WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: String(SHARE) });
    endpoint = await new HangingEndpoint().start();
  });
  afterAll(async () => {
    await endpoint.stop();
    await s.stop();
  });

  it('never holds more than its share at once, counting its retries', async () => {
    const m = await merchantWithEndpoint('Hangs, retried', endpoint.url, s);
    for (let i = 0; i < 8; i++) await pay(m.apiKey, s);
    // Rounds of timeouts, each followed by retries due 100 ms later while other events still wait.
    await eventually(async () => {
      const retried = await s.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.merchant_id = $1 AND a.attempt_number > 1`,
        [m.merchantId],
      );
      return retried[0]!.n >= SHARE || null;
    }, 15_000, "a round of retries");
    expect(endpoint.maxHeld).toBe(SHARE);
  }, 120_000);
});

describe('new events of a merchant whose failed deliveries were recovered', () => {
  // The merchant's endpoint takes 200 ms per request and its share is 2: 50 recovered deliveries take
  // about 5 s to send. A payment made meanwhile must not wait behind them.
  const SHARE = 2;
  let s: TestService;
  let endpoint: SlowEndpoint;
  /** Each request's event type and payment id, in the order they arrived. */
  const arrived: { type: string; paymentId: string }[] = [];
  beforeAll(async () => {
    s = await startTestService({ WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: String(SHARE) });
    endpoint = await slowEndpoint((event: { type: string; data: { payment_id?: string } }) => {
      arrived.push({ type: event.type, paymentId: event.data.payment_id ?? '' });
    });
  });
  afterAll(async () => {
    await endpoint.stop();
    await s.stop();
  });

  it("a new payment's event is sent among the first, ahead of the recovered backlog, and the backlog is still all delivered", async () => {
    const m = await merchantWithEndpoint('Recovered backlog', endpoint.url, s);
    // 50 deliveries that died while the endpoint was down (never enqueued: nothing sends them until recover).
    const recovered = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const { paymentId } = await emitEvent(s, m.merchantId, {
        notify: false,
        adjust: (tx, { deliveryId }) => tx.execute(
          `UPDATE webhook_deliveries SET status = 'dead', attempts = 5, last_response_status = 503, next_attempt_at = NULL, created_at = now() - interval '1 hour' WHERE id = ?`,
          [deliveryId],
        ),
      });
      recovered.add(paymentId);
    }
    const queued = await s.http.post('/v1/webhooks/recover').set('X-API-Key', m.apiKey).send({ since: new Date(Date.now() - 2 * 3_600_000).toISOString() }).expect(200);
    expect(queued.body.data.queued).toBe(50);
    await eventually(() => arrived.length > 0 || null, 10_000, 'the recovered deliveries to start');

    const payment = (await pay(m.apiKey, s)).body.data as { id: string };
    // Requests the endpoint had received when the payment was answered (those sent while it was being made,
    // ~10 a second, are not the order's doing).
    const before = arrived.length;
    // Its place among the requests the endpoint received (1 = first).
    const place = await eventually(() => arrived.findIndex((a) => a.paymentId === payment.id) + 1 || null, 20_000, "the new payment's event");
    // After it was answered, before it: at most what was in flight or claimed then, not the 50 recovered ones.
    expect(place - before).toBeLessThanOrEqual(SHARE + 2);
    // And the recovered ones are not starved: every one is delivered.
    await eventually(() => arrived.filter((a) => recovered.has(a.paymentId)).length === 50 || null, 30_000, 'every recovered delivery');
  }, 90_000);
});

describe('retries of a merchant with a share of 1 and a steady stream of new events', () => {
  // One attempt at a time, each taking 200 ms, and new events arriving faster than that: some are always
  // waiting. A retry that falls due meanwhile must go out in its turn, not after the stream stops.
  let s: TestService;
  let endpoint: SlowEndpoint;
  const arrived: string[] = [];
  beforeAll(async () => {
    s = await startTestService({ WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: '1' });
    endpoint = await slowEndpoint((event: { data: { payment_id: string } }) => arrived.push(event.data.payment_id));
  });
  afterAll(async () => {
    await endpoint.stop();
    await s.stop();
  });

  it('a retry due now is sent ahead of the new events that fell due after it', async () => {
    const m = await merchantWithEndpoint('Stream of events', endpoint.url, s);
    // New events, one every 50 ms for 4 s (four times what the endpoint answers): some always wait.
    let streaming = true;
    let retryCommitted = false;
    /** The stream's events written after the retry was committed: due after it. */
    const later = new Set<string>();
    const stream = (async () => {
      for (let i = 0; i < 80 && streaming; i++) {
        const after = retryCommitted;
        const { paymentId } = await emitEvent(s, m.merchantId);
        if (after) later.add(paymentId);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    await eventually(() => arrived.length > 0 || null, 10_000, 'the stream to start');
    // A delivery that failed once and whose retry is due now.
    const { paymentId } = await emitEvent(s, m.merchantId, {
      adjust: (tx, { deliveryId }) => tx.execute(
        `UPDATE webhook_deliveries SET status = 'retrying', attempts = 1, last_response_status = 503, next_attempt_at = now() WHERE id = ?`,
        [deliveryId],
      ),
    });
    retryCommitted = true;
    try {
      const place = await eventually(() => arrived.indexOf(paymentId) + 1 || null, 30_000, 'the retry');
      // Before it: only the new events written before it (the one in flight and the few waiting), none of
      // those written after it — not a place bound, which a loaded host's slower first request would stretch.
      expect(arrived.slice(0, place - 1).filter((id) => later.has(id))).toEqual([]);
    } finally {
      streaming = false;
      await stream;
    }
  }, 90_000);
});
