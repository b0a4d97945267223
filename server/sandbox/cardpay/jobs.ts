import type { Statement, UnitOfWork } from '../sql.js';

/**
 * The simulator's Agenda jobs (events to send, refunds to settle) written by its own statements, so a
 * job is committed together with the change that caused it — in the same statement, when the change
 * needs no other round trip. Agenda's PostgreSQL backend keeps jobs in `agenda_jobs` and wakes workers
 * with NOTIFY on `agenda_jobs` (its defaults, which the service uses); the notification is delivered
 * at commit, so a worker never looks for a job it cannot see yet.
 */
const TABLE = 'agenda_jobs';
const CHANNEL = 'agenda_jobs';

/** A data-modifying statement, named so the final select of its statement can read what it returns. */
export type NamedWrite = Statement & { name: string };

/** A job to schedule with the change (e.g. a refund that settles later). */
export interface FollowUp {
  job: string;
  data: Record<string, unknown>;
  delayMs: number;
}

/** `INSERT INTO agenda_jobs … SELECT <name>, <due>, <data> FROM …` returning what the notification needs. */
export function insertJobs(name: string, select: Statement): NamedWrite {
  return {
    name,
    sql: `INSERT INTO ${TABLE} (name, priority, next_run_at, type, data) ${select.sql} RETURNING id, name, next_run_at`,
    params: select.params,
  };
}

export function followUpJobs(followUps: FollowUp[]): NamedWrite | null {
  if (followUps.length === 0) return null;
  const rows = followUps.map((f) => ({ job: f.job, due: new Date(Date.now() + f.delayMs).toISOString(), data: f.data }));
  return insertJobs('follow_up_jobs', {
    sql: `SELECT f->>'job', 0, (f->>'due')::timestamptz, 'normal', f->'data' FROM jsonb_array_elements(?::jsonb) AS f`,
    params: [JSON.stringify(rows)],
  });
}

/**
 * The final select of a statement that inserts jobs: one NOTIFY per job name (its earliest run), as
 * Agenda's own scheduling sends, so a worker fills its queue at once instead of at its next poll.
 */
function notifyWorkers(jobs: NamedWrite[]): Statement {
  const union = jobs.map((j) => `SELECT id, name, next_run_at FROM ${j.name}`).join(' UNION ALL ');
  return {
    sql: `SELECT count(pg_notify('${CHANNEL}', json_build_object('jobId', j.id, 'jobName', j.name, 'nextRunAt', j.next_run_at,
            'priority', 0, 'timestamp', now(), 'source', 'sandbox.cardpay')::text)) AS notified
       FROM (SELECT DISTINCT ON (name) id, name, next_run_at FROM (${union}) AS a ORDER BY name, next_run_at) AS j`,
    params: [],
  };
}

/** Commits `work` with `writes` and the jobs (null: none) in one statement that also wakes the workers. */
export async function commitWithJobs(work: UnitOfWork, jobs: (NamedWrite | null)[], writes: NamedWrite[] = []): Promise<void> {
  const inserts = jobs.filter((j): j is NamedWrite => j !== null);
  if (inserts.length === 0) await work.commit(writes);
  else await work.commit([...writes, ...inserts], notifyWorkers(inserts));
}
