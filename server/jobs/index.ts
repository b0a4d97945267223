import type { JobContext } from './job-context.js';
import { sandboxModules } from '../sandbox/index.js';
import { defineJob } from './define-job.js';
import { defineAbandonFailedJob, scheduleAbandonFailed } from './abandon-failed.job.js';
import { defineDetachCardsJob, scheduleDetachCards } from './detach-cards.job.js';
import { defineDeliverWebhookJob } from './deliver-webhook.job.js';
import { defineFoldPaymentCountsJob, scheduleFoldPaymentCounts } from './fold-payment-counts.job.js';
import { definePruneEventsJob, schedulePruneEvents } from './prune-events.job.js';
import { definePruneIdempotencyKeysJob, schedulePruneIdempotencyKeys } from './prune-idempotency-keys.job.js';
import { definePruneProviderEventsJob, schedulePruneProviderEvents } from './prune-provider-events.job.js';
import { definePruneRateLimitWindowsJob, schedulePruneRateLimitWindows } from './prune-rate-limit-windows.job.js';
import { defineSweepDeliveriesJob, scheduleDeliverySweep } from './sweep-deliveries.job.js';
import { defineSyncPaymentsJob, scheduleSyncPayments } from './sync-payments.job.js';
import { defineSyncRefundsJob, scheduleSyncRefunds } from './sync-refunds.job.js';
import { defineReconcileTransactionsJobs, defineScheduleReconciliationsJob, scheduleReconciliations } from './reconcile-transactions.job.js';

/** Registers every job body with Agenda (worker role). */
export function defineJobs(container: JobContext): void {
  defineDeliverWebhookJob(container);
  defineSweepDeliveriesJob(container);
  defineSyncPaymentsJob(container);
  defineAbandonFailedJob(container);
  defineDetachCardsJob(container);
  defineSyncRefundsJob(container);
  defineReconcileTransactionsJobs(container);
  defineScheduleReconciliationsJob(container);
  definePruneEventsJob(container);
  definePruneIdempotencyKeysJob(container);
  definePruneProviderEventsJob(container);
  definePruneRateLimitWindowsJob(container);
  defineFoldPaymentCountsJob(container);
  if (container.config.sandbox) {
    for (const module of sandboxModules) {
      // A simulator's jobs are one-off sends whose state lives in its own tables: removed once done (a failed
      // run's row FAILED_JOB_RETENTION_MS later, by `events.prune`), so a sandbox left running keeps no row per callback.
      module.defineJobs?.(container.sandboxDeps, (name, body) => defineJob(container, name, body, { removeOnComplete: true }));
    }
  }
}

/** Creates the repeating jobs once; Agenda keeps one row per repeating job across workers. */
export async function scheduleRecurringJobs(container: JobContext): Promise<void> {
  await scheduleDeliverySweep(container);
  await scheduleSyncPayments(container);
  await scheduleAbandonFailed(container);
  await scheduleDetachCards(container);
  await scheduleSyncRefunds(container);
  await scheduleReconciliations(container);
  await schedulePruneEvents(container);
  await schedulePruneIdempotencyKeys(container);
  await schedulePruneProviderEvents(container);
  await schedulePruneRateLimitWindows(container);
  await scheduleFoldPaymentCounts(container);
}
