import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';

export const PRUNE_RATE_LIMIT_WINDOWS_JOB = 'rate-limit-windows.prune';

/** Deletes rate-limit windows that have ended (see RateLimitRetention.prune). */
export function definePruneRateLimitWindowsJob(container: JobContext): void {
  defineJob(container, PRUNE_RATE_LIMIT_WINDOWS_JOB, async () => {
    const deleted = await container.services.rateLimitRetention.prune();
    if (deleted > 0) container.logger.debug({ deleted }, 'pruned ended rate-limit windows');
  }, { concurrency: 1 });
}

/** One repeating row for every worker, every RATE_LIMIT_PRUNE_INTERVAL. */
export async function schedulePruneRateLimitWindows(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.rateLimitPruneIntervalMs, PRUNE_RATE_LIMIT_WINDOWS_JOB, {});
}
