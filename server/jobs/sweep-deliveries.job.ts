import type { Container } from '../container.js';
import { defineJob } from './define-job.js';

export const SWEEP_DELIVERIES_JOB = 'webhook.sweep';

/** How long past due a delivery must be before the sweeper assumes its job was lost. */
const SWEEP_GRACE_MS = 2_000;

/**
 * Re-enqueues deliveries that are due but have no job: the process died between the outbox commit and
 * the enqueue, between an attempt and booking the next one, or mid-attempt (its lease expired).
 */
export function defineSweepDeliveriesJob(container: Container): void {
  defineJob(container, SWEEP_DELIVERIES_JOB, async () => {
    const ids = await container.services.deliveries.findStranded(SWEEP_GRACE_MS);
    if (ids.length === 0) return;
    container.logger.info({ count: ids.length }, 're-enqueuing stranded webhook deliveries');
    await container.deliveryQueue.enqueue(ids);
  }, { concurrency: 1 });
}

/** One repeating row for every worker: Agenda's `every` upserts a single job by name. */
export async function scheduleDeliverySweep(container: Container): Promise<void> {
  await container.agenda.every(container.config.deliverySweepIntervalMs, SWEEP_DELIVERIES_JOB, {});
}
