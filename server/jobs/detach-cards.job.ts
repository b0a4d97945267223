import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';
import { drainDue } from './drain-due.js';

export const DETACH_CARDS_JOB = 'cards.detach-due';

/** Repeating job: detaches deleted saved cards at their provider where the DELETE could not, batch after batch (drain-due.ts; see CardDetachService). */
export function defineDetachCardsJob(container: JobContext): void {
  defineJob(container, DETACH_CARDS_JOB, (_data, job) => drainDue(container, job, (run) => container.services.cardDetach.detachDue(run)), { concurrency: 1 });
}

export async function scheduleDetachCards(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.statusSyncPollMs, DETACH_CARDS_JOB, {}, { skipImmediate: false });
}
