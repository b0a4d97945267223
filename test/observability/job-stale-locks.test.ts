import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { scrapeMetrics, total } from '../support/prometheus.js';
import { startTestService, type TestService } from '../support/service.js';
import { eventually } from '../support/webhook-receiver.js';

// A worker killed mid-job (SIGKILL, OOM, a lost node) leaves its Agenda rows locked: no worker takes them
// until the lock lifetime has passed. From then on they wait like any due job, and the job gauges (which
// the "job waiting over 5 minutes" alert reads) must count them, not skip them as locked.

const LOCK_LIFETIME_MS = 30_000;

let t: TestService;
beforeAll(async () => {
  // An api process: it defines no jobs, so nothing here takes the rows below.
  t = await startTestService({ ROLE: 'api' }, { agendaLockLifetimeMs: LOCK_LIFETIME_MS });
});
afterAll(async () => {
  await t?.stop();
});

describe('job_queue_depth and job_queue_lag_seconds', () => {
  it('count a job whose worker died holding it once its lock is older than the lock lifetime, not one a live worker is running', async () => {
    await t.sql(`INSERT INTO agenda_jobs (name, next_run_at, locked_at, last_modified_by, type, priority) VALUES
      ('probe-killed-recurring', now() - interval '2 minutes', now() - interval '40 seconds', 'worker-4242', 'single', 0),
      ('probe-killed-oneshot', NULL, now() - interval '50 seconds', 'worker-4242', 'normal', 0),
      ('probe-running', now() - interval '2 minutes', now() - interval '1 second', 'worker-4343', 'single', 0),
      ('probe-marker', now() - interval '1 second', NULL, NULL, 'normal', 0)`);
    // The marker (due, unlocked) proves the scrape read the rows above, not a snapshot cached before them.
    const s = await eventually(async () => {
      const scraped = await scrapeMetrics(t);
      return total(scraped, 'job_queue_depth', { job_name: 'probe-marker' }) === 1 ? scraped : null;
    }, 15_000, 'a snapshot taken after the rows were written');
    // A recurring job: waiting since it was due (before its lock).
    expect(total(s, 'job_queue_depth', { job_name: 'probe-killed-recurring' })).toBe(1);
    expect(total(s, 'job_queue_lag_seconds', { job_name: 'probe-killed-recurring' })).toBeGreaterThanOrEqual(120);
    // A one-shot job (its run set next_run_at to none): waiting since it was locked.
    expect(total(s, 'job_queue_depth', { job_name: 'probe-killed-oneshot' })).toBe(1);
    expect(total(s, 'job_queue_lag_seconds', { job_name: 'probe-killed-oneshot' })).toBeGreaterThanOrEqual(50);
    // Locked a second ago: a worker is running it, it waits for nothing.
    expect(total(s, 'job_queue_depth', { job_name: 'probe-running' })).toBe(0);
  }, 30_000);
});
