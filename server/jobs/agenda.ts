import { Agenda } from 'agenda';
import { PostgresBackend } from '@agendajs/postgres-backend';

export interface AgendaOptions {
  databaseUrl: string;
  /** How often a worker polls for due jobs; NOTIFY wakes it sooner for jobs due now. */
  processEveryMs: number;
  /** Short in tests: Agenda keeps a timer of half the lock lifetime alive after a job. */
  lockLifetimeMs: number;
  name: string;
}

/** Agenda on the PostgreSQL backend: jobs live in `agenda_jobs` of the service's own database. */
export function createAgenda(options: AgendaOptions): Agenda {
  return new Agenda({
    backend: new PostgresBackend({ poolConfig: { connectionString: options.databaseUrl, max: 8 } }),
    name: options.name,
    processEvery: options.processEveryMs,
    defaultConcurrency: 10,
    maxConcurrency: 40,
    defaultLockLifetime: options.lockLifetimeMs,
  });
}
