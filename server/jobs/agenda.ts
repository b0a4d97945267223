import { Agenda } from 'agenda';
import { PostgresBackend } from '@agendajs/postgres-backend';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { countQueries } from '../lib/count-queries.js';
import { PG_SOCKET_OPTIONS } from '../lib/pg-connection.js';

export interface AgendaOptions {
  databaseUrl: string;
  /** How often a worker polls for due jobs; NOTIFY wakes it sooner for jobs due now. */
  processEveryMs: number;
  /** Short in tests: Agenda keeps a timer of half the lock lifetime alive after a job. */
  lockLifetimeMs: number;
  name: string;
  /** Connections of Agenda's own pool. */
  poolMax?: number;
  /** Called for every query a pooled connection sends (db_round_trips_total). */
  onQuery?: () => void;
}

/**
 * Agenda on the PostgreSQL backend: jobs live in `agenda_jobs` of the service's own database. The pool
 * is ours (Agenda does not close a pool it was given): an idle connection that the server drops —
 * e.g. while the database shuts down — is an error event we handle, not a process crash; `close()`
 * ends it after Agenda has stopped.
 */
export function createAgenda(options: AgendaOptions): { agenda: Agenda; closePool: () => Promise<void> } {
  const pool = new pg.Pool({ connectionString: options.databaseUrl, ...PG_SOCKET_OPTIONS, max: options.poolMax ?? 8 });
  pool.on('error', () => undefined);
  if (options.onQuery) pool.on('connect', (client) => countQueries(client, options.onQuery!));
  // agenda_jobs is made by a migration (Migration20261127001001_agenda_jobs), under the migrations'
  // lock_timeout: the backend's own schema step at connect takes ACCESS EXCLUSIVE locks with no bound.
  const backend = new PostgresBackend({ pool, ensureSchema: false });
  // Its LISTEN connection reports a dropped connection as an 'error' event; unhandled, that would
  // crash the process (e.g. while the database restarts). Agenda reconnects on its own.
  backend.notificationChannel?.on('error', () => undefined);
  const agenda = new Agenda({
    backend,
    name: options.name,
    processEvery: options.processEveryMs,
    defaultConcurrency: 10,
    maxConcurrency: 40,
    defaultLockLifetime: options.lockLifetimeMs,
  });
  return { agenda, closePool: () => pool.end() };
}

/**
 * Stops taking jobs, gives back at once the jobs this process had locked but not started, and waits up
 * to `timeoutMs` for the running ones. Agenda 6's drain() alone forgets the former (its stop() would
 * unlock them, but after drain() it finds nothing to stop), so they stayed locked for the lock lifetime:
 * a webhook retry or a recurring job delayed by minutes after every deploy. Agenda exposes no public way
 * to do this, hence the internals (the job processor and its running list), pinned by test/foundation/agenda-drain.test.ts.
 */
export async function drainAgenda(agenda: Agenda, timeoutMs: number): Promise<void> {
  const internals = agenda as unknown as {
    jobProcessor?: { stop(): Array<{ attrs: { _id?: unknown } }>; runningJobs: unknown[] };
    db: { unlockJobs(ids: unknown[]): Promise<void> };
  };
  const deadline = Date.now() + timeoutMs;
  const processor = internals.jobProcessor;
  const notStarted = processor?.stop() ?? [];
  const ids = notStarted.map((job) => job.attrs._id).filter((id) => id !== undefined);
  if (ids.length > 0) await internals.db.unlockJobs(ids);
  // Agenda's drain() looks at its running list on each 'complete' event only, and a job removed on
  // completion (a webhook retry) emits it before it leaves the list (its row is deleted in between): the
  // drain then waited out its whole timeout. So the running list is watched here; drain() then finds it
  // empty (or the time up) and closes Agenda's notification channel.
  while (processor && processor.runningJobs.length > 0 && Date.now() < deadline) await delay(RUNNING_JOBS_POLL_MS);
  await agenda.drain({ timeout: Math.max(0, deadline - Date.now()) });
}

const RUNNING_JOBS_POLL_MS = 20;
