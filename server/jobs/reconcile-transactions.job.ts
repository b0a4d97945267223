import type { Provider } from '../../contract/index.js';
import { defineJob } from './define-job.js';
import type { JobContext, ReconciliationScheduling } from './job-context.js';

/** One job name per provider that lists its settled transactions, e.g. `mobilemoney.reconcile`. */
export const reconcileJobName = (provider: Provider) => `${provider}.reconcile`;

interface ReconcileJobData {
  merchantId: string;
}

/** The providers whose port can list settled transactions (ProviderOperations.listTransactions). */
export function reconcilingProviders(jobs: Pick<JobContext, 'providers'>): Provider[] {
  return jobs.providers.all().filter((p) => p.operations?.listTransactions).map((p) => p.name);
}

/**
 * Automatic reconciliation (interface.md "Limits"): one repeating Agenda job per merchant and provider
 * with credentials, every MOBILEMONEY_RECONCILE_INTERVAL (15 minutes), pulling the last 2 hours (from 2
 * hours before the last successful pull's end when that is earlier: ProviderOperationsService.reconcileAutomatically)
 * and settling payments still pending. The job row is unique per merchant, so any number of workers (and
 * repeated scheduling) keep exactly one.
 */
export function defineReconcileTransactionsJobs(jobs: JobContext): void {
  for (const provider of reconcilingProviders(jobs)) {
    defineJob<ReconcileJobData>(jobs, reconcileJobName(provider), async ({ merchantId }) => {
      const ops = jobs.services.operations;
      // Left behind by a credentials delete whose unscheduling failed (CredentialsService.remove): it goes now.
      if (!(await ops.hasCredentials(merchantId, provider))) {
        await alignReconciliation(jobs.reconcileScheduling, provider, merchantId);
        return;
      }
      const report = await ops.reconcileAutomatically(merchantId, provider);
      const mismatched = report.results.filter((r) => r.reason).length;
      jobs.logger.info({ merchantId, provider, since: report.since, pulled: report.pulled, updated: report.updated, skipped: report.skipped, mismatched, not_found: report.not_found }, `automatic ${provider} reconciliation`);
    }, { concurrency: 2 });
  }
}

/**
 * Agenda's `unique()` save is a SELECT then an INSERT, so two processes scheduling one merchant at once
 * (credentials stored through two api processes, workers booting together) would both insert. The
 * merchant's advisory lock makes the check-and-insert one step across processes.
 */
const SCHEDULE_LOCK_WAIT_MS = 30_000;
export const scheduleLockKey = (provider: Provider, merchantId: string) => `${provider}-reconcile-job:${merchantId}`;

/**
 * Makes the merchant's job exist exactly while the merchant has credentials, deciding from the
 * credentials read under the lock, never from what the caller saw before it: a worker's periodic
 * scheduling that listed the merchant before a delete, or a store's hook that runs after a later delete,
 * would otherwise put the job back for a merchant without credentials (and a delete's cancel, after a
 * later store, take it away from one with them).
 */
export async function alignReconciliation(s: ReconciliationScheduling, provider: Provider, merchantId: string): Promise<void> {
  await s.keyLock.withLock(scheduleLockKey(provider, merchantId), SCHEDULE_LOCK_WAIT_MS, async () => {
    if (!(await s.hasCredentials(merchantId, provider))) {
      await s.agenda.cancel({ name: reconcileJobName(provider), data: { merchantId } });
      return;
    }
    // Saved again, a unique repeating job gets a new next run (now + interval): every store of the
    // credentials and every worker start would put the merchant's reconciliation off by another interval.
    const { intervalMs } = s;
    const { jobs: [existing] } = await s.agenda.queryJobs({ name: reconcileJobName(provider), data: { merchantId }, limit: 1 });
    if (existing && String(existing.repeatInterval) === String(intervalMs)) return;
    await s.agenda
      .create<ReconcileJobData>(reconcileJobName(provider), { merchantId })
      .unique({ 'data.merchantId': merchantId })
      .repeatEvery(intervalMs, { skipImmediate: true })
      .save();
  });
}

/**
 * At worker start and every interval after: every merchant with credentials of a reconciling provider has
 * its job (idempotent; a job already there is left as it is). The repeat puts back a job whose scheduling
 * failed after the credentials were stored (CredentialsService.write).
 */
export async function scheduleAllReconciliations(jobs: JobContext): Promise<void> {
  for (const provider of reconcilingProviders(jobs)) {
    for (const merchantId of await jobs.services.operations.merchantsWithCredentials(provider)) {
      // One merchant whose lock stays taken (30 s) must not leave every merchant after it unscheduled for an interval.
      await alignReconciliation(jobs.reconcileScheduling, provider, merchantId).catch((err: Error) =>
        jobs.logger.warn({ merchantId, provider, err: { message: err.message } }, 'scheduling a merchant\'s reconciliation failed; the next pass tries again'),
      );
    }
  }
}

export const SCHEDULE_RECONCILIATIONS_JOB = 'reconcile.schedule';

export function defineScheduleReconciliationsJob(jobs: JobContext): void {
  defineJob(jobs, SCHEDULE_RECONCILIATIONS_JOB, () => scheduleAllReconciliations(jobs), { concurrency: 1 });
}

/**
 * Every MOBILEMONEY_RECONCILE_INTERVAL, and once now, every merchant's job is scheduled — by the job (one
 * row for every worker), not in the boot: going through every merchant, each under its lock, would make a
 * worker's boot as long as the merchant list (and fail it when one merchant's lock stays taken 30 s).
 */
export async function scheduleReconciliations(jobs: JobContext): Promise<void> {
  const repeating = await jobs.agenda.every(jobs.config.mobilemoneyReconcileIntervalMs, SCHEDULE_RECONCILIATIONS_JOB, {}, { skipImmediate: true });
  // Due now (one run however many workers boot together); its next run is then an interval after it.
  await repeating.schedule(new Date()).save();
}
