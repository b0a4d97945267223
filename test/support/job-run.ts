import type { Job } from 'agenda';
import type { TestService } from './service.js';
import { eventually } from './webhook-receiver.js';

/**
 * Asks the worker for one run of the job `name` now (as its schedule would start it) and resolves when
 * that run finished, with how many runs of it started meanwhile; rejects when that run failed (Agenda
 * emits `complete` after a failure too). Give the job a long interval so its schedule starts none in
 * between. `data` is the run's job data (a per-merchant job's merchant).
 */
export async function runJobOnce(t: TestService, name: string, data: Record<string, unknown> = {}): Promise<number> {
  const agenda = t.service.container.agenda;
  let started = 0;
  // Runs of `name` that ended before agenda.now() told us our run's id are kept until it does.
  const failed = new Map<string, Error>();
  const finished = new Set<string>();
  let ours: string | undefined;
  let settle: (() => void) | undefined;
  const onStart = () => started++;
  const onFail = (err: Error, job: Job) => { failed.set(String(job.attrs._id), err); };
  const onComplete = (job: Job) => { finished.add(String(job.attrs._id)); settle?.(); };
  agenda.on(`start:${name}`, onStart);
  agenda.on(`fail:${name}`, onFail);
  agenda.on(`complete:${name}`, onComplete);
  try {
    await new Promise<void>((resolve, reject) => {
      settle = () => {
        if (ours === undefined || !finished.has(ours)) return;
        const err = failed.get(ours);
        if (err) reject(new Error(`job ${name} failed: ${err.message}`));
        else resolve();
      };
      agenda.now(name, data).then((job) => { ours = String(job.attrs._id); settle!(); }, reject);
    });
    return started;
  } finally {
    agenda.off(`start:${name}`, onStart);
    agenda.off(`fail:${name}`, onFail);
    agenda.off(`complete:${name}`, onComplete);
  }
}

/**
 * Waits (10 s at most) until a run of the job `name` has finished — the one a worker starts at its boot —
 * so that a test's own runs (runJobOnce) are the only ones after it.
 */
export async function jobRunFinished(t: Pick<TestService, 'sql'>, name: string): Promise<void> {
  await eventually(async () => (await t.sql('SELECT 1 FROM agenda_jobs WHERE name = $1 AND last_finished_at IS NOT NULL', [name])).length > 0, 10_000, `a run of ${name} to finish`);
}
