import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { ChangeNotifications, type ChangeFeed } from '../../server/persistence/change-notifications.js';
import { NotifiedCache } from '../../server/persistence/notified-cache.js';
import { adminDatabaseUrl } from '../support/database.js';

/**
 * The wall clock of a server may be stepped back (NTP correcting a fast clock, a VM resumed from a
 * snapshot). The caches of API keys and credentials must not then serve entries longer, nor the change
 * feed call itself current without asking the database: a key revoked, or credentials deleted, in another
 * process would stay in use here for as long as the step (an hour, below).
 */
const HOUR = 3_600_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function stepWallClockBack(ms: number): void {
  const realNow = Date.now.bind(Date);
  jest.spyOn(Date, 'now').mockImplementation(() => realNow() - ms);
}

afterEach(() => {
  jest.restoreAllMocks();
});

describe('a wall clock stepped back', () => {
  it('does not keep a cached entry past its time to live', async () => {
    const feed: ChangeFeed = { isCurrent: () => true, subscribe: () => undefined };
    const cache = new NotifiedCache<string>(feed, { tables: ['api_keys'], merchantOf: () => 'm', ttlMs: 100, maxEntries: 10 });
    expect(await cache.get('k', async () => 'as it was')).toBe('as it was');

    stepWallClockBack(HOUR);
    await sleep(150);
    expect(await cache.get('k', async () => 'as it is now')).toBe('as it is now');
  });

  it('does not make the change feed current without a confirmation: it asks the database again', async () => {
    let queries = 0;
    const feed = new ChangeNotifications(adminDatabaseUrl(), { channel: `wall_clock_${randomUUID().replace(/-/g, '')}`, freshnessMs: 200, onQuery: () => (queries += 1) });
    await feed.start();
    try {
      expect(feed.isCurrent()).toBe(true);
      const before = queries;

      stepWallClockBack(HOUR);
      await sleep(250);
      // Nothing confirmed for longer than freshnessMs: not current (the caches read the database), and a heartbeat goes out.
      expect(feed.isCurrent()).toBe(false);
      expect(queries).toBeGreaterThan(before);
      // Once it is answered, current again.
      await sleep(100);
      expect(feed.isCurrent()).toBe(true);
    } finally {
      await feed.stop();
    }
  });
});
