import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

/**
 * A manual retry (POST /v1/webhooks/logs/{id}/retry) or a test event (POST /v1/webhooks/test) holds a
 * delivery's lease and a place in its merchant's in-flight share while its request is under way; the
 * workers' claims skip what it holds. Once it is answered, the workers are woken: a scheduled attempt
 * that fell due meanwhile goes out within moments, not at the next poll or sweep (an hour here, so only
 * a wake-up sends it within the test).
 */

let t: TestService;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService({
    DELIVERY_SWEEP_INTERVAL: '1h',
    WEBHOOK_RETRY_SCHEDULE: '2s,1h',
    // The endpoint takes its time below, as long as the test holds it.
    WEBHOOK_TIMEOUT_MS: '30000',
    WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: '1',
  });
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

/** Longer than a wake-up takes on a loaded 2-CPU machine; far shorter than the hour of the poll and the sweep. */
const SOON_MS = 10_000;

async function merchantAt(path: string) {
  const m = await t.createMerchant(`Shop ${path}`);
  await registerWebhook(t, m.apiKey, receiver.url(path));
  return m;
}

/** The retry jobs booked for the delivery that have not run yet. */
const retryJobsWaiting = (deliveryId: string) =>
  t.sql(`SELECT 1 FROM agenda_jobs WHERE name = 'webhook.deliver' AND data->>'deliveryId' = $1 AND last_finished_at IS NULL`, [deliveryId]);

describe('the workers are woken once a manual attempt is answered', () => {
  it('a manual retry that fails while the scheduled retry falls due: the scheduled retry reaches the endpoint within seconds of the manual one\'s answer', async () => {
    const m = await merchantAt('/retry');
    receiver.failNext('/retry', 1, 500);
    const { deliveryId } = await emitEvent(t, m.merchantId);
    await waitFor(async () => (await delivery(t, deliveryId)).status === 'retrying', 'the first attempt failed');
    await waitFor(async () => (await retryJobsWaiting(deliveryId)).length === 1, 'the retry booked, due in 2 s');

    // Before it is due the merchant retries by hand; the endpoint holds that request.
    const release = receiver.holdNext('/retry');
    const manual = t.http.post(`/v1/webhooks/logs/${deliveryId}/retry`).set('X-API-Key', m.apiKey).then((r) => r);
    await waitFor(async () => receiver.on('/retry').length === 2, 'the manual retry at the endpoint');
    // The scheduled retry falls due meanwhile: its job runs and finds the delivery being sent.
    await waitFor(async () => (await retryJobsWaiting(deliveryId)).length === 0, 'the retry job run', 20_000);
    expect((await t.sql<{ due: boolean }>('SELECT next_attempt_at <= now() AS due FROM webhook_deliveries WHERE id = $1', [deliveryId]))[0]!.due).toBe(true);

    release(502);
    const answered = await manual;
    expect(answered.status).toBe(200);
    expect(answered.body.data).toMatchObject({ status: 'retrying', attempts: 2, last_response_status: 502 });

    await waitFor(async () => receiver.on('/retry').length === 3, 'the scheduled retry at the endpoint', SOON_MS);
    const done = await waitFor(async () => {
      const d = await delivery(t, deliveryId);
      return d.status === 'delivered' ? d : null;
    }, 'the delivery delivered', SOON_MS);
    expect(done.attempts).toBe(3);
    expect((await attemptsOf(t, deliveryId)).map((a) => [a.attempt_number, a.trigger, a.response_status])).toEqual([
      [1, 'scheduled', 500],
      [2, 'manual', 502],
      [3, 'scheduled', 200],
    ]);
  });

  it('a test event holding the merchant\'s in-flight share: the event held back meanwhile reaches the endpoint within seconds of the test\'s answer', async () => {
    const m = await merchantAt('/test-event');
    const release = receiver.holdNext('/test-event');
    const test = t.http.post('/v1/webhooks/test').set('X-API-Key', m.apiKey).then((r) => r);
    await waitFor(async () => receiver.on('/test-event').length === 1, 'the test event at the endpoint');

    // A payment's event, the workers woken for it: the merchant's share (1) is the test event's, so it waits.
    const { deliveryId } = await emitEvent(t, m.merchantId);
    await new Promise((r) => setTimeout(r, 1000));
    expect(receiver.on('/test-event')).toHaveLength(1);
    expect((await delivery(t, deliveryId)).status).toBe('pending');

    release(200);
    const answered = await test;
    expect(answered.status).toBe(200);

    await waitFor(async () => receiver.on('/test-event').length === 2, 'the held-back event at the endpoint', SOON_MS);
    expect(receiver.on('/test-event')[1]!.headers['x-webhook-id']).toBe(deliveryId);
    await waitFor(async () => (await delivery(t, deliveryId)).status === 'delivered', 'the delivery delivered', SOON_MS);
  });
});
