import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Agenda } from 'agenda';
import { createAgenda, drainAgenda } from '../../server/jobs/agenda.js';
import { createTestDatabase, sql } from '../support/database.js';
import { eventually } from '../support/webhook-receiver.js';

// A worker stopping (a deploy) takes the due jobs it had locked but not started yet with it, unless it
// gives them back: they stay locked for the lock lifetime (10 min in production), so another worker
// cannot run them — webhook retries and recurring jobs wait. Real Agenda instances on a real database.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
const opened: Array<{ agenda: Agenda; closePool: () => Promise<void> }> = [];

function worker(name: string) {
  const created = createAgenda({ databaseUrl: db.url, name, processEveryMs: 100, lockLifetimeMs: 600_000, poolMax: 2 });
  opened.push(created);
  return created.agenda;
}

const lockedJobs = async () =>
  (await sql<{ n: number }>(db.url, `SELECT count(*)::int AS n FROM agenda_jobs WHERE name = 'slow' AND locked_at IS NOT NULL`))[0]!.n;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  for (const { agenda, closePool } of opened) {
    await agenda.stop().catch(() => undefined);
    await closePool().catch(() => undefined);
  }
  await db?.drop();
});

describe('a worker draining its jobs on shutdown', () => {
  it('gives back at once the jobs it locked but never started, waits for the running one, and another worker runs the rest', async () => {
    const ran: Array<{ by: string; n: string }> = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const stopping = worker('stopping');
    stopping.define<{ n: string }>('slow', async (job) => {
      ran.push({ by: 'stopping', n: job.attrs.data.n });
      await held;
    }, { concurrency: 1 });
    for (const n of ['a', 'b', 'c']) await stopping.now('slow', { n });
    await stopping.start();
    // One runs (concurrency 1); Agenda has locked the other two for this process as well.
    await eventually(async () => (ran.length === 1 && (await lockedJobs()) === 3 ? true : null), 10_000, 'one running, three locked');

    const drained = drainAgenda(stopping, 10_000);
    await eventually(async () => ((await lockedJobs()) === 1 ? true : null), 5_000, 'the two not started given back');
    release();
    await drained;
    expect(ran).toEqual([{ by: 'stopping', n: 'a' }]);

    // Another worker runs the two at once, not after the 10-minute lock lifetime.
    const next = worker('next');
    next.define<{ n: string }>('slow', async (job) => {
      ran.push({ by: 'next', n: job.attrs.data.n });
    });
    await next.start();
    await eventually(() => (ran.length === 3 ? true : null), 10_000, 'the other worker to run them');
    expect(ran.slice(1).map((r) => r.by)).toEqual(['next', 'next']);
    expect(ran.map((r) => r.n).sort()).toEqual(['a', 'b', 'c']);
  });

  it('ends as soon as the running job ends, also a one-time job removed on completion (Agenda counted it running until its row was deleted, and waited out the whole timeout)', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started = false;
    const stopping = worker('stopping-once');
    stopping.define('once', async () => {
      started = true;
      await held;
    }, { removeOnComplete: true });
    await stopping.now('once', {});
    await stopping.start();
    await eventually(() => (started ? true : null), 10_000, 'the one-time job to start');

    const began = Date.now();
    const drained = drainAgenda(stopping, 20_000);
    release();
    await drained;
    // Seconds, not the 20 s timeout: a worker's shutdown is not held by a webhook retry that just finished.
    expect(Date.now() - began).toBeLessThan(5_000);
    expect(await sql(db.url, `SELECT 1 FROM agenda_jobs WHERE name = 'once'`)).toEqual([]);
  }, 30_000);
});
