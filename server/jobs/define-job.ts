import { inOrmScope } from '../persistence/orm-scope.js';
import type { Job } from 'agenda';
import type { JobContext } from './job-context.js';

export interface JobOptions {
  concurrency?: number;
  lockLifetime?: number;
  /**
   * Delete the job row once it succeeded (one-off jobs whose state lives in our own tables); a failed run's
   * row is deleted FAILED_JOB_RETENTION_MS later (failed-job-retention.ts).
   */
  removeOnComplete?: boolean;
}

/**
 * Registers a job body that runs in its own MikroORM context (its own identity map), with failures
 * logged without internals. Retries are the job's own business (data, not Agenda's generic backoff).
 */
export function defineJob<T>(container: JobContext, name: string, body: (data: T, job: Job<T>) => Promise<void>, options: JobOptions = {}): void {
  container.agenda.define<T>(
    name,
    async (job) => {
      try {
        await inOrmScope(container.orm.em, () => body(job.attrs.data as T, job));
      } catch (err) {
        container.logger.error({ job: name, err: { type: (err as Error).name, message: (err as Error).message } }, 'job failed');
        throw err;
      }
    },
    {
      concurrency: options.concurrency ?? 10,
      ...(options.lockLifetime ? { lockLifetime: options.lockLifetime } : {}),
      ...(options.removeOnComplete ? { removeOnComplete: true } : {}),
    },
  );
}
