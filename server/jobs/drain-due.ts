import type { Job } from 'agenda';
import { newDrainRun, type ClaimedBatch, type DrainRun } from '../domain/payments/sync-schedule.js';
import type { JobContext } from './job-context.js';

/**
 * The body of a repeating job that works off due rows in batches (status sync, refund sync, cancelling
 * failed payments at their provider). Agenda's `every` keeps one row per job name, run by one worker at
 * a time: one batch a run would cap the whole service at one batch per STATUS_SYNC_POLL_INTERVAL however
 * many workers run, and a backlog (a provider outage, a day of abandoned checkouts) would only grow. So a
 * run claims batch after batch until
 * - a batch claims nothing, or every check it started threw (an error of ours: the database, say); the
 *   next run tries again. A provider every check of which in a batch met it unavailable (or threw) is not
 *   asked again in the run: the run does not go on hammering a provider that is down, nor spend every due
 *   row's next schedule step on an outage, while the other providers' rows go on (an outage of one must
 *   not hold back the others' re-checks for as long as its backlog is due first). Likewise an account
 *   (merchant and provider) that answers "too many requests" (its limit is also the merchant's own live
 *   requests') is not asked again in the run, the other accounts' rows go on (DrainRun),
 * - the job's interval has passed (the next run carries on; the run never outlasts half the job's lock
 *   lifetime, after which Agenda would cancel it and let another worker take the job),
 * - or the process is stopping: no further check starts, not even of the batch under way (each may wait
 *   PROVIDER_TIMEOUT_MS on a provider that hangs, and the stop gives the jobs SHUTDOWN_TIMEOUT_MS less
 *   3 s); the checks under way finish, and the rows not started come back when their claim (5 minutes)
 *   runs out, as after a crash.
 * `claimBatch` claims and checks one batch as `run` allows.
 */
export async function drainDue(container: JobContext, job: Job, claimBatch: (run: DrainRun) => Promise<ClaimedBatch>): Promise<void> {
  const lockLifetimeMs = job.agenda.definitions[job.attrs.name]!.lockLifetime;
  const deadline = Date.now() + Math.min(container.config.statusSyncPollMs, lockLifetimeMs / 2);
  const run: DrainRun = newDrainRun(() => container.draining);
  while (!container.draining) {
    const { due, started, failed } = await claimBatch(run);
    if (due === 0 || (started > 0 && failed === started) || Date.now() >= deadline) return;
  }
}
