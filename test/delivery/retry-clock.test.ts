import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver, waitFor } from './receiver.js';

// A retry job fired by a worker whose clock runs ahead of the database's: the delivery is not yet due
// by the database, so the attempt is refused. The job must not just end (leaving the retry to the
// sweeper's next pass): it books itself again for the due time. (A longer sweep interval would show
// the lost retry as a late delivery, but Agenda 6.2.6 keeps a timer of half the sweep's lock lifetime
// alive after the sweep runs, which holds an in-process test for that long at exit.)

let t: TestService;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService();
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

describe('a retry job that runs before the delivery is due by the database clock', () => {
  it('books itself again and the retry is sent once due, not before', async () => {
    const m = await t.createMerchant('Early clock');
    await registerWebhook(t, m.apiKey, receiver.url('/early'));
    // A first attempt failed; the retry is due in 10 s by the database's clock.
    const { deliveryId } = await emitEvent(t, m.merchantId, {
      notify: false,
      adjust: (tx, ids) =>
        tx.execute(
          `UPDATE webhook_deliveries SET status = 'retrying', attempts = 1, last_response_status = 503,
             next_attempt_at = now() + interval '10 seconds' WHERE id = ?`,
          [ids.deliveryId],
        ),
    });
    const dueAt = (await delivery(t, deliveryId)).next_attempt_at!;
    // Its job, as a worker 10 s ahead of the database books it: to run now by this clock.
    await t.service.container.deliveryQueue.scheduleAt(deliveryId, new Date(dueAt), new Date());

    // It ran, was refused, and the attempt is booked again for the due time.
    const rebooked = await waitFor(async () => {
      const jobs = await t.sql<{ at: Date }>(
        `SELECT next_run_at AS at FROM agenda_jobs WHERE name = 'webhook.deliver' AND data->>'deliveryId' = $1 AND next_run_at > now() + interval '1 second'`,
        [deliveryId],
      );
      return jobs[0] ?? null;
    }, 'the retry job to be booked again', 8_000);
    expect(Math.abs(rebooked.at.getTime() - new Date(dueAt).getTime())).toBeLessThan(1_000);

    const row = await waitFor(async () => {
      const r = await delivery(t, deliveryId);
      return r.status === 'delivered' ? r : null;
    }, 'the retry to be delivered', 30_000);
    expect(row.attempts).toBe(2);
    expect(receiver.on('/early')).toHaveLength(1);
    const sentAt = await t.sql<{ early: boolean }>(
      `SELECT created_at < $2::timestamptz AS early FROM delivery_attempts WHERE delivery_id = $1`,
      [deliveryId, dueAt],
    );
    expect(sentAt).toEqual([{ early: false }]);
    expect(await attemptsOf(t, deliveryId)).toHaveLength(1);
  }, 60_000);
});
