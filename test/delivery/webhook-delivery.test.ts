import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { verifyWebhook } from '../../client/index.js';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

let t: TestService;
let receiver: WebhookReceiver;
const secrets: string[] = [];

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService({ WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms', WEBHOOK_TIMEOUT_MS: '1500' });
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

/** A merchant whose webhook goes to its own path on the receiver. */
async function merchantAt(pathName: string) {
  const m = await t.createMerchant(`Shop ${pathName}`);
  const secret = await registerWebhook(t, m.apiKey, receiver.url(pathName));
  secrets.push(secret);
  return { ...m, secret };
}

/** A loopback port nothing listens on (taken from the OS, then released). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The service's log lines about one delivery (the test service logs to its database's file, synchronously). */
function logLinesOf(deliveryId: string): Array<Record<string, unknown>> {
  const file = path.resolve('test-results', 'logs', `${new URL(t.databaseUrl).pathname.slice(1)}.log`);
  return readFileSync(file, 'utf8').split('\n').filter((l) => l.includes(deliveryId)).map((l) => JSON.parse(l) as Record<string, unknown>);
}

const settled = (id: string, status: string) =>
  waitFor(async () => {
    const row = await delivery(t, id);
    return row.status === status && row.lease_until === null ? row : null;
  }, `delivery ${id} to be ${status}`);

describe('signed delivery', () => {
  it('POSTs the stored body with the documented headers and a verifiable signature', async () => {
    const m = await merchantAt('/ok');
    const { deliveryId, eventId, paymentId } = await emitEvent(t, m.merchantId, { type: 'payment.completed' });
    const row = await settled(deliveryId, 'delivered');
    expect(row.attempts).toBe(1);
    expect(row.last_response_status).toBe(200);
    expect(row.delivered_at).not.toBeNull();
    expect(row.next_attempt_at).toBeNull();

    const [req] = receiver.on('/ok');
    expect(req).toBeDefined();
    const [event] = await t.sql<{ body: string }>('SELECT body FROM events WHERE id = $1', [eventId]);
    expect(req!.body).toBe(event!.body);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['x-event-type']).toBe('payment.completed');
    expect(req!.headers['x-webhook-id']).toBe(deliveryId);
    expect(req!.headers['user-agent']).toMatch(/^payments-webhooks\//);
    expect(req!.headers['x-payments-timestamp']).toMatch(/^\d{10}$/);

    // Plain crypto, as a receiver without the SDK would check it.
    const timestamp = req!.headers['x-payments-timestamp'] as string;
    const expected = createHmac('sha256', m.secret).update(`${timestamp}.${req!.body}`).digest('hex');
    expect(req!.headers['x-payments-signature']).toBe(`sha256=${expected}`);

    // And with the SDK helper, which also returns the typed event.
    const verified = verifyWebhook(req!.body, req!.headers, m.secret);
    expect(verified).toEqual({
      id: eventId,
      type: 'payment.completed',
      created_at: expect.any(String),
      data: { payment_id: paymentId, amount: '25.00', currency: 'USD', provider: 'cardpay', status: 'completed', previous_status: 'pending' },
    });
    // Another well-formed secret (a malformed one is a TypeError before any signature is checked).
    expect(() => verifyWebhook(req!.body, req!.headers, `whsec_${randomBytes(32).toString('base64')}`)).toThrow(/signature/);

    expect(await attemptsOf(t, deliveryId)).toEqual([
      { attempt_number: 1, trigger: 'scheduled', response_status: 200, error: null, duration_ms: expect.any(Number) },
    ]);
  });

  it('signs with the current secret after the merchant rotates it', async () => {
    const m = await merchantAt('/rotated');
    const rotated = await registerWebhook(t, m.apiKey, receiver.url('/rotated'));
    secrets.push(rotated);
    const { deliveryId } = await emitEvent(t, m.merchantId);
    await settled(deliveryId, 'delivered');
    const [req] = receiver.on('/rotated');
    expect(verifyWebhook(req!.body, req!.headers, rotated).type).toBe('payment.completed');
    expect(() => verifyWebhook(req!.body, req!.headers, m.secret)).toThrow(/signature/);
  });
});

describe('retries', () => {
  it('retries a failing receiver and delivers on the third attempt with the same id and body', async () => {
    const m = await merchantAt('/flaky');
    receiver.failNext('/flaky', 2, 500);
    const { deliveryId, eventId } = await emitEvent(t, m.merchantId);
    const row = await settled(deliveryId, 'delivered');
    expect(row.attempts).toBe(3);
    expect(row.last_response_status).toBe(200);
    expect(row.last_error).toBeNull();

    const requests = receiver.on('/flaky');
    expect(requests).toHaveLength(3);
    expect(new Set(requests.map((r) => r.headers['x-webhook-id']))).toEqual(new Set([deliveryId]));
    expect(new Set(requests.map((r) => r.body)).size).toBe(1);
    expect(JSON.parse(requests[0]!.body).id).toBe(eventId);
    for (const r of requests) expect(verifyWebhook(r.body, r.headers, m.secret).id).toBe(eventId);

    expect((await attemptsOf(t, deliveryId)).map((a) => [a.attempt_number, a.trigger, a.response_status, a.error])).toEqual([
      [1, 'scheduled', 500, 'HTTP 500'],
      [2, 'scheduled', 500, 'HTTP 500'],
      [3, 'scheduled', 200, null],
    ]);
  });

  it('marks a delivery dead after exactly six failed attempts; a manual retry then re-sends it', async () => {
    const m = await merchantAt('/down');
    receiver.alwaysFail('/down', 503);
    const { deliveryId } = await emitEvent(t, m.merchantId);
    const dead = await settled(deliveryId, 'dead');
    expect(dead.attempts).toBe(6);
    expect(dead.next_attempt_at).toBeNull();
    expect(dead.last_response_status).toBe(503);
    expect(receiver.on('/down')).toHaveLength(6);
    const attempts = await attemptsOf(t, deliveryId);
    expect(attempts.map((a) => a.attempt_number)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(attempts.every((a) => a.trigger === 'scheduled' && a.response_status === 503)).toBe(true);
    // The operator is told, once, at warning level: whose delivery died and why (the dead alert sends them to it).
    const warning = await waitFor(async () => logLinesOf(deliveryId).find((l) => l.status === 'dead') ?? null, 'the dead delivery to be logged');
    expect(warning).toMatchObject({ level: 40, merchantId: m.merchantId, attempt: 6, responseStatus: 503, reason: 'HTTP 503', msg: expect.stringContaining('dead') });

    // A failed manual retry is recorded and leaves it dead: the merchant's own action, not a warning.
    const failed = await t.http.post(`/v1/webhooks/logs/${deliveryId}/retry`).set('X-API-Key', m.apiKey);
    expect(failed.status).toBe(200);
    expect(failed.body.data).toMatchObject({ id: deliveryId, status: 'dead', attempts: 7, last_response_status: 503, next_attempt_at: null });
    expect(logLinesOf(deliveryId).filter((l) => l.level === 40)).toEqual([warning]);
    expect(logLinesOf(deliveryId).find((l) => l.attempt === 7)).toMatchObject({ level: 30, trigger: 'manual', reason: 'HTTP 503' });

    receiver.succeed('/down');
    const res = await t.http.post(`/v1/webhooks/logs/${deliveryId}/retry`).set('X-API-Key', m.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: deliveryId, status: 'delivered', attempts: 8, last_response_status: 200, last_error: null });
    expect(res.body.data.delivered_at).toEqual(expect.any(String));
    const requests = receiver.on('/down');
    expect(requests).toHaveLength(8);
    expect(new Set(requests.map((r) => r.headers['x-webhook-id']))).toEqual(new Set([deliveryId]));
    expect(new Set(requests.map((r) => r.body)).size).toBe(1);
    const all = await attemptsOf(t, deliveryId);
    expect(all.slice(6).map((a) => [a.attempt_number, a.trigger, a.response_status])).toEqual([
      [7, 'manual', 503],
      [8, 'manual', 200],
    ]);

    // A delivered delivery cannot be retried.
    const again = await t.http.post(`/v1/webhooks/logs/${deliveryId}/retry`).set('X-API-Key', m.apiKey);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('CONFLICT');
    expect(receiver.on('/down')).toHaveLength(8);
  });

  it('counts a receiver that does not answer within WEBHOOK_TIMEOUT_MS as a failed attempt', async () => {
    const m = await merchantAt('/slow');
    receiver.hangNext('/slow', 1);
    const { deliveryId } = await emitEvent(t, m.merchantId);
    const row = await settled(deliveryId, 'delivered');
    expect(row.attempts).toBe(2);
    const attempts = await attemptsOf(t, deliveryId);
    expect(attempts[0]).toMatchObject({ attempt_number: 1, response_status: null, error: 'no response within 1500 ms' });
    expect(attempts[1]).toMatchObject({ attempt_number: 2, response_status: 200, error: null });
  });

  it('records a refused connection as a failed attempt with no response status', async () => {
    const m = await t.createMerchant('Closed port');
    await registerWebhook(t, m.apiKey, `http://127.0.0.1:${await closedPort()}/hook`);
    const { deliveryId } = await emitEvent(t, m.merchantId);
    const row = await settled(deliveryId, 'dead');
    expect(row.last_response_status).toBeNull();
    expect(row.last_error).toMatch(/ECONNREFUSED/);
  });
});

describe('sweeper', () => {
  it('delivers an event whose commit woke no worker (none was listening), with no job booked for it', async () => {
    const m = await merchantAt('/orphan');
    const { deliveryId } = await emitEvent(t, m.merchantId, { notify: false });
    const row = await settled(deliveryId, 'delivered');
    expect(row.attempts).toBe(1);
    expect(receiver.on('/orphan')).toHaveLength(1);
    expect(receiver.on('/orphan')[0]!.headers['x-webhook-id']).toBe(deliveryId);
    const jobs = await t.sql(`SELECT id FROM agenda_jobs WHERE name = 'webhook.deliver' AND data->>'deliveryId' = $1`, [deliveryId]);
    expect(jobs).toHaveLength(0);
  });

  it('does not send a delivery another worker holds the lease on, and sends it once the lease expires', async () => {
    const m = await merchantAt('/leased');
    const { deliveryId } = await emitEvent(t, m.merchantId, {
      notify: false,
      adjust: (tx, ids) => tx.execute(`UPDATE webhook_deliveries SET lease_until = now() + interval '1 hour' WHERE id = ?`, [ids.deliveryId]),
    });
    // A commit wakes the worker, which claims every due delivery: it sends the other one, not the leased one.
    const other = await merchantAt('/leased-other');
    const sent = await emitEvent(t, other.merchantId);
    await settled(sent.deliveryId, 'delivered');
    expect(receiver.on('/leased')).toHaveLength(0);
    expect((await delivery(t, deliveryId)).status).toBe('pending');

    // The holder died: its lease runs out and the sweeper picks the delivery up.
    await t.sql(`UPDATE webhook_deliveries SET lease_until = now() - interval '1 second' WHERE id = $1`, [deliveryId]);
    await settled(deliveryId, 'delivered');
    expect(receiver.on('/leased')).toHaveLength(1);
  });
});

describe('leases', () => {
  it('sends a delivery once when two workers attempt it at the same time', async () => {
    // An api-only service, so the three claims below are the only ones: this file's service has a drain loop,
    // whose claim (its fallback poll every DELIVERY_SWEEP_INTERVAL, 1 s here, or any commit's wake-up) could
    // take the delivery first, leaving them nothing to claim.
    const api = await startTestService({ ROLE: 'api' });
    try {
      const m = await api.createMerchant('Shop /race');
      await registerWebhook(api, m.apiKey, receiver.url('/race'));
      const { deliveryId } = await emitEvent(api, m.merchantId, { notify: false });
      const { deliveries } = api.service.container.services;
      // Three workers' claims at once: one of them takes it.
      const claims = await Promise.all([1, 2, 3].map(() => api.inContext(() => deliveries.leaseDue(10))));
      expect(claims.flat().filter((leased) => leased.id === deliveryId)).toHaveLength(1);
      const outcomes = await Promise.all(claims.flat().map((leased) => api.inContext(() => deliveries.attemptLeased(leased))));
      expect(outcomes).toContainEqual({ status: 'delivered', nextAttemptAt: null });
      expect(receiver.on('/race')).toHaveLength(1);
      expect(await attemptsOf(api, deliveryId)).toHaveLength(1);
    } finally {
      await api.stop();
    }
  });

  it('keeps one repeating sweeper row in the job table', async () => {
    const rows = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM agenda_jobs WHERE name = 'webhook.sweep'`);
    expect(rows[0]!.n).toBe(1);
  });
});

describe('URL policy at delivery time', () => {
  it('does not call a URL that is no longer allowed', async () => {
    const strict = await startTestService({ WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_RETRY_SCHEDULE: '100ms' });
    try {
      const m = await strict.createMerchant('Strict shop');
      await registerWebhook(strict, m.apiKey, 'https://93.184.215.14/hook');
      // The registered name now points somewhere private (e.g. a DNS change).
      await strict.sql('UPDATE merchants SET webhook_url = $1 WHERE id = $2', [receiver.url('/private'), m.merchantId]);
      const { deliveryId } = await emitEvent(strict, m.merchantId);
      const row = await waitFor(async () => {
        const r = await delivery(strict, deliveryId);
        return r.status === 'dead' ? r : null;
      }, 'the refused delivery to die');
      expect(row.attempts).toBe(2);
      expect(row.last_response_status).toBeNull();
      expect(row.last_error).toMatch(/^URL refused: must use https/);
      expect(receiver.on('/private')).toHaveLength(0);

      // An https URL whose name now resolves to a private address: refused by the lookup of the
      // connection itself, inside the attempt's timeout, before anything is sent.
      const renamed = await strict.createMerchant('Renamed shop');
      await registerWebhook(strict, renamed.apiKey, 'https://93.184.215.14/hook');
      const privateName = new URL(receiver.url('/private-name'));
      privateName.protocol = 'https:';
      privateName.hostname = 'localhost';
      await strict.sql('UPDATE merchants SET webhook_url = $1 WHERE id = $2', [privateName.toString(), renamed.merchantId]);
      const refused = await emitEvent(strict, renamed.merchantId);
      const renamedRow = await waitFor(async () => {
        const r = await delivery(strict, refused.deliveryId);
        return r.status === 'dead' ? r : null;
      }, 'the delivery to a private name to die');
      expect(renamedRow.last_response_status).toBeNull();
      expect(renamedRow.last_error).toMatch(/ENOTPUBLIC/);
      expect(receiver.on('/private-name')).toHaveLength(0);
    } finally {
      await strict.stop();
    }
  });
});

describe('logging', () => {
  it('never writes a webhook secret or an event body to the logs', async () => {
    const name = new URL(t.databaseUrl).pathname.slice(1);
    const log = readFileSync(path.resolve('test-results', 'logs', `${name}.log`), 'utf8');
    expect(log).toContain('webhook delivered');
    for (const secret of secrets) expect(log).not.toContain(secret);
    const bodies = await t.sql<{ body: string }>('SELECT body FROM events');
    for (const { body } of bodies) expect(log).not.toContain(body);
    expect(log).not.toContain('"data":{"payment_id"');
  });
});
