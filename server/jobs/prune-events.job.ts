import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { pruneFailedOneOffJobs } from './failed-job-retention.js';

export const PRUNE_EVENTS_JOB = 'events.prune';

/**
 * Deletes events past EVENT_RETENTION with their deliveries, unless one can still go out (see
 * EventLog.prune), and the rows of failed one-off jobs (webhook retries, the simulators' sends) after
 * FAILED_JOB_RETENTION_MS.
 */
export function definePruneEventsJob(container: JobContext): void {
  defineJob(container, PRUNE_EVENTS_JOB, async () => {
    const deleted = await container.services.events.prune();
    if (deleted > 0) container.logger.info({ deleted }, 'pruned events past the retention period');
    const jobs = await pruneFailedOneOffJobs(container.orm.em, container.agenda);
    if (jobs > 0) container.logger.info({ deleted: jobs }, 'pruned failed one-off job rows past their retention');
  }, { concurrency: 1 });
}

/** One repeating row for every worker, every EVENT_PRUNE_INTERVAL. */
export async function schedulePruneEvents(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.eventPruneIntervalMs, PRUNE_EVENTS_JOB, {});
}
