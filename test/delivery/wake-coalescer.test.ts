import { setTimeout as sleep } from 'node:timers/promises';
import { WakeCoalescer } from '../../server/jobs/wake-coalescer.js';

/**
 * The api's wake-ups for new deliveries: one NOTIFY now, then at most one per window however many commits.
 * Each send is recorded at the moment the coalescer decided it, not when the recorder ran: on a loaded
 * machine the process can be preempted between the two, which made a correct send look early.
 */
function recorder(windowMs: number, sendMs = 0) {
  const sentAt: number[] = [];
  const started = performance.now();
  const coalescer = new WakeCoalescer(
    async (decidedAt) => {
      sentAt.push(decidedAt - started);
      if (sendMs) await sleep(sendMs);
    },
    windowMs,
    (err) => {
      throw err;
    },
  );
  return { coalescer, sentAt, elapsed: () => performance.now() - started };
}

/** Waits (up to 2 s, for a loaded machine) until `done`; then a little longer, so an extra send would show. */
async function settle(done: () => boolean) {
  const until = performance.now() + 2000;
  while (!done() && performance.now() < until) await sleep(5);
  await sleep(50);
}

describe('wake-ups for new deliveries', () => {
  it('sends the first at once and folds a burst into one more, after the burst', async () => {
    const { coalescer, sentAt } = recorder(30);
    for (let i = 0; i < 100; i++) coalescer.request();
    expect(sentAt).toHaveLength(1);
    await settle(() => sentAt.length >= 2);
    expect(sentAt).toHaveLength(2);
    expect(sentAt[1]! - sentAt[0]!).toBeGreaterThanOrEqual(29);
  });

  it('sends at most one per window under a steady stream, and one after the last request', async () => {
    const { coalescer, sentAt, elapsed } = recorder(20);
    let lastRequestAt = 0;
    while (elapsed() < 200) {
      // Read before the request: the first is sent at once, inside request().
      lastRequestAt = elapsed();
      coalescer.request();
      await sleep(1);
    }
    const streamMs = elapsed();
    await settle(() => sentAt.at(-1)! >= lastRequestAt);
    expect(sentAt.length).toBeLessThanOrEqual(Math.ceil(streamMs / 20) + 2);
    for (let i = 1; i < sentAt.length; i++) expect(sentAt[i]! - sentAt[i - 1]!).toBeGreaterThanOrEqual(19);
    expect(sentAt.at(-1)!).toBeGreaterThanOrEqual(lastRequestAt);
  });

  it('a request while a send is under way gets a send that starts after it', async () => {
    const { coalescer, sentAt } = recorder(5, 50);
    coalescer.request();
    await sleep(20);
    coalescer.request();
    expect(sentAt).toHaveLength(1);
    await settle(() => sentAt.length >= 2);
    expect(sentAt).toHaveLength(2);
    expect(sentAt[1]!).toBeGreaterThanOrEqual(49);
  });

  it('a failed send is reported and later requests are still sent', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const coalescer = new WakeCoalescer(
      async () => {
        calls++;
        if (calls === 1) throw new Error('connection refused');
      },
      5,
      (err) => errors.push(err),
    );
    coalescer.request();
    await settle(() => errors.length === 1);
    coalescer.request();
    await settle(() => calls === 2);
    expect(calls).toBe(2);
    expect(errors).toHaveLength(1);
  });

  it('once stopped, drops a pending wake-up and sends nothing more', async () => {
    const { coalescer, sentAt } = recorder(30);
    coalescer.request();
    coalescer.request();
    await coalescer.stop();
    coalescer.request();
    await sleep(80);
    expect(sentAt).toHaveLength(1);
  });
});
