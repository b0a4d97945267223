import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';

export const PRUNE_PROVIDER_EVENTS_JOB = 'provider-events.prune';

/** Deletes provider notifications' inbox entries past PROVIDER_EVENT_RETENTION (see InboxRetention.prune). */
export function definePruneProviderEventsJob(container: JobContext): void {
  defineJob(container, PRUNE_PROVIDER_EVENTS_JOB, async () => {
    const deleted = await container.services.inboxRetention.prune();
    if (deleted > 0) container.logger.info({ deleted }, 'pruned provider notifications past the retention period');
  }, { concurrency: 1 });
}

/** One repeating row for every worker, every EVENT_PRUNE_INTERVAL. */
export async function schedulePruneProviderEvents(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.eventPruneIntervalMs, PRUNE_PROVIDER_EVENTS_JOB, {});
}
