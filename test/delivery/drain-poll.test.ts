import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DeliveryDrainer } from '../../server/jobs/delivery-drainer.js';
import { startTestService, type TestService } from '../support/service.js';
import { delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

// A drain loop that never hears a wake-up: this service serves the API only (no worker, no listener,
// no sweeper), and the deliveries are committed without their NOTIFY. The loop's own fallback claim
// is all that can send them.

let t: TestService;
let receiver: WebhookReceiver;
let drainer: DeliveryDrainer | null = null;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService({ ROLE: 'api' });
});
afterAll(async () => {
  await drainer?.stop();
  await t.stop();
  await receiver.stop();
});

const delivered = (id: string) =>
  waitFor(async () => {
    const row = await delivery(t, id);
    return row.status === 'delivered' ? row : null;
  }, `delivery ${id} to be delivered`, 30_000);

describe('the drain loop with no wake-ups', () => {
  it('sends deliveries that became due after its last claim, on its fallback poll', async () => {
    const m = await t.createMerchant('Unwoken');
    await registerWebhook(t, m.apiKey, receiver.url('/unwoken'));
    drainer = new DeliveryDrainer(t.service.container, { maxInFlight: 4, retryMs: 100, pollMs: 500, reclaimAfterRecorded: 4 });
    drainer.start();

    const first = await emitEvent(t, m.merchantId, { notify: false });
    await delivered(first.deliveryId);
    // Committed after the claim that sent the first one; nothing tells the loop about it.
    const second = await emitEvent(t, m.merchantId, { notify: false });
    await delivered(second.deliveryId);

    expect(receiver.on('/unwoken').map((r) => r.headers['x-webhook-id'])).toEqual([first.deliveryId, second.deliveryId]);
  }, 60_000);
});
