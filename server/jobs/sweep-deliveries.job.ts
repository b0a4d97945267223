import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';

export const SWEEP_DELIVERIES_JOB = 'webhook.sweep';

/** How long past due a delivery must be before the sweeper assumes no worker is taking it. */
const SWEEP_GRACE_MS = 2_000;

/**
 * Agenda keeps a job locked until its lock lifetime passes (10 minutes by default) when the worker
 * holding it dies, and workers lock the sweep ahead of its run: a crashed worker would stop the
 * sweeper, the very thing that rescues its stranded deliveries, for that long. A sweep takes well
 * under a second, so its lock lasts two intervals (at least 10 s): recovery waits at most that.
 */
export function sweepLockLifetimeMs(intervalMs: number): number {
  return Math.max(2 * intervalMs, 10_000);
}

/**
 * The safety net for deliveries due that nobody took: the wake-up after their commit reached no
 * listening worker (or was never sent: the writer stopped first), the process died between an attempt
 * and booking its retry job, or mid-attempt (its lease expired). Wakes every worker's drain loop, which
 * leases and sends whatever is due.
 */
export function defineSweepDeliveriesJob(container: JobContext): void {
  defineJob(container, SWEEP_DELIVERIES_JOB, async () => {
    const ids = await container.services.deliveries.findStranded(SWEEP_GRACE_MS);
    if (ids.length === 0) return;
    container.logger.info({ count: ids.length }, 'waking the workers for stranded webhook deliveries');
    await container.deliveryQueue.wakeWorkers();
  }, { concurrency: 1, lockLifetime: sweepLockLifetimeMs(container.config.deliverySweepIntervalMs) });
}

/** One repeating row for every worker: Agenda's `every` upserts a single job by name. */
export async function scheduleDeliverySweep(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.deliverySweepIntervalMs, SWEEP_DELIVERIES_JOB, {});
}
