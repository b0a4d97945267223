import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { IdempotencyKeys } from '../../server/domain/payments/idempotency-keys.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * A claimed Idempotency-Key's lease must outlast its request's provider calls, however many there are:
 * some paths make several (a token wait and fetch, a 401's repeat, a follow-up read), each bounded by
 * PROVIDER_TIMEOUT_MS, more than the lease covers. The live request renews its lease; a concurrent
 * request with the key waits for its answer instead of taking the lease over and acting a second time.
 * Here the action outlasts a 3 s lease (as a chain of calls near their 1 s timeout would).
 */
let t: TestService;
let keys: IdempotencyKeys;

beforeAll(async () => {
  t = await startTestService({ IDEMPOTENCY_LEASE: '3s', PROVIDER_TIMEOUT_MS: '1000' });
  keys = (t.service.container.services.refunds as unknown as { idempotency: IdempotencyKeys }).idempotency;
});
afterAll(async () => {
  await t.stop();
});

describe('a request whose provider calls outlast the lease', () => {
  it('keeps its claim: a concurrent request with the key gets its answer, the action runs once', async () => {
    const { merchantId } = await t.createMerchant('Long Path Shop');
    const request = { scope: 'payment.capture' as const, merchantId, key: `lease-${Date.now()}`, requestHash: 'h' };
    const resourceId = randomUUID();
    let acted = 0;
    let firstDone = false;
    const action = {
      reserve: async () => resourceId,
      act: async () => {
        acted += 1;
        // Provider calls that take longer than the lease in all.
        await new Promise((r) => setTimeout(r, 5_000));
        firstDone = true;
        return 'answer';
      },
      load: async () => 'answer',
    };
    const first = t.inContext(() => keys.run(request, 200, action));
    await new Promise((r) => setTimeout(r, 300));
    // A retry with the key while the first is still calling the provider (it waits up to 10 s).
    const second = await t.inContext(() => keys.run(request, 200, action));
    expect(firstDone).toBe(true);
    expect(second).toEqual({ value: 'answer', replayed: true });
    expect(await first).toEqual({ value: 'answer', replayed: false });
    expect(acted).toBe(1);
  }, 30_000);
});
