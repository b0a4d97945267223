import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { drainDue } from './drain-due.js';

export const ABANDON_FAILED_JOB = 'payments.abandon-due';

/** Repeating job: cancels at the provider what failed payments left open there, batch after batch (drain-due.ts; see AbandonFailedService). */
export function defineAbandonFailedJob(container: JobContext): void {
  defineJob(container, ABANDON_FAILED_JOB, (_data, job) => drainDue(container, job, (run) => container.services.abandonFailed.abandonDue(run)), { concurrency: 1 });
}

export async function scheduleAbandonFailed(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.statusSyncPollMs, ABANDON_FAILED_JOB, {}, { skipImmediate: false });
}
