import type { Payment } from '../../persistence/entities/index.js';
import { ProviderError, type PaymentLookup, type ProviderPaymentResult } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';

/**
 * How far from the end of the provider's idempotency-key retention a lost create is no longer repeated:
 * the repeat must reach the provider while it still knows the key, whatever the time a call takes (it
 * may be retried) and however far our clock is from the provider's. The payment's created_at is taken
 * before the first request is sent, so the key is never older than the payment.
 */
export const REPLAY_MARGIN_MS = 3_600_000;

/**
 * What to do about a pending payment whose creation's answer was lost (it has no provider reference):
 * - `found`: the provider has it (found by our payment id): apply its answer;
 * - `resend`: send the create again with the same idempotency key — the provider has no such payment
 *   or could not be asked, and a repeat is still answered with the original result (within the
 *   provider's idempotency-key retention, less REPLAY_MARGIN_MS, or a provider whose repeats cannot charge);
 * - `absent`: the provider has no payment of ours by that id and it is too late to repeat the create
 *   (the provider forgot the key: a repeat would be a second, new charge). Nothing was charged: the
 *   payment fails with `reason`, which tells the merchant to create a new one;
 * - `unknown`: nothing can be learned now (the lookup failed, or the provider cannot look a payment up
 *   by our id and the repeat is too late): the payment stays pending for the next check, then for the
 *   operator (payments_unresolved), and is never sent again.
 * Status sync uses it; so must anything else that would repeat a create (a resumed creation request).
 */
export type LostCreation =
  | { kind: 'found'; result: ProviderPaymentResult }
  | { kind: 'resend' }
  | { kind: 'absent'; reason: string }
  | { kind: 'unknown'; reason: string };

export async function recoverLostCreation(gateway: ProviderGateway, payment: Payment, lookup: PaymentLookup, now = Date.now()): Promise<LostCreation> {
  const { capabilities } = gateway.port(payment.provider);
  if (!capabilities.replayableCreate) return { kind: 'unknown', reason: `${payment.provider} creation cannot be repeated; reconciliation finds the payment` };
  let found: ProviderPaymentResult | null | undefined;
  let lookupFailed: string | null = null;
  try {
    found = await gateway.findPayment(payment, lookup);
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    lookupFailed = err.message;
  }
  if (found) return { kind: 'found', result: found };
  const window = capabilities.createReplayWindowMs;
  if (window === null || now - payment.createdAt.getTime() < window - REPLAY_MARGIN_MS) return { kind: 'resend' };
  if (found === null) {
    const hours = Math.round(window / 3_600_000);
    return {
      kind: 'absent',
      reason:
        `${payment.provider} has no payment with this id: the request creating it never reached the provider, and it can no longer be ` +
        `sent again (after ${hours} h the provider would take it as a new charge). Nothing was charged; create a new payment if the customer still wants to pay.`,
    };
  }
  return {
    kind: 'unknown',
    reason: lookupFailed
      ? `${payment.provider} could not be asked about the payment (${lookupFailed}); too late to send its creation again`
      : `${payment.provider} cannot look the payment up without its reference; too late to send its creation again`,
  };
}
