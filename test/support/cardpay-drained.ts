import { SEND_EVENT_JOB } from '../../server/sandbox/cardpay/events.js';
import { SETTLE_REFUND_JOB } from '../../server/sandbox/cardpay/refund-settlement.js';
import type { TestService } from './service.js';
import { eventually } from './webhook-receiver.js';

/**
 * Waits until the cardpay simulator has nothing left to do about a payment — no event of its intent or
 * refunds still to send (or to send again), no refund of it still to settle — and the service has
 * delivered every webhook of the payment. Only then is a count of what happened exactly once final.
 * `refs`: the payment's intent id and the provider ids of its refunds (the jobs' data names these).
 */
export async function cardpayDrained(t: TestService, paymentId: string, refs: string[], timeoutMs = 20_000): Promise<void> {
  const patterns = refs.map((ref) => `%${ref}%`);
  await eventually(async () => {
    const queued = await t.sql('SELECT 1 FROM agenda_jobs WHERE name = ANY($1) AND data::text LIKE ANY($2) LIMIT 1', [[SEND_EVENT_JOB, SETTLE_REFUND_JOB], patterns]);
    if (queued.length > 0) return false;
    const undelivered = await t.sql(`SELECT 1 FROM webhook_deliveries WHERE payment_id = $1 AND status IN ('pending', 'retrying') LIMIT 1`, [paymentId]);
    return undelivered.length === 0;
  }, timeoutMs, "the simulator's events and the service's webhooks of the payment to be done");
}
