import type { PaymentStatus, RefundStatus } from '../../../contract/index.js';
import type { PaymentEventType } from '../events/merchant-events.js';

/**
 * THE table of allowed status moves (interface.md "States and transitions", decisions.md "Refunds"),
 * read only by the status writer. Anything not listed is refused and recorded: terminal statuses never
 * move, `completed` never goes back. Each edge names the merchant event it emits, and whether it moves
 * money (then the provider's reported amount and currency must equal ours: the integrity check).
 *
 * - Payment edges `via: 'provider'` follow a provider's report about the payment itself; `via: 'refund'`
 *   edges follow only from a refund completing (the refund's amount was checked on the refund edge).
 * - A refund that completes emits `payment.refunded`, unless it moves the payment — then the payment
 *   edge's event is the one emitted (`payment.refunded` at the full amount, `payment.reversed`).
 */
export interface Edge<S extends string> {
  from: S;
  to: S;
  event: PaymentEventType;
  movesMoney: boolean;
}

export interface PaymentEdge extends Edge<PaymentStatus> {
  via: 'provider' | 'refund';
}

export const PAYMENT_EDGES: readonly PaymentEdge[] = [
  { from: 'pending', to: 'completed', event: 'payment.completed', movesMoney: true, via: 'provider' },
  { from: 'pending', to: 'failed', event: 'payment.failed', movesMoney: false, via: 'provider' },
  { from: 'completed', to: 'refunded', event: 'payment.refunded', movesMoney: true, via: 'refund' },
  { from: 'completed', to: 'reversed', event: 'payment.reversed', movesMoney: true, via: 'refund' },
];

export const REFUND_EDGES: readonly Edge<RefundStatus>[] = [
  { from: 'pending', to: 'completed', event: 'payment.refunded', movesMoney: true },
  { from: 'pending', to: 'failed', event: 'refund.failed', movesMoney: false },
  // A card refund the provider reports failed after it succeeded (the card expired or was closed): the
  // money went back to the merchant, so amount_refunded is lowered. The payment's own status stays.
  { from: 'completed', to: 'failed', event: 'refund.failed', movesMoney: true },
];

export function paymentEdge(from: PaymentStatus, to: PaymentStatus): PaymentEdge | null {
  return PAYMENT_EDGES.find((e) => e.from === from && e.to === to) ?? null;
}

export function refundEdge(from: RefundStatus, to: RefundStatus): Edge<RefundStatus> | null {
  return REFUND_EDGES.find((e) => e.from === from && e.to === to) ?? null;
}
