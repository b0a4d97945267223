import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../errors.js';

export interface TransitionRow {
  subject: 'payment' | 'refund';
  refund_id: string | null;
  from_status: string | null;
  to_status: string;
  trigger: string;
  accepted: boolean;
  note: string | null;
  created_at: Date;
}

/** Reads a payment's transition audit (payment_transitions), for GET /v1/payments/{id}/transitions. */
export class PaymentHistory {
  constructor(private readonly em: EntityManager) {}

  /** Oldest first, refused moves included; another merchant's payment is not found. */
  async transitions(merchantId: string, paymentId: string): Promise<TransitionRow[]> {
    const owned = await this.em.execute<{ id: string }[]>('SELECT id FROM payments WHERE id = ? AND merchant_id = ?', [paymentId, merchantId]);
    if (owned.length === 0) throw notFound('payment');
    return this.em.execute<TransitionRow[]>(
      'SELECT subject, refund_id, from_status, to_status, trigger, accepted, note, created_at FROM payment_transitions WHERE payment_id = ? ORDER BY id',
      [paymentId],
    );
  }
}
