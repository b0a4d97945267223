import type { Payment } from '../../persistence/entities/index.js';
import { RECONCILE_MAX_WINDOW_MS } from '../operations/reconcile-windows.js';
import { ProviderError, type PaymentLookup, type ProviderPaymentResult, type ProviderPort } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';

/**
 * How far from the end of the provider's idempotency-key retention a lost create is no longer repeated:
 * the repeat must reach the provider while it still knows the key, whatever the time a call takes (it
 * may be retried) and however far our clock is from the provider's. The payment's created_at is taken
 * before the first request is sent, so the key is never older than the payment.
 */
export const REPLAY_MARGIN_MS = 3_600_000;

/**
 * A creation that cannot be repeated (mobilemoney's push) whose answer was lost is found by reconciliation
 * only: the provider's list of settled transactions, which reaches back RECONCILE_MAX_WINDOW_MS (the
 * operator keeps 48 h). A push is paid within minutes of being sent (the customer's prompt expires), so
 * past that window and an hour's margin (the prompt's life, the clocks, a transaction listed late) no
 * pull can find its charge any more, and nothing else would ever settle the payment.
 */
export const UNREPEATABLE_CREATION_FINDABLE_MS = RECONCILE_MAX_WINDOW_MS + 3_600_000;

/**
 * Until when a charge made by `payment`'s lost creation can still be found, for a provider whose creation
 * cannot be repeated and that lists its settled transactions; null otherwise (nothing is judged by time).
 */
export function lostCreationFindableUntil(port: ProviderPort, payment: Payment): number | null {
  if (port.capabilities.replayableCreate || !port.operations?.listTransactions) return null;
  return payment.createdAt.getTime() + UNREPEATABLE_CREATION_FINDABLE_MS;
}

/**
 * What to do about a pending payment whose creation's answer was lost (it has no provider reference):
 * - `found`: the provider has it (found by our payment id): apply its answer;
 * - `resend`: send the create again with the same idempotency key — the provider has no such payment
 *   or could not be asked, and a repeat is still answered with the original result (within the
 *   provider's idempotency-key retention, less REPLAY_MARGIN_MS, or a provider whose repeats cannot charge);
 * - `absent`: the provider has no payment of ours by that id and it is too late to repeat the create
 *   (the provider forgot the key: a repeat would be a second, new charge) — or, where the create cannot be
 *   repeated, no charge was found while reconciliation could find one (lostCreationFindableUntil). Nothing
 *   was charged (to the service's knowledge): the payment fails with `reason`, which tells the merchant to
 *   create a new one (a charge found after all is reported charged_but_failed: the status writer);
 * - `unknown`: nothing can be learned now (the lookup failed, or the provider cannot look a payment up
 *   by our id and the repeat is too late, or a create that cannot be repeated is left to reconciliation):
 *   the payment stays pending for the next check, then for the operator (payments_unresolved), and is
 *   never sent again.
 * Status sync uses it; so must anything else that would repeat a create (a resumed creation request).
 */
export type LostCreation =
  | { kind: 'found'; result: ProviderPaymentResult }
  | { kind: 'resend' }
  | { kind: 'absent'; reason: string }
  | { kind: 'unknown'; reason: string };

export async function recoverLostCreation(gateway: ProviderGateway, payment: Payment, lookup: PaymentLookup, now = Date.now()): Promise<LostCreation> {
  const port = gateway.port(payment.provider);
  const { capabilities } = port;
  if (!capabilities.replayableCreate) {
    const findableUntil = lostCreationFindableUntil(port, payment);
    if (findableUntil !== null && now >= findableUntil) {
      const hours = Math.round(RECONCILE_MAX_WINDOW_MS / 3_600_000);
      return {
        kind: 'absent',
        reason:
          `${payment.provider} never answered the request creating this payment, and no charge for it was found while it could be (its ` +
          `settled transactions are listed for ${hours} h). Nothing was charged to the service's knowledge; create a new payment if the customer still wants to pay.`,
      };
    }
    return { kind: 'unknown', reason: `${payment.provider} creation cannot be repeated; reconciliation finds the payment` };
  }
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
