/** The events a merchant's webhook receives (interface.md "Events", decisions.md "Refunds"; `webhook.test` on request). */
export const MERCHANT_EVENT_TYPES = ['payment.completed', 'payment.failed', 'payment.refunded', 'payment.reversed', 'refund.failed', 'webhook.test'] as const;
export type MerchantEventType = (typeof MERCHANT_EVENT_TYPES)[number];
/** The events a payment's transitions emit through the outbox. */
export type PaymentEventType = Exclude<MerchantEventType, 'webhook.test'>;

export interface MerchantEventData {
  payment_id: string;
  amount: string;
  currency: string;
  provider: string;
  status: string;
  previous_status: string;
  /** payment.refunded / refund.failed / payment.reversed only. */
  refund_id?: string;
  amount_refunded?: string;
  failure_reason?: string;
}

/** The exact body POSTed to the merchant; stored once so every retry sends the same bytes. */
export interface MerchantEventPayload {
  id: string;
  type: MerchantEventType;
  created_at: string;
  data: MerchantEventData;
}
