import type { TestService } from './service.js';

/**
 * Asks the worker for one run of the job `name` now (as its schedule would start it) and resolves when a
 * run finished, with how many runs of it started meanwhile. Give the job a long interval so its schedule
 * starts none in between. `data` is the run's job data (a per-merchant job's merchant).
 */
export async function runJobOnce(t: TestService, name: string, data: Record<string, unknown> = {}): Promise<number> {
  const agenda = t.service.container.agenda;
  let started = 0;
  const onStart = () => started++;
  agenda.on(`start:${name}`, onStart);
  try {
    const finished = new Promise<void>((resolve) => agenda.once(`complete:${name}`, () => resolve()));
    await agenda.now(name, data);
    await finished;
    return started;
  } finally {
    agenda.off(`start:${name}`, onStart);
  }
}
