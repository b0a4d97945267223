import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { startTestService, type TestService } from '../support/service.js';
import { delivery, emitEvent, registerWebhook } from '../delivery/events.js';
import { WebhookReceiver, waitFor } from '../delivery/receiver.js';

/**
 * One merchant's endpoint hanging must not page the operator as "the workers are down": its deliveries
 * wait on its own in-flight share (WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT), not on the workers, which go on
 * sending every other merchant's. webhook_delivery_lag_seconds (PaymentsWebhookBacklog, critical) leaves
 * them out; webhook_merchants_held_by_share counts such merchants.
 */

let t: TestService;
let receiver: WebhookReceiver;
let release: ((status: number) => void) | null = null;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService({ WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT: '1', WEBHOOK_TIMEOUT_MS: '60000' });
});
afterAll(async () => {
  release?.(200);
  await t.stop();
  await receiver.stop();
});

it("leaves a hanging merchant's waiting deliveries out of the delivery lag and counts the merchant as held by its share", async () => {
  const hanging = await t.createMerchant('Hanging endpoint');
  await registerWebhook(t, hanging.apiKey, receiver.url('/hanging'));
  release = receiver.holdNext('/hanging');
  const inFlight = await emitEvent(t, hanging.merchantId);
  await waitFor(async () => receiver.on('/hanging').length === 1, 'the first attempt to reach the hanging endpoint');
  const waiting = [await emitEvent(t, hanging.merchantId), await emitEvent(t, hanging.merchantId)];

  const healthy = await t.createMerchant('Healthy endpoint');
  await registerWebhook(t, healthy.apiKey, receiver.url('/healthy'));
  const sent = [await emitEvent(t, healthy.merchantId), await emitEvent(t, healthy.merchantId)];
  for (const { deliveryId } of sent) await waitFor(async () => (await delivery(t, deliveryId)).status === 'delivered', 'the healthy merchant\'s deliveries');

  // The hanging merchant's two have waited over 2 s (the database's clock), behind its one attempt in flight.
  const [oldest] = await t.sql<{ waited: number }>('SELECT extract(epoch FROM now() - min(next_attempt_at))::float8 AS waited FROM webhook_deliveries WHERE id = ANY($1)', [waiting.map((w) => w.deliveryId)]);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, 2_500 - oldest!.waited * 1000)));
  expect(receiver.on('/hanging')).toHaveLength(1);
  expect((await delivery(t, inFlight.deliveryId)).lease_until).not.toBeNull();

  // The gauges are read at most every 5 s: wait for a read that sees the two held.
  const scraped = await waitFor(async () => {
    const s = await scrapeMetrics(t);
    return total(s, 'webhook_merchants_held_by_share') === 1 ? s : null;
  }, 'a metrics read counting the held merchant');
  expect(total(scraped, 'webhook_delivery_lag_seconds')).toBe(0);
  expect(total(scraped, 'webhook_deliveries', { status: 'pending' })).toBe(3);

  // Once the endpoint answers, they go out and nothing is held.
  release(200);
  release = null;
  for (const { deliveryId } of waiting) await waitFor(async () => (await delivery(t, deliveryId)).status === 'delivered', 'the held deliveries once the endpoint answers');
  await waitFor(async () => total(await scrapeMetrics(t), 'webhook_merchants_held_by_share') === 0 || null, 'nothing held');
}, 60_000);
