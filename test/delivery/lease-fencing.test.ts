import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { finishAttempt, leaseDueDeliveries, recordDeliveredAttempts, type LeasedDelivery } from '../../server/domain/delivery/delivery-store.js';
import { startTestService, type TestService } from '../support/service.js';
import { attemptsOf, delivery, emitEvent, registerWebhook } from './events.js';
import { WebhookReceiver } from './receiver.js';

// Two workers and one delivery, at the store against the real database: worker A's lease expires
// mid-attempt (slow DNS, a stalled connection), worker B leases the delivery again, and A's result
// arrives late. This service serves the API only, so no drain loop of its own takes the delivery.

let t: TestService;
let receiver: WebhookReceiver;
let merchant: { merchantId: string; apiKey: string };

beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
  t = await startTestService({ ROLE: 'api' });
  merchant = await t.createMerchant('Fenced');
  await registerWebhook(t, merchant.apiKey, receiver.url('/fenced'));
});
afterAll(async () => {
  await t.stop();
  await receiver.stop();
});

const em = () => t.service.container.orm.em;
const lease = () => t.inContext(() => leaseDueDeliveries(em(), 10, 60_000, 16));
const expireLeases = (id: string) => t.sql(`UPDATE webhook_deliveries SET lease_until = now() - interval '1 second' WHERE id = $1`, [id]);
const attempt = (leased: LeasedDelivery, responseStatus: number | null) => ({
  deliveryId: leased.id, attemptNumber: leased.attempts + 1, trigger: 'scheduled' as const, responseStatus, error: responseStatus === 200 ? null : 'HTTP 503', durationMs: 5,
});
const lateFailure = (leased: LeasedDelivery) =>
  t.inContext(() =>
    finishAttempt(em(), leased.id, leased.leaseToken, { url: leased.url, responseStatus: 503, error: 'HTTP 503', next: { kind: 'retry', delayMs: 3_600_000 } }, attempt(leased, 503)),
  );
const success = (leased: LeasedDelivery) =>
  t.inContext(() => recordDeliveredAttempts(em(), [{ ...attempt(leased, 200), url: leased.url, leaseToken: leased.leaseToken }]));

/** A due delivery leased by worker A, whose lease then expired and was taken by worker B. */
async function takenOver(): Promise<{ a: LeasedDelivery; b: LeasedDelivery }> {
  const { deliveryId } = await emitEvent(t, merchant.merchantId, { notify: false });
  const [a] = await lease();
  expect(a?.id).toBe(deliveryId);
  await expireLeases(deliveryId);
  const [b] = await lease();
  expect(b?.id).toBe(deliveryId);
  expect(b!.leaseToken).not.toBe(a!.leaseToken);
  return { a: a!, b: b! };
}

describe('an attempt whose lease was taken over', () => {
  it('cannot turn a delivery the new holder delivered back into retrying, nor add to its history', async () => {
    const { a, b } = await takenOver();
    expect((await success(b)).size).toBe(1);
    const delivered = await delivery(t, b.id);

    expect(await lateFailure(a)).toBeNull();
    const after = await delivery(t, b.id);
    expect(after).toEqual(delivered);
    expect(after.status).toBe('delivered');
    expect(await attemptsOf(t, b.id)).toEqual([expect.objectContaining({ attempt_number: 1, response_status: 200 })]);
  });

  it('leaves the new holder\'s live lease alone, and the new holder records its own result', async () => {
    const { a, b } = await takenOver();
    const leasedByB = await delivery(t, b.id);

    expect(await lateFailure(a)).toBeNull();
    expect((await success(a)).size).toBe(0);
    expect(await delivery(t, b.id)).toEqual(leasedByB);
    expect(await attemptsOf(t, b.id)).toEqual([]);
    // Still B's: nobody else can lease it, and B's failure counts as the first scheduled attempt.
    expect(await lease()).toEqual([]);
    expect(await lateFailure(b)).toEqual({ status: 'retrying', nextAttemptAt: expect.any(Date), endedUnregistered: false });
    expect(await attemptsOf(t, b.id)).toEqual([expect.objectContaining({ attempt_number: 1, response_status: 503 })]);
    expect((await delivery(t, b.id)).lease_until).toBeNull();
  });

  it('is recorded when nobody took the delivery over, even after its lease expired', async () => {
    const { deliveryId } = await emitEvent(t, merchant.merchantId, { notify: false });
    const [a] = await lease();
    await expireLeases(deliveryId);
    expect((await success(a!)).size).toBe(1);
    expect((await delivery(t, deliveryId)).status).toBe('delivered');
  });
});
