import type { JobContext } from './job-context.js';
import { defineJob } from './define-job.js';

export const PRUNE_IDEMPOTENCY_KEYS_JOB = 'idempotency-keys.prune';

/** Deletes idempotency keys past IDEMPOTENCY_KEY_RETENTION (see IdempotencyKeyRetention.prune). */
export function definePruneIdempotencyKeysJob(container: JobContext): void {
  defineJob(container, PRUNE_IDEMPOTENCY_KEYS_JOB, async () => {
    const deleted = await container.services.idempotencyKeyRetention.prune();
    if (deleted > 0) container.logger.info({ deleted }, 'pruned idempotency keys past the retention period');
  }, { concurrency: 1 });
}

/** One repeating row for every worker, every IDEMPOTENCY_KEY_PRUNE_INTERVAL. */
export async function schedulePruneIdempotencyKeys(container: JobContext): Promise<void> {
  await container.agenda.every(container.config.idempotencyKeyPruneIntervalMs, PRUNE_IDEMPOTENCY_KEYS_JOB, {});
}
