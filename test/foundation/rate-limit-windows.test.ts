import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RateLimiter } from '../../server/domain/auth/rate-limiter.js';
import { startTestService, type TestService } from '../support/service.js';

// The rows the per-key (and per-callback-address) rate limits are counted in, `rate_limit_windows`:
// - a window's row names its length, so a limiter per second and one per minute of the same key (a
//   rolling change of RATE_LIMIT_PER_MINUTE to RATE_LIMIT_PER_SECOND) never read each other's count.

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => {
  await t?.stop();
});

const limiter = (limit: number, windowMs: number) => new RateLimiter(t.service.container.orm.em, { limit, windowMs });
const rowsOf = (bucket: string) =>
  t.sql<{ bucket: string; count: number }>(`SELECT bucket, count FROM rate_limit_windows WHERE bucket LIKE $1 || '%' ORDER BY bucket`, [bucket]);

describe('a rolling change from a per-minute to a per-second limit', () => {
  it('counts each window length apart: the per-second processes do not read the per-minute count', async () => {
    const keyId = randomUUID();
    const perMinute = limiter(1000, 60_000);
    const perSecond = limiter(5, 1000);
    // The start of the current minute: the first second of the minute begins at the same instant.
    const t0 = Math.floor(Date.now() / 60_000) * 60_000;
    for (let i = 0; i < 20; i += 1) expect((await t.inContext(() => perMinute.hit(keyId, t0))).allowed).toBe(true);

    const verdict = await t.inContext(() => perSecond.hit(keyId, t0 + 10));
    expect(verdict).toMatchObject({ allowed: true, limit: 5, remaining: 4 });
    expect(await rowsOf(keyId)).toEqual([{ bucket: `${keyId}/1s`, count: 1 }, { bucket: `${keyId}/60s`, count: 20 }]);
  });
});
