import type { WebhookEventType } from '../../../contract/index.js';

/**
 * The events a merchant's webhook receives: declared once, in the contract (WEBHOOK_EVENT_TYPES;
 * interface.md "Events", decisions.md "Refunds"; `webhook.test` on request).
 */
export type MerchantEventType = WebhookEventType;
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
  /** refund.failed only (payment events carry none). */
  failure_reason?: string;
}

/** The exact body POSTed to the merchant; stored once so every retry sends the same bytes. */
export interface MerchantEventPayload {
  id: string;
  type: MerchantEventType;
  created_at: string;
  data: MerchantEventData;
}
