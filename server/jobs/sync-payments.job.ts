import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { drainDue } from './drain-due.js';

export const SYNC_PAYMENTS_JOB = 'payments.sync-due';

/** Repeating job: re-checks due pending payments with their provider, batch after batch (drain-due.ts; see StatusSyncService). */
export function defineSyncPaymentsJob(container: JobContext): void {
  defineJob(container, SYNC_PAYMENTS_JOB, (_data, job) => drainDue(container, job, (run) => container.services.statusSync.syncDue(run)), { concurrency: 1 });
}

export async function scheduleSyncPayments(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.statusSyncPollMs, SYNC_PAYMENTS_JOB, {}, { skipImmediate: false });
}
