import type { Job } from 'agenda';
import type { ClaimedBatch } from '../domain/payments/sync-schedule.js';
import type { JobContext } from './job-context.js';

/**
 * The body of a repeating job that works off due rows in batches (status sync, refund sync, cancelling
 * failed payments at their provider). Agenda's `every` keeps one row per job name, run by one worker at
 * a time: one batch a run would cap the whole service at one batch per STATUS_SYNC_POLL_INTERVAL however
 * many workers run, and a backlog (a provider outage, a day of abandoned checkouts) would only grow. So a
 * run claims batch after batch until
 * - a batch claims nothing, or every check of it threw (its rows wait for their claim to run out; the
 *   run does not go on to hammer a broken dependency),
 * - the job's interval has passed (the next run carries on; the run never outlasts half the job's lock
 *   lifetime, after which Agenda would cancel it and let another worker take the job),
 * - or the process is stopping: the batch under way finishes within the graceful stop, no other starts.
 */
export async function drainDue(container: JobContext, job: Job, claimBatch: () => Promise<ClaimedBatch>): Promise<void> {
  const lockLifetimeMs = job.agenda.definitions[job.attrs.name]!.lockLifetime;
  const deadline = Date.now() + Math.min(container.config.statusSyncPollMs, lockLifetimeMs / 2);
  while (!container.draining) {
    const { claimed, failed } = await claimBatch();
    if (failed === claimed || Date.now() >= deadline) return;
  }
}
