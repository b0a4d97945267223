import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook } from '../../client/index.js';
import { OUTBOUND_WEBHOOK_EVENTS } from '../../contract/outbound-webhooks.js';
import { recordTestEvent } from '../../server/domain/delivery/test-event.js';
import { openApiDocument } from '../../server/http/openapi.js';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

/**
 * POST /v1/webhooks/recover, POST /v1/webhooks/test, and the Standard Webhooks signature every
 * delivery carries (checked with the `standardwebhooks` package, unchanged).
 */

let t: TestService;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService({ WEBHOOK_RETRY_SCHEDULE: '100ms,100ms' });
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

async function merchantAt(path: string) {
  const m = await t.createMerchant(`Shop ${path}`);
  const secret = await registerWebhook(t, m.apiKey, receiver.url(path));
  return { ...m, secret };
}

/** Delivery rows put in a status and age, never enqueued (the job and sweeper leave them be). */
async function failedDelivery(merchantId: string, status: 'dead' | 'retrying' | 'delivered', ageHours = 1) {
  return emitEvent(t, merchantId, {
    notify: false,
    adjust: (tx, { deliveryId }) =>
      tx.execute(
        `UPDATE webhook_deliveries d SET status = v.status, attempts = 1, last_response_status = 500,
           next_attempt_at = CASE WHEN v.status = 'retrying' THEN now() + interval '1 day' END,
           created_at = now() - (v.age_hours * interval '1 hour')
           FROM (SELECT ?::text AS status, ?::int AS age_hours) v WHERE d.id = ?`,
        [status, ageHours, deliveryId],
      ),
  });
}

const recover = (key: string, body: unknown) => t.http.post('/v1/webhooks/recover').set('X-API-Key', key).send(body as object);
const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000).toISOString();
const recoverDescription = () => (openApiDocument() as { paths: Record<string, { post: { description: string } }> }).paths['/v1/webhooks/recover']!.post.description;

describe('Standard Webhooks', () => {
  it('issues whsec_ + 32 bytes readable as base64url and as standard base64, and every delivery verifies with the standardwebhooks package and both SDK schemes', async () => {
    const m = await merchantAt('/standard');
    expect(m.secret).toMatch(/^whsec_[A-Za-z0-9]{43}=$/);
    expect(Buffer.from(m.secret.slice(6), 'base64')).toHaveLength(32);
    expect(Buffer.from(m.secret.slice(6), 'base64url').equals(Buffer.from(m.secret.slice(6), 'base64'))).toBe(true);
    const { deliveryId, eventId } = await emitEvent(t, m.merchantId);
    const [req] = await waitFor(async () => (receiver.on('/standard').length ? receiver.on('/standard') : null), 'the delivery');
    expect(req!.headers['webhook-id']).toBe(deliveryId);
    expect(req!.headers['webhook-id']).toBe(req!.headers['x-webhook-id']);
    expect(req!.headers['webhook-timestamp']).toBe(req!.headers['x-payments-timestamp']);
    expect(req!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);

    // The reference library, given the secret exactly as the API returned it.
    const verified = new Webhook(m.secret).verify(req!.body, req!.headers as Record<string, string>) as { id: string };
    expect(verified.id).toBe(eventId);
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(req!.body, req!.headers as Record<string, string>)).toThrow();

    // The SDK: the Standard Webhooks headers (with X-Webhook-Id, which they sign), X-Payments-Signature as well when present.
    expect(verifyWebhook(req!.body, req!.headers, m.secret).id).toBe(eventId);
    const standardOnly = {
      'x-webhook-id': req!.headers['x-webhook-id'], 'webhook-id': req!.headers['webhook-id'], 'webhook-timestamp': req!.headers['webhook-timestamp'], 'webhook-signature': req!.headers['webhook-signature'],
    };
    expect(verifyWebhook(req!.body, standardOnly, m.secret).id).toBe(eventId);
    expect(() => verifyWebhook(`${req!.body} `, standardOnly, m.secret)).toThrow(/signature/);
    expect(() => verifyWebhook(req!.body, { ...standardOnly, 'webhook-id': randomUUID() }, m.secret)).toThrow(/signature/);
  });

  it("signs with the database's clock: a worker whose clock runs 400 s ahead still sends timestamps receivers accept (scheduled and test deliveries)", async () => {
    const m = await merchantAt('/clock-ahead');
    const realNow = Date.now;
    // This process's clock (the service runs in it) 400 s ahead; the database's is right.
    Date.now = () => realNow() + 400_000;
    let sent;
    try {
      const { deliveryId } = await emitEvent(t, m.merchantId);
      const [scheduled] = await waitFor(async () => (receiver.on('/clock-ahead').length ? receiver.on('/clock-ahead') : null), 'the delivery');
      expect(scheduled!.headers['x-webhook-id']).toBe(deliveryId);
      const test = await t.http.post('/v1/webhooks/test').set('X-API-Key', m.apiKey).expect(200);
      expect(test.body.data.delivered).toBe(true);
      sent = receiver.on('/clock-ahead');
    } finally {
      Date.now = realNow;
    }
    expect(sent).toHaveLength(2);
    const [clock] = await t.sql<{ seconds: number }>('SELECT extract(epoch from now())::float8 AS seconds');
    const seconds = clock!.seconds;
    for (const req of sent) {
      expect(Math.abs(Number(req.headers['webhook-timestamp']) - seconds)).toBeLessThan(60);
      expect(req.headers['x-payments-timestamp']).toBe(req.headers['webhook-timestamp']);
      // A receiver on a right clock, with the SDK's default 300 s tolerance.
      expect(verifyWebhook(req.body, req.headers, m.secret).id).toBeTruthy();
    }
  });

  // Secrets issued before: url-safe base64 (with - and _), then plain standard base64 (with + and /).
  it.each([
    ['url-safe base64', 'base64url', /[-_]/],
    ['standard base64 with + and /', 'base64', /[+/]/],
  ] as const)('keeps a secret issued earlier in %s valid for X-Payments-Signature and webhook-signature', async (_name, encoding, shape) => {
    const path = `/legacy-${encoding}`;
    const m = await merchantAt(path);
    // The old form, sealed the way the service seals secrets.
    const legacy = `whsec_${Buffer.alloc(32, 0xfb).toString(encoding)}`;
    expect(legacy).toMatch(shape);
    const sealed = t.service.container.secrets.seal(legacy);
    await t.sql('UPDATE merchants SET webhook_secret_enc = $2 WHERE id = $1', [m.merchantId, sealed]);
    await emitEvent(t, m.merchantId);
    const [req] = await waitFor(async () => (receiver.on(path).length ? receiver.on(path) : null), 'the delivery');
    expect(verifyWebhook(req!.body, req!.headers, legacy).type).toBe('payment.completed');
    const standardOnly = {
      'x-webhook-id': req!.headers['x-webhook-id'], 'webhook-id': req!.headers['webhook-id'], 'webhook-timestamp': req!.headers['webhook-timestamp'], 'webhook-signature': req!.headers['webhook-signature'],
    };
    expect(verifyWebhook(req!.body, standardOnly, legacy).type).toBe('payment.completed');
    if (encoding === 'base64') expect(new Webhook(legacy).verify(req!.body, req!.headers as Record<string, string>)).toBeTruthy();
  });
});

describe('POST /v1/webhooks/recover', () => {
  it('queues every retrying and dead delivery of the window again, to the current URL with the same id and body; a second call queues none', async () => {
    const m = await merchantAt('/recover-old');
    const dead = await failedDelivery(m.merchantId, 'dead', 2);
    const retrying = await failedDelivery(m.merchantId, 'retrying', 3);
    const delivered = await failedDelivery(m.merchantId, 'delivered', 2);
    const outside = await failedDelivery(m.merchantId, 'dead', 30);
    const other = await merchantAt('/recover-other');
    const othersDead = await failedDelivery(other.merchantId, 'dead', 2);
    // The endpoint moved since: recovery goes to the new address.
    const secret = await registerWebhook(t, m.apiKey, receiver.url('/recover-new'));

    const res = await recover(m.apiKey, { since: hoursAgo(24) });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: { queued: 2, since: expect.any(String), until: expect.any(String) } });

    const again = await recover(m.apiKey, { since: hoursAgo(24) });
    expect(again.body.data.queued).toBe(0);

    for (const id of [dead.deliveryId, retrying.deliveryId]) {
      await waitFor(async () => (await delivery(t, id)).status === 'delivered', `delivery ${id} recovered`);
    }
    const sent = receiver.on('/recover-new');
    expect(sent.map((r) => r.headers['x-webhook-id']).sort()).toEqual([dead.deliveryId, retrying.deliveryId].sort());
    for (const req of sent) {
      const [event] = await t.sql<{ body: string }>('SELECT e.body FROM events e JOIN webhook_deliveries d ON d.event_id = e.id WHERE d.id = $1', [req.headers['x-webhook-id']]);
      expect(req.body).toBe(event!.body);
      expect(new Webhook(secret).verify(req.body, req.headers as Record<string, string>)).toBeTruthy();
    }
    expect((await delivery(t, dead.deliveryId)).url).toBe(receiver.url('/recover-new'));
    expect(receiver.on('/recover-old')).toHaveLength(0);
    // Out of the window, already delivered, or another merchant's: untouched.
    expect((await delivery(t, outside.deliveryId)).status).toBe('dead');
    expect((await delivery(t, delivered.deliveryId)).attempts).toBe(1);
    expect((await delivery(t, othersDead.deliveryId)).status).toBe('dead');
    expect(receiver.on('/recover-other')).toHaveLength(0);
  });

  it('respects until, and a recovered dead delivery that fails again is dead after one attempt', async () => {
    const m = await merchantAt('/recover-fail');
    const recent = await failedDelivery(m.merchantId, 'dead', 1);
    const older = await failedDelivery(m.merchantId, 'dead', 5);
    // The recovered delivery had already used its three scheduled attempts (schedule: 100ms,100ms).
    await t.sql('UPDATE webhook_deliveries SET attempts = 3 WHERE id = $1', [older.deliveryId]);
    await t.sql(
      `INSERT INTO delivery_attempts (delivery_id, attempt_number, trigger, response_status, error, duration_ms)
       SELECT $1, n, 'scheduled', 500, 'HTTP 500', 1 FROM generate_series(1, 3) n`,
      [older.deliveryId],
    );
    receiver.alwaysFail('/recover-fail', 503);
    const res = await recover(m.apiKey, { since: hoursAgo(6), until: hoursAgo(2) });
    expect(res.body.data.queued).toBe(1);
    await waitFor(async () => {
      const row = await delivery(t, older.deliveryId);
      return row.status === 'dead' && row.attempts === 4 && row.lease_until === null;
    }, 'the recovered delivery to be dead again');
    expect((await attemptsOf(t, older.deliveryId)).at(-1)).toMatchObject({ attempt_number: 4, trigger: 'scheduled', response_status: 503 });
    expect(receiver.on('/recover-fail')).toHaveLength(1);
    expect((await delivery(t, recent.deliveryId)).attempts).toBe(1);
  });

  it('gives a delivery the removal of the URL ended its unused retries back: it continues its schedule, and openapi.json says which ones are dead after one attempt', async () => {
    const m = await merchantAt('/recover-removed-old');
    // One failed attempt, retrying when the merchant removes the URL: dead, its schedule (three attempts) not used up.
    const ended = await failedDelivery(m.merchantId, 'retrying', 1);
    await t.sql(`INSERT INTO delivery_attempts (delivery_id, attempt_number, trigger, response_status, error, duration_ms)
                 VALUES ($1, 1, 'scheduled', 500, 'HTTP 500', 1)`, [ended.deliveryId]);
    await t.http.delete('/v1/merchant/webhook').set('X-API-Key', m.apiKey).expect(200);
    expect(await delivery(t, ended.deliveryId)).toMatchObject({ status: 'dead', attempts: 1, last_error: 'no webhook URL registered' });
    await registerWebhook(t, m.apiKey, receiver.url('/recover-removed-new'));
    receiver.alwaysFail('/recover-removed-new', 503);
    expect((await recover(m.apiKey, { since: hoursAgo(2) })).body.data.queued).toBe(1);
    await waitFor(async () => {
      const row = await delivery(t, ended.deliveryId);
      return row.status === 'dead' && row.attempts === 3 && row.lease_until === null;
    }, 'the recovered delivery to use up its schedule');
    expect(receiver.on('/recover-removed-new')).toHaveLength(2);

    // The contract tells a merchant which recovered dead deliveries get one attempt only: not these.
    const oneAttempt = recoverDescription().split(/(?<=\.) /).filter((sentence) => /dead again after one failed attempt/.test(sentence));
    expect(oneAttempt).toHaveLength(1);
    expect(oneAttempt[0]).toMatch(/used up/);
    expect(recoverDescription()).toMatch(/retry schedule where it stood[^.]*URL was removed/);
  });

  it('takes deliveries created after since, as the lists do: one created exactly at since is not queued, one a microsecond later is', async () => {
    const m = await merchantAt('/recover-since');
    const atSince = await failedDelivery(m.merchantId, 'dead', 3);
    const after = await failedDelivery(m.merchantId, 'dead', 3);
    const since = hoursAgo(3);
    await t.sql('UPDATE webhook_deliveries SET created_at = $2 WHERE id = $1', [atSince.deliveryId, since]);
    await t.sql("UPDATE webhook_deliveries SET created_at = $2::timestamptz + interval '1 microsecond' WHERE id = $1", [after.deliveryId, since]);
    const res = await recover(m.apiKey, { since, until: hoursAgo(2) });
    expect(res.body.data).toMatchObject({ queued: 1, since });
    await waitFor(async () => (await delivery(t, after.deliveryId)).status === 'delivered', 'the delivery after since recovered');
    expect((await delivery(t, atSince.deliveryId)).status).toBe('dead');
    expect(receiver.on('/recover-since').map((r) => r.headers['x-webhook-id'])).toEqual([after.deliveryId]);
  });

  it('compares since at the microsecond, as the lists do: since .mmm5 leaves out a delivery at .mmm300 and takes one at .mmm700', async () => {
    const m = await merchantAt('/recover-micro');
    const before = await failedDelivery(m.merchantId, 'dead', 3);
    const after = await failedDelivery(m.merchantId, 'dead', 3);
    const ms = hoursAgo(3).slice(0, 23);
    await t.sql('UPDATE webhook_deliveries SET created_at = $2 WHERE id = $1', [before.deliveryId, `${ms}300Z`]);
    await t.sql('UPDATE webhook_deliveries SET created_at = $2 WHERE id = $1', [after.deliveryId, `${ms}700Z`]);
    expect((await recover(m.apiKey, { since: `${ms}5Z`, until: hoursAgo(2) })).body.data.queued).toBe(1);
    await waitFor(async () => (await delivery(t, after.deliveryId)).status === 'delivered', 'the delivery after since recovered');
    expect((await delivery(t, before.deliveryId)).status).toBe('dead');
  });

  it('takes a window narrower than a millisecond: since .mmm1 and until .mmm9 queue the delivery at .mmm600 (was 422 "until must be after since")', async () => {
    const m = await merchantAt('/recover-sub-ms');
    const inside = await failedDelivery(m.merchantId, 'dead', 3);
    const ms = hoursAgo(3).slice(0, 23);
    await t.sql('UPDATE webhook_deliveries SET created_at = $2 WHERE id = $1', [inside.deliveryId, `${ms}600Z`]);
    const res = await recover(m.apiKey, { since: `${ms}1Z`, until: `${ms}9Z` });
    expect(res.status).toBe(200);
    expect(res.body.data.queued).toBe(1);
    await waitFor(async () => (await delivery(t, inside.deliveryId)).status === 'delivered', 'the delivery inside the window recovered');
  });

  it('queues each delivery once when two recover calls race', async () => {
    const m = await merchantAt('/recover-race');
    const dead = await Promise.all([1, 2, 3, 4, 5].map(() => failedDelivery(m.merchantId, 'dead', 1)));
    const [first, second] = await Promise.all([recover(m.apiKey, { since: hoursAgo(2) }), recover(m.apiKey, { since: hoursAgo(2) })]);
    expect(first!.body.data.queued + second!.body.data.queued).toBe(5);
    await waitFor(async () => {
      const rows = await Promise.all(dead.map((d) => delivery(t, d.deliveryId)));
      return rows.every((r) => r.status === 'delivered' && r.attempts === 2);
    }, 'each recovered delivery delivered');
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.on('/recover-race')).toHaveLength(5);
  });

  it.each([
    [{ since: hoursAgo(24 * 7 + 1) }, 'since', 'at most 7 days'],
    [{ since: hoursAgo(2), until: hoursAgo(3) }, 'until', 'after since'],
    // No until: the window would end now, before since; since is the field sent wrong (was 422 naming until).
    [{ since: hoursAgo(-1) }, 'since', 'in the past'],
    [{}, 'since', ''],
    [{ since: 'last tuesday' }, 'since', ''],
    [{ since: hoursAgo(1), extra: true }, 'extra', ''],
  ])('refuses %j with 422 and queues nothing', async (body, field, issue) => {
    const m = await merchantAt('/recover-bad');
    const dead = await failedDelivery(m.merchantId, 'dead', 1);
    const res = await recover(m.apiKey, body);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', request_id: expect.any(String) } });
    expect(res.body.error.details).toContainEqual({ field, issue: expect.stringContaining(issue) });
    expect((await delivery(t, dead.deliveryId)).status).toBe('dead');
  });

  it('needs the webhooks:write scope', async () => {
    const m = await merchantAt('/recover-scope');
    const { apiKey } = await t.issueKey(m.merchantId, ['webhooks:read']);
    const res = await recover(apiKey, { since: hoursAgo(1) });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toContain('webhooks:write');
  });
});

describe('POST /v1/webhooks/test', () => {
  const sendTest = (key: string) => t.http.post('/v1/webhooks/test').set('X-API-Key', key).send({});

  it('sends a signed webhook.test event now, answers with the outcome, and logs it like any delivery', async () => {
    const m = await merchantAt('/test-ok');
    const res = await sendTest(m.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      delivery_id: expect.any(String), event_id: expect.any(String), url: receiver.url('/test-ok'),
      delivered: true, response_status: 200, duration_ms: expect.any(Number), error: null,
    });
    const [req] = receiver.on('/test-ok');
    expect(req!.headers['x-event-type']).toBe('webhook.test');
    const event = new Webhook(m.secret).verify(req!.body, req!.headers as Record<string, string>);
    expect(event).toEqual({
      id: res.body.data.event_id, type: 'webhook.test', created_at: expect.any(String),
      // The text openapi.json's x-webhooks example shows.
      data: { message: (OUTBOUND_WEBHOOK_EVENTS['webhook.test'].example.data as { message: string }).message, merchant_id: m.merchantId },
    });
    expect(verifyWebhook(req!.body, req!.headers, m.secret).type).toBe('webhook.test');

    const log = await t.http.get(`/v1/webhooks/logs/${res.body.data.delivery_id}`).set('X-API-Key', m.apiKey);
    expect(log.body.data).toMatchObject({ event_type: 'webhook.test', status: 'delivered', payment_id: null, attempts: 1 });
    expect(log.body.data.attempt_history).toHaveLength(1);
    const listed = await t.http.get('/v1/webhooks/logs?event_type=webhook.test').set('X-API-Key', m.apiKey);
    expect(listed.body.data.map((d: { id: string }) => d.id)).toEqual([res.body.data.delivery_id]);
    const events = await t.http.get('/v1/events?type=webhook.test').set('X-API-Key', m.apiKey);
    expect(events.body.data.map((e: { id: string }) => e.id)).toEqual([res.body.data.event_id]);
  });

  it('reports a failing endpoint without retrying it: the delivery is dead at once', async () => {
    const m = await merchantAt('/test-fail');
    receiver.alwaysFail('/test-fail', 500);
    const res = await sendTest(m.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ delivered: false, response_status: 500, error: 'HTTP 500' });
    const row = await delivery(t, res.body.data.delivery_id);
    expect(row).toMatchObject({ status: 'dead', attempts: 1, next_attempt_at: null });
    await new Promise((r) => setTimeout(r, 1500)); // two sweeper periods: nothing re-sends it
    expect(receiver.on('/test-fail')).toHaveLength(1);
  });

  it('a failed test event that recover queues again gets one attempt, and is dead again when it fails: no retry schedule', async () => {
    const m = await merchantAt('/test-recovered');
    receiver.alwaysFail('/test-recovered', 500);
    const sent = await sendTest(m.apiKey);
    expect(sent.body.data).toMatchObject({ delivered: false, response_status: 500 });
    expect((await recover(m.apiKey, { since: hoursAgo(1) })).body.data.queued).toBe(1);
    await waitFor(async () => {
      const row = await delivery(t, sent.body.data.delivery_id);
      return row.status === 'dead' && row.attempts === 2 && row.lease_until === null;
    }, 'the recovered test delivery to be dead again');
    await new Promise((r) => setTimeout(r, 1500)); // longer than the whole retry schedule (100ms,100ms) and two sweeps
    expect(receiver.on('/test-recovered')).toHaveLength(2);
    expect((await delivery(t, sent.body.data.delivery_id)).next_attempt_at).toBeNull();
  });

  it('is still delivered, by the sweeper, when the process that recorded it died before sending', async () => {
    const m = await merchantAt('/test-orphan');
    const { em } = t.service.container.orm;
    // What POST /v1/webhooks/test writes before it sends, with a short lease; then nothing (the process "died").
    const recorded = await t.inContext(() => em.transactional((tx) => recordTestEvent(tx, m.merchantId, receiver.url('/test-orphan'), 200)));
    const row = await waitFor(async () => {
      const d = await delivery(t, recorded.deliveryId);
      return d.status === 'delivered' ? d : null;
    }, 'the orphaned test delivery');
    expect(row.attempts).toBe(1);
    expect(receiver.on('/test-orphan').map((r) => r.headers['webhook-id'])).toEqual([recorded.deliveryId]);
  });

  it('answers 409 when no webhook URL is registered, and needs webhooks:write', async () => {
    const m = await t.createMerchant('No URL');
    const res = await sendTest(m.apiKey);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ success: false, error: { code: 'CONFLICT', message: expect.stringContaining('PUT /v1/merchant/webhook') } });
    expect(await t.sql('SELECT 1 FROM events WHERE merchant_id = $1', [m.merchantId])).toHaveLength(0);
    const { apiKey } = await t.issueKey(m.merchantId, ['webhooks:read']);
    expect((await sendTest(apiKey)).status).toBe(403);
  });
});
