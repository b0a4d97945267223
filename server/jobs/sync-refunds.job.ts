import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { drainDue } from './drain-due.js';

export const SYNC_REFUNDS_JOB = 'refunds.sync-due';

/** Repeating job: re-checks due pending refunds with their provider, batch after batch (drain-due.ts; see RefundSyncService). */
export function defineSyncRefundsJob(container: JobContext): void {
  defineJob(container, SYNC_REFUNDS_JOB, (_data, job) => drainDue(container, job, (run) => container.services.refundSync.syncDue(run)), { concurrency: 1 });
}

export async function scheduleSyncRefunds(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.statusSyncPollMs, SYNC_REFUNDS_JOB, {}, { skipImmediate: false });
}
