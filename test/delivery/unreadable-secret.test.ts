import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { destination } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { verifyWebhook } from '../../client/index.js';
import { loadConfig } from '../../server/config/config.js';
import { SecretBox } from '../../server/domain/crypto/secret-box.js';
import { createLogger } from '../../server/observability/logger.js';
import { startService, type RunningService } from '../../server/service.js';
import { findSecretsInFiles, inProcessLogFile } from '../support/secret-audit.js';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

// A worker started with the wrong ENCRYPTION_KEY (or a rotation's last step taken before the reseal
// finished) cannot open a merchant's signing secret. That is the operator's key configuration, not the
// merchant's endpoint: the delivery must not spend its retries (and end dead, the merchant's log blaming
// their endpoint) on requests never sent. It is given back unattempted, and a process with the key sends it.

const K1 = randomBytes(32).toString('base64');
const K2 = randomBytes(32).toString('base64');

let t: TestService;
let receiver: WebhookReceiver;
let worker: RunningService | null = null;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  // This process has K2 only.
  t = await startTestService({ ENCRYPTION_KEY: K2 });
});
afterAll(async () => {
  await worker?.stop();
  await t.stop();
  await receiver.stop();
});

const unreadableCount = async () => (await t.service.container.metrics.webhookSecretUnreadable.get()).values[0]?.value ?? 0;

/** The give-back lines written for a merchant (a line per give-back before the log was bounded). */
const giveBackLines = (merchantId: string) =>
  readFileSync(inProcessLogFile(t.databaseUrl), 'utf8').split('\n').filter((line) => line.includes('the delivery is given back unattempted') && line.includes(merchantId)).length;
/** Seconds until each delivery is due again, once none is leased. */
const waitsWhenReleased = (ids: string[]) =>
  waitFor(async () => {
    const rows = await t.sql<{ leased: boolean; wait_s: number }>(
      'SELECT lease_until IS NOT NULL AS leased, extract(epoch FROM next_attempt_at - now())::float AS wait_s FROM webhook_deliveries WHERE id = ANY($1::uuid[])', [ids]);
    return rows.some((r) => r.leased) ? null : rows.map((r) => r.wait_s);
  }, 'the deliveries to be given back');
/** Deliveries a backlog sealed with another key left behind, sent by the worker with the key at the end. */
const backlog: { merchantId: string; secret: string; ids: string[] } = { merchantId: '', secret: '', ids: [] };

describe('a merchant signing secret the worker cannot open', () => {
  it('gives a backlog back less and less often (30 s, 60 s, 120 s …) and logs it once per merchant per minute, counting each give-back', async () => {
    const m = await t.createMerchant('Sealed Backlog');
    const secret = await registerWebhook(t, m.apiKey, receiver.url('/backlog'));
    await t.sql('UPDATE merchants SET webhook_secret_enc = $1 WHERE id = $2', [new SecretBox(K1).seal(secret), m.merchantId]);
    Object.assign(backlog, { merchantId: m.merchantId, secret });
    const before = await unreadableCount();
    for (let i = 0; i < 4; i += 1) backlog.ids.push((await emitEvent(t, m.merchantId, { type: 'payment.completed' })).deliveryId);

    const waits: number[][] = [];
    for (let round = 1; round <= 3; round += 1) {
      await waitFor(async () => ((await unreadableCount()) >= before + 4 * round ? true : null), `give-back round ${round}`);
      waits.push(await waitsWhenReleased(backlog.ids));
      // Due again now (as if the wait were over): the sweeper wakes the drain loop, which claims them again.
      if (round < 3) await t.sql("UPDATE webhook_deliveries SET next_attempt_at = now() - interval '5 seconds' WHERE id = ANY($1::uuid[])", [backlog.ids]);
    }
    // Each give-back in a row waits twice as long as the one before.
    for (const [round, low, high] of [[0, 5, 30], [1, 35, 60], [2, 65, 120]] as const) {
      for (const w of waits[round]!) {
        expect(w).toBeGreaterThan(low);
        expect(w).toBeLessThanOrEqual(high);
      }
    }
    const rows = await t.sql<{ status: string; attempts: number; unsent_releases: number }>(
      'SELECT status, attempts, unsent_releases FROM webhook_deliveries WHERE id = ANY($1::uuid[])', [backlog.ids]);
    expect(rows.map((r) => [r.status, r.attempts, r.unsent_releases])).toEqual(backlog.ids.map(() => ['pending', 0, 3]));
    expect(receiver.on('/backlog')).toEqual([]);
    // Every give-back is counted; the log says it once for the merchant within the minute.
    expect(await unreadableCount()).toBe(before + 12);
    expect(giveBackLines(m.merchantId)).toBe(1);
  }, 60_000);

  it('leaves the delivery pending with no attempt, says so in the log and a metric, and a worker with the key then sends it', async () => {
    const m = await t.createMerchant('Sealed Elsewhere');
    const secret = await registerWebhook(t, m.apiKey, receiver.url('/sealed'));
    // The secret as a process holding K1 sealed it.
    await t.sql('UPDATE merchants SET webhook_secret_enc = $1 WHERE id = $2', [new SecretBox(K1).seal(secret), m.merchantId]);

    const { deliveryId, eventId } = await emitEvent(t, m.merchantId, { type: 'payment.completed' });
    // Handled by this process's drain loop: given back (the fix), or attempted (before it).
    await waitFor(async () => ((await unreadableCount()) > 0 || (await delivery(t, deliveryId)).attempts > 0 ? true : null), 'the worker to take the delivery');
    const row = await waitFor(async () => {
      const r = await delivery(t, deliveryId);
      return r.lease_until === null ? r : null;
    }, 'the lease to be given back');
    expect({ status: row.status, attempts: row.attempts, last_error: row.last_error }).toEqual({ status: 'pending', attempts: 0, last_error: null });
    expect(await attemptsOf(t, deliveryId)).toEqual([]);
    // Due again soon, not now (claiming it again here would only fail again) and not at the retry schedule's pace.
    const [{ wait_s: waitSeconds }] = (await t.sql<{ wait_s: number }>('SELECT extract(epoch FROM next_attempt_at - now())::float AS wait_s FROM webhook_deliveries WHERE id = $1', [deliveryId])) as [{ wait_s: number }];
    expect(waitSeconds).toBeGreaterThan(5);
    expect(waitSeconds).toBeLessThanOrEqual(30);
    expect(receiver.on('/sealed')).toEqual([]);
    expect(await unreadableCount()).toBe(13);
    expect(giveBackLines(m.merchantId)).toBe(1);
    // A test event asked for meanwhile: not sent either, and the answer does not blame the endpoint.
    const test = await t.http.post('/v1/webhooks/test').set('X-API-Key', m.apiKey).send({});
    expect([test.status, test.body.data?.delivered, test.body.data?.response_status]).toEqual([200, false, null]);
    expect(test.body.data.error).toBe('not sent: the service cannot open the webhook signing secret right now (its encryption key configuration, not your endpoint); try again later');
    expect(receiver.on('/sealed')).toEqual([]);
    expect(findSecretsInFiles([inProcessLogFile(t.databaseUrl)], [secret, K1, K2])).toEqual([]);

    // The operator fixes it: this process goes, a worker with K1 comes; the delivery's short wait is over.
    await t.service.stop();
    const config = loadConfig({
      NODE_ENV: 'test', ROLE: 'worker', WORKER_PORT: '0', DATABASE_URL: t.databaseUrl, ENCRYPTION_KEY: K1,
      DATA_DIR: await mkdtemp(path.join(os.tmpdir(), 'payments-test-data-')), DELIVERY_SWEEP_INTERVAL: '1s', LOG_LEVEL: 'info',
    });
    const logger = createLogger('info', destination({ dest: inProcessLogFile(t.databaseUrl), sync: true }));
    worker = await startService(config, { logger, agendaProcessEveryMs: 200, agendaLockLifetimeMs: 5000 });
    await t.sql('UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = ANY($1::uuid[])', [[deliveryId, ...backlog.ids]]);
    const sent = await waitFor(async () => {
      const r = await delivery(t, deliveryId);
      return r.status === 'delivered' ? r : null;
    }, 'the worker with the key to deliver it');
    expect(sent.attempts).toBe(1);
    const [request] = receiver.on('/sealed');
    expect(verifyWebhook(request!.body, request!.headers, secret).id).toBe(eventId);
    // The backlog given back three times goes too, each once, and its count of give-backs starts again.
    await waitFor(async () => (receiver.on('/backlog').length >= backlog.ids.length ? true : null), 'the backlog to be delivered');
    const rows = await t.sql<{ status: string; attempts: number; unsent_releases: number }>(
      'SELECT status, attempts, unsent_releases FROM webhook_deliveries WHERE id = ANY($1::uuid[])', [backlog.ids]);
    expect(rows.map((r) => [r.status, r.attempts, r.unsent_releases])).toEqual(backlog.ids.map(() => ['delivered', 1, 0]));
    const sentIds = receiver.on('/backlog').map((r) => (verifyWebhook(r.body, r.headers, backlog.secret), r.headers['x-webhook-id']));
    expect(sentIds.sort()).toEqual([...backlog.ids].sort());
  }, 60_000);
});
