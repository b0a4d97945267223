import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { DELIVER_WEBHOOK_JOB, type DeliverWebhookData } from './delivery-queue.js';

/**
 * A retry's due time: Agenda runs this job when a delivery that failed is due again, and the job wakes
 * the workers' drain loops, which send it with their claims — within the merchant's in-flight share
 * (WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT), as every scheduled attempt, so a merchant's retries cannot add
 * to attempts already holding its share. A merchant at its share gets the retry as one of its attempts
 * is recorded, and a delivery a manual retry holds (leased: the claims skip it) once that retry is
 * answered (DeliveryService wakes the workers); the drain loop's poll and the sweeper pick it up
 * otherwise. The job sends nothing itself;
 * its row is removed once it ran (a run that failed: FAILED_JOB_RETENTION_MS later, by `events.prune`).
 *
 * Agenda runs a job by the worker's clock, the claim checks the due time by the database's: a worker
 * whose clock runs ahead finds the delivery not yet due. That job books itself again for when the
 * database says the delivery is due (counted from now on this worker's clock), instead of waking the
 * workers before it is due and leaving the retry to the sweeper. A job for a due time the delivery no
 * longer has (it was sent, re-queued or rescheduled meanwhile) only wakes the workers, who find nothing of it.
 */
export function defineDeliverWebhookJob(container: JobContext): void {
  defineJob<DeliverWebhookData>(container, DELIVER_WEBHOOK_JOB, async (data) => {
    if (typeof data?.deliveryId !== 'string') return;
    const dueAt = typeof data.dueAt === 'string' && !Number.isNaN(Date.parse(data.dueAt)) ? new Date(data.dueAt) : null;
    const later = await container.services.deliveries.msUntilDue(data.deliveryId, dueAt);
    if (!later) {
      await container.deliveryQueue.enqueue(1);
      return;
    }
    container.logger.info({ deliveryId: data.deliveryId, waitMs: later.waitMs }, 'webhook retry job ran before the delivery was due by the database clock; booked again');
    await container.deliveryQueue.scheduleAt(data.deliveryId, later.dueAt, new Date(Date.now() + later.waitMs));
  }, { removeOnComplete: true });
}
