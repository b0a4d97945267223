import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PRUNE_EVENTS_JOB } from '../../server/jobs/prune-events.job.js';
import { PRUNE_PROVIDER_EVENTS_JOB } from '../../server/jobs/prune-provider-events.job.js';
import { pruneFailedOneOffJobs } from '../../server/jobs/failed-job-retention.js';
import { jobRunFinished, runJobOnce } from '../support/job-run.js';
import { startTestService, type TestService } from '../support/service.js';

// Rows that grew for ever, now pruned by the existing retention jobs:
// - status queries sent to a provider (provider_status_queries: every check-status by receipt, every
//   refund sync report, every confirmation of an unverifiable notification), answered or not, past
//   PROVIDER_EVENT_RETENTION (30 days by default), by `provider-events.prune`;
// - the agenda_jobs rows of one-off jobs whose run failed (Agenda removes a one-off job's row only when it
//   succeeded), 7 days after they failed, by `events.prune`; a repeating job's row is never deleted.
// Both ages are measured by the database's clock (its now() less the retention), never a worker's.

let t: TestService;
let merchantId: string;

beforeAll(async () => {
  // An hour between the prunes' runs (each runs once at boot): every run below is one the test asks for.
  t = await startTestService({ EVENT_PRUNE_INTERVAL: '1h' }, { agendaLockLifetimeMs: 60_000 });
  ({ merchantId } = await t.createMerchant('Retention Shop'));
  await jobRunFinished(t, PRUNE_PROVIDER_EVENTS_JOB);
  await jobRunFinished(t, PRUNE_EVENTS_JOB);
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe('status queries sent to a provider (PROVIDER_EVENT_RETENTION, 30 days by default)', () => {
  it('are deleted past the retention, answered or not; recent and open ones are kept', async () => {
    const queries = {
      answered31d: { age: '31 days', answered: true, confirms: null },
      unanswered31d: { age: '31 days', answered: false, confirms: 'reversal' },
      answered29d: { age: '29 days', answered: true, confirms: null },
      openConfirmation: { age: '1 minute', answered: false, confirms: 'transaction-status' },
    };
    for (const [code, q] of Object.entries(queries)) {
      await t.sql(
        `INSERT INTO provider_status_queries (id, provider, merchant_id, code, confirms, created_at, completed_at, result_code)
         VALUES (gen_random_uuid(), 'mobilemoney', $1, $2, $3, now() - $4::interval, CASE WHEN $5 THEN now() - $4::interval END, CASE WHEN $5 THEN '0' END)`,
        [merchantId, code, q.confirms, q.age, q.answered],
      );
    }
    await runJobOnce(t, PRUNE_PROVIDER_EVENTS_JOB);
    const left = await t.sql<{ code: string }>('SELECT code FROM provider_status_queries WHERE merchant_id = $1 ORDER BY code', [merchantId]);
    expect(left.map((r) => r.code)).toEqual(['answered29d', 'openConfirmation']);
  });

  it("a worker whose clock runs ahead does not delete one early: the cutoff is the database's now() less the retention", async () => {
    // 10 minutes inside the 30 days.
    const [query] = await t.sql<{ id: string }>(
      `INSERT INTO provider_status_queries (id, provider, merchant_id, code, created_at, completed_at, result_code)
       VALUES (gen_random_uuid(), 'mobilemoney', $1, 'answered29d23h50m', now() - interval '29 days 23 hours 50 minutes', now() - interval '29 days 23 hours 50 minutes', '0')
       RETURNING id`,
      [merchantId],
    );
    // A prune as a worker 15 minutes fast would run it: its clock reads 15 minutes ahead of the database's.
    const fifteenMinutesFast = new Date(Date.now() + 15 * 60_000);
    // @ts-expect-error prune() takes no `now`: the cutoff is the database's now() less the retention.
    await t.inContext(() => t.service.container.services.statusQueryRetention.prune(fifteenMinutesFast));
    expect(await t.sql('SELECT 1 FROM provider_status_queries WHERE id = $1', [query!.id])).toHaveLength(1);
    await t.sql('DELETE FROM provider_status_queries WHERE id = $1', [query!.id]);
  });
});

describe('failed one-off jobs (agenda_jobs)', () => {
  it('a failed run\'s row is deleted 7 days after it failed; a younger one and a repeating job\'s row are kept', async () => {
    const failed = async (name: string, age: string) =>
      (await t.sql<{ id: string }>(
        `INSERT INTO agenda_jobs (name, next_run_at, last_run_at, last_finished_at, failed_at, fail_count, fail_reason, data)
         VALUES ($1, NULL, now() - $2::interval, now() - $2::interval, now() - $2::interval, 1, 'connection terminated', '{}') RETURNING id`,
        [name, age],
      ))[0]!.id;
    const webhookRetry8d = await failed('webhook.deliver', '8 days');
    const simulatorSend8d = await failed('sandbox.mobilemoney.callback', '8 days');
    const webhookRetry6d = await failed('webhook.deliver', '6 days');
    // A repeating job whose last run failed 8 days ago.
    const [repeating] = await t.sql<{ id: string }>(
      `UPDATE agenda_jobs SET failed_at = now() - interval '8 days', fail_count = 1, fail_reason = 'connection terminated'
        WHERE name = 'payment-counts.fold' AND repeat_interval IS NOT NULL RETURNING id`,
    );
    expect(repeating).toBeDefined();

    await runJobOnce(t, PRUNE_EVENTS_JOB);
    const left = await t.sql<{ id: string }>('SELECT id FROM agenda_jobs WHERE id = ANY($1)', [[webhookRetry8d, simulatorSend8d, webhookRetry6d, repeating!.id]]);
    expect(left.map((r) => r.id).sort()).toEqual([webhookRetry6d, repeating!.id].sort());
  });

  it("a worker whose clock runs ahead does not delete one early: the cutoff is the database's now() less the 7 days", async () => {
    // 10 minutes inside the 7 days.
    const [row] = await t.sql<{ id: string }>(
      `INSERT INTO agenda_jobs (name, next_run_at, last_run_at, last_finished_at, failed_at, fail_count, fail_reason, data)
       VALUES ('webhook.deliver', NULL, now() - $1::interval, now() - $1::interval, now() - $1::interval, 1, 'connection terminated', '{}') RETURNING id`,
      ['6 days 23 hours 50 minutes'],
    );
    const fifteenMinutesFast = new Date(Date.now() + 15 * 60_000);
    const { orm, agenda } = t.service.container;
    // @ts-expect-error pruneFailedOneOffJobs() takes no `now`: the cutoff is the database's now() less the retention.
    await pruneFailedOneOffJobs(orm.em, agenda, fifteenMinutesFast);
    expect(await t.sql('SELECT 1 FROM agenda_jobs WHERE id = $1', [row!.id])).toHaveLength(1);
    await t.sql('DELETE FROM agenda_jobs WHERE id = $1', [row!.id]);
  });
});
