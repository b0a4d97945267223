import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { foldPaymentCountChanges } from '../domain/payments/payment-counts.js';

export const FOLD_PAYMENT_COUNTS_JOB = 'payment-counts.fold';

/**
 * Folds the count changes that payment writes append into the folded counts, so the totals' readers sum
 * a few seconds of changes rather than all of them. Totals are exact with or without it.
 */
export function defineFoldPaymentCountsJob(container: JobContext): void {
  defineJob(container, FOLD_PAYMENT_COUNTS_JOB, async () => {
    // The job's ORM scope (defineJob) gives container.orm.em a fork of its own: no second fork here.
    await foldPaymentCountChanges(container.orm.em);
  }, { concurrency: 1 });
}

/** One repeating row for every worker, every PAYMENT_COUNT_FOLD_INTERVAL. */
export async function scheduleFoldPaymentCounts(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.paymentCountFoldIntervalMs, FOLD_PAYMENT_COUNTS_JOB, {});
}
