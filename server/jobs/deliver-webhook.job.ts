import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { DELIVER_WEBHOOK_JOB, type DeliverWebhookData } from './delivery-queue.js';

/**
 * One scheduled delivery attempt; a failure that leaves the delivery retrying books the next job.
 * The attempt history lives in delivery_attempts, so finished job rows are removed.
 *
 * Agenda runs a job by the worker's clock, the lease checks the due time by the database's: a worker
 * whose clock runs ahead finds the delivery not yet due. That job books itself again for when the
 * database says the delivery is due (counted from now on this worker's clock), instead of ending with
 * nothing booked and leaving the retry to the sweeper. A job for a due time the delivery no longer has
 * (it was sent, re-queued or rescheduled meanwhile) just ends.
 */
export function defineDeliverWebhookJob(container: JobContext): void {
  defineJob<DeliverWebhookData>(container, DELIVER_WEBHOOK_JOB, async (data) => {
    if (typeof data?.deliveryId !== 'string') return;
    const { deliveries } = container.services;
    const outcome = await deliveries.attemptScheduled(data.deliveryId);
    // If the process dies before this, the sweeper finds the due row.
    if (outcome?.status === 'retrying' && outcome.nextAttemptAt) {
      await container.deliveryQueue.scheduleAt(data.deliveryId, outcome.nextAttemptAt);
      return;
    }
    if (outcome) return;
    const dueAt = typeof data.dueAt === 'string' && !Number.isNaN(Date.parse(data.dueAt)) ? new Date(data.dueAt) : null;
    const later = await deliveries.msUntilDue(data.deliveryId, dueAt);
    if (!later) return;
    container.logger.info({ deliveryId: data.deliveryId, waitMs: later.waitMs }, 'webhook retry job ran before the delivery was due by the database clock; booked again');
    await container.deliveryQueue.scheduleAt(data.deliveryId, later.dueAt, new Date(Date.now() + later.waitMs));
  }, { removeOnComplete: true });
}
