import { Agenda } from 'agenda';
import { PostgresBackend } from '@agendajs/postgres-backend';
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { countQueries } from '../lib/count-queries.js';
import { AgendaNotificationChannel } from './agenda-channel.js';
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
  /** Called for every query the listening connection sends. */
  onListenerQuery?: () => void;
  /** The wake-ups' listening connection was lost or refused (it is made again), or a wake-up was not sent. */
  onError?: (message: string) => void;
  /** The listening connection does not hear its own NOTIFY (a pooler in transaction mode). */
  onDeaf?: (message: string) => void;
}

export interface AgendaHandle {
  agenda: Agenda;
  /** Ends Agenda's pool once Agenda has stopped; resolves when every connection of it is closed. */
  closePool: () => Promise<void>;
  /**
   * Whether a connection of Agenda's own pool answers `sql` within `timeoutMs` (waiting for a free one
   * included): /readyz's job runner check. A connection whose answer did not come is closed, not reused.
   */
  answers: (sql: string, timeoutMs: number) => Promise<boolean>;
}

/**
 * Agenda on the PostgreSQL backend: jobs live in `agenda_jobs` of the service's own database. The pool
 * is ours (Agenda does not close a pool it was given): an idle connection that the server drops —
 * e.g. while the database shuts down — is an error event we handle, not a process crash; `close()`
 * ends it after Agenda has stopped. Its wake-ups LISTEN on a connection of their own (agenda-channel.ts),
 * so every connection of the pool is only ever lent for a query, and ending the pool always ends.
 */
export function createAgenda(options: AgendaOptions): AgendaHandle {
  const pool = new pg.Pool({ connectionString: options.databaseUrl, ...PG_SOCKET_OPTIONS, max: options.poolMax ?? 8 });
  pool.on('error', () => undefined);
  if (options.onQuery) pool.on('connect', (client) => countQueries(client, options.onQuery!));
  // agenda_jobs is made by a migration (Migration20261127001001_agenda_jobs), under the migrations'
  // lock_timeout: the backend's own schema step at connect takes ACCESS EXCLUSIVE locks with no bound.
  // Its own notification channel is off: it would LISTEN on a connection of this pool (see agenda-channel.ts).
  const backend = new PostgresBackend({ pool, ensureSchema: false, disableNotifications: true });
  const notificationChannel = new AgendaNotificationChannel({
    databaseUrl: options.databaseUrl,
    pool,
    onError: options.onError,
    onDeaf: options.onDeaf,
    onQuery: options.onListenerQuery,
  });
  const agenda = new Agenda({
    backend,
    notificationChannel,
    name: options.name,
    processEvery: options.processEveryMs,
    defaultConcurrency: 10,
    maxConcurrency: 40,
    defaultLockLifetime: options.lockLifetimeMs,
  });
  return { agenda, closePool: () => pool.end(), answers: (sql, timeoutMs) => poolAnswers(pool, sql, timeoutMs) };
}

async function poolAnswers(pool: pg.Pool, sql: string, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
  const checkout = pool.connect();
  try {
    const client = await Promise.race([checkout, late]);
    if (client === 'late') {
      // Given back as soon as it comes (the pool's connectionTimeoutMillis bounds the wait).
      void checkout.then((c) => c.release(), () => undefined);
      return false;
    }
    const answer = await Promise.race([client.query(sql).then(() => 'answered' as const, () => 'failed' as const), late]);
    // A connection that failed or did not answer in time is closed (release(true)), not lent again.
    client.release(answer === 'answered' ? undefined : true);
    return answer === 'answered';
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
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
