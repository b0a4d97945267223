import type { SandboxDeps } from '../module.js';
import { unitOfWork } from '../sql.js';
import type { PendingEvent } from './events.js';
import { eventJobs } from './events.js';
import { commitWithJobs } from './jobs.js';
import type { IntentRow, RefundRow } from './objects.js';
import { cardOf, refundObject } from './objects.js';
import { paymentMethodById } from './store.js';

export const SETTLE_REFUND_JOB = 'sandbox.cardpay.settle-refund';

/** How long after its creation a test card's refund changes status (a little after the creation's own events). */
export const settleDelayMs = (deps: SandboxDeps) => Math.max(deps.config.sandboxCallbackDelayMs, 50) * 3;

/**
 * The later half of a test card's refund (test-cards.ts `refund`): a pending refund succeeds, or a
 * succeeded one fails with expired_or_canceled_card and its amount is no longer refunded on the charge.
 * Runs once: a refund already in its final status is left alone. Its events are committed with it.
 */
export async function settleRefund(deps: SandboxDeps, refundId: string): Promise<void> {
  await unitOfWork(deps.pool, async (db) => {
    const [refund] = await db.query<RefundRow & { failure_reason: string | null }>('SELECT * FROM sandbox_cardpay_refunds WHERE id = ? FOR UPDATE', [refundId]);
    if (!refund) return;
    const [intent] = await db.query<IntentRow>('SELECT * FROM sandbox_cardpay_intents WHERE id = ? FOR UPDATE', [refund.payment_intent]);
    const pm = intent ? await paymentMethodById(db, intent.payment_method) : null;
    const behaviour = pm ? cardOf(pm).refund : undefined;
    let events: PendingEvent[] = [];
    if (behaviour === 'pending_then_succeeded' && refund.status === 'pending') {
      await db.query(`UPDATE sandbox_cardpay_refunds SET status = 'succeeded' WHERE id = ?`, [refundId]);
      const object = refundObject({ ...refund, status: 'succeeded' });
      events = [{ type: 'refund.updated', object }, { type: 'charge.refund.updated', object }];
    }
    if (behaviour === 'succeeded_then_failed' && refund.status === 'succeeded') {
      const failureReason = 'expired_or_canceled_card';
      await db.query(`UPDATE sandbox_cardpay_refunds SET status = 'failed', failure_reason = ? WHERE id = ?`, [failureReason, refundId]);
      await db.query('UPDATE sandbox_cardpay_intents SET amount_refunded = amount_refunded - ?, updated_at = now() WHERE id = ?', [refund.amount, refund.payment_intent]);
      const object = refundObject({ ...refund, status: 'failed', failure_reason: failureReason });
      events = [{ type: 'refund.updated', object }, { type: 'charge.refund.updated', object }, { type: 'refund.failed', object }];
    }
    await commitWithJobs(db, [eventJobs(deps, refund.account, events, null)]);
  });
}
