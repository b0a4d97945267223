import type { PaymentStatus } from '../../persistence/entities/index.js';
import type { MerchantEventType } from '../events/merchant-events.js';

/**
 * The payment state machine of interface.md "States and transitions", in one place. Anything not in
 * this table is refused (and recorded by the caller): terminal states never move, and `completed`
 * never goes back to `pending` or `failed`.
 */
const TRANSITIONS: Record<PaymentStatus, Partial<Record<PaymentStatus, MerchantEventType>>> = {
  pending: { completed: 'payment.completed', failed: 'payment.failed' },
  completed: { refunded: 'payment.refunded', reversed: 'payment.reversed' },
  failed: {},
  refunded: {},
  reversed: {},
};

export const TERMINAL_STATUSES: readonly PaymentStatus[] = ['failed', 'refunded', 'reversed'];

export function canTransition(from: PaymentStatus, to: PaymentStatus): boolean {
  return TRANSITIONS[from][to] !== undefined;
}

/** The merchant event a transition emits. */
export function eventFor(from: PaymentStatus, to: PaymentStatus): MerchantEventType {
  const event = TRANSITIONS[from][to];
  if (!event) throw new Error(`no transition ${from} → ${to}`);
  return event;
}
