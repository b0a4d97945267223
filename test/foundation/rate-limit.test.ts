import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startTestService, type TestService } from '../support/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ RATE_LIMIT_PER_MINUTE: '5' });
});
afterAll(async () => t.stop());

describe('rate limiting per API key', () => {
  it('answers 429 RATE_LIMITED with Retry-After past the per-minute budget, per key', async () => {
    const a = await t.createMerchant('Busy');
    const b = await t.createMerchant('Quiet');
    const statuses: number[] = [];
    let limited;
    for (let i = 0; i < 12; i += 1) {
      const res = await t.http.get('/v1/merchant').set('X-API-Key', a.apiKey);
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    // Twelve quick requests span at most two one-minute windows: at most five pass in each.
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(10);
    expect(statuses.slice(0, 5)).not.toContain(429);
    expect(statuses).toContain(429);
    expect(limited!.body).toMatchObject({ success: false, error: { code: 'RATE_LIMITED' } });
    expect(Number(limited!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(limited!.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect((await t.http.get('/v1/merchant').set('X-API-Key', b.apiKey)).status).toBe(200);
  });
});
