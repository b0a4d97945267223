import type { Job } from 'agenda';
import type { TestService } from './service.js';

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
