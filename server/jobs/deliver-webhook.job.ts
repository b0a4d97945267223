import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { DELIVER_WEBHOOK_JOB, type DeliverWebhookData } from './delivery-queue.js';

/**
 * One scheduled delivery attempt; a failure that leaves the delivery retrying books the next job.
 * The attempt history lives in delivery_attempts, so finished job rows are removed.
 */
export function defineDeliverWebhookJob(container: JobContext): void {
  defineJob<DeliverWebhookData>(container, DELIVER_WEBHOOK_JOB, async (data) => {
    if (typeof data?.deliveryId !== 'string') return;
    const outcome = await container.services.deliveries.attemptScheduled(data.deliveryId);
    // If the process dies before this, the sweeper finds the due row.
    if (outcome?.status === 'retrying' && outcome.nextAttemptAt) {
      await container.deliveryQueue.scheduleAt(data.deliveryId, outcome.nextAttemptAt);
    }
  }, { removeOnComplete: true });
}
