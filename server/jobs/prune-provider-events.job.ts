import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';

export const PRUNE_PROVIDER_EVENTS_JOB = 'provider-events.prune';

/**
 * Deletes, past PROVIDER_EVENT_RETENTION, provider notifications' inbox entries (see InboxRetention.prune)
 * and the status queries sent to providers (see StatusQueryRetention.prune).
 */
export function definePruneProviderEventsJob(container: JobContext): void {
  defineJob(container, PRUNE_PROVIDER_EVENTS_JOB, async () => {
    const deleted = await container.services.inboxRetention.prune();
    if (deleted > 0) container.logger.info({ deleted }, 'pruned provider notifications past the retention period');
    const queries = await container.services.statusQueryRetention.prune();
    if (queries > 0) container.logger.info({ deleted: queries }, 'pruned provider status queries past the retention period');
  }, { concurrency: 1 });
}

/** One repeating row for every worker, every EVENT_PRUNE_INTERVAL. */
export async function schedulePruneProviderEvents(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.eventPruneIntervalMs, PRUNE_PROVIDER_EVENTS_JOB, {});
}
