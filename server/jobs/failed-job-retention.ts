import type { Agenda } from 'agenda';
import type { EntityManager } from '@mikro-orm/postgresql';
import { deleteInBatches, PRUNE_BATCH } from '../lib/batched-delete.js';

/**
 * How long the row of a one-off job whose run failed stays in agenda_jobs: 7 days, for an operator to
 * read its fail_reason. Agenda removes a one-off job's row once it succeeded (removeOnComplete), never
 * one that threw (a database error, a failover): without this prune those rows stayed for ever.
 */
export const FAILED_JOB_RETENTION_MS = 7 * 24 * 60 * 60_000;

/**
 * One batch of the prune (its parameters: the job names, the retention in milliseconds): failed runs of the
 * one-off jobs named (the `IN (?)` list) that failed before the database's now() less the retention, with no next run and
 * no repeat (a repeating job's row always has its repeat_interval or repeat_at: never deleted). Read through
 * Agenda's own agenda_jobs_find_and_lock_idx (name, next_run_at … WHERE disabled = FALSE): the table's
 * shape is the backend's (test/deploy/migration-locks.test.ts), so no index of ours is added to it. The
 * batch's ids are deleted through the primary key (deleteInBatches says why `= ANY(ARRAY(…))`).
 */
export const PRUNE_FAILED_JOBS_SQL =
  'DELETE FROM agenda_jobs WHERE id = ANY(ARRAY(' +
  'SELECT id FROM agenda_jobs WHERE name IN (?) AND next_run_at IS NULL AND disabled = FALSE ' +
  'AND repeat_interval IS NULL AND repeat_at IS NULL AND locked_at IS NULL AND failed_at < now() - (? * interval \'1 millisecond\') ' +
  `LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)) RETURNING id`;

/** The jobs defined to be removed once done (defineJob's removeOnComplete): the one-off ones. */
export function oneOffJobNames(agenda: Agenda): string[] {
  return Object.entries(agenda.definitions).filter(([, definition]) => definition.removeOnComplete).map(([name]) => name);
}

/**
 * Deletes failed one-off job rows older than FAILED_JOB_RETENTION_MS, a batch per statement; returns how many.
 * The cutoff is the database's now() less the retention, as every prune's, never this worker's clock (Agenda
 * stamps failed_at with the clock of whichever worker ran the job).
 */
export async function pruneFailedOneOffJobs(em: EntityManager, agenda: Agenda): Promise<number> {
  const names = oneOffJobNames(agenda);
  if (names.length === 0) return 0;
  return deleteInBatches(() => em.getConnection().execute<{ id: string }[]>(PRUNE_FAILED_JOBS_SQL, [names, FAILED_JOB_RETENTION_MS]));
}
