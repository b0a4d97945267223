import type { EntityManager } from '@mikro-orm/postgresql';
import type { Payment } from '../../persistence/entities/index.js';
import type { CreatePaymentInput, ProviderPaymentResult } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';

/**
 * A payment that charges a saved card (provider_data.saved_card_id) has its create sent only while the card is
 * active, and a DELETE of the card answers 200 only once no create of it is being sent. The DELETE wins over
 * every send that had not begun when it committed; a send already under way then wins, and the DELETE waits
 * for it (at most its lease):
 * - right before each send of the create (the first, a resumed request's after a dead one, the status sync's
 *   repeat), ONE statement reads the card FOR SHARE and, only if it is active, marks the payment's create as
 *   being sent (payments.card_send_until, a lease: the longest the call can take);
 * - the DELETE reads the card FOR UPDATE (so it waits for a mark being written, and a mark written after its
 *   commit finds the card inactive) and deactivates it; then, after its commit, it waits until the marks of
 *   that card's creates are cleared (the provider answered) or their lease ran out (SavedCardService.remove).
 * No connection is held across the provider call; a process dying mid-send leaves its mark to expire.
 */

/** How long a send's mark holds a DELETE of its card: a write may go twice (a reset connection is retried once), each up to the provider timeout. */
export function cardSendLeaseMs(providerTimeoutMs: number): number {
  return 2 * providerTimeoutMs + 10_000;
}

/** The saved card a payment charges, or null. */
export function savedCardOf(payment: Pick<Payment, 'providerData'>): string | null {
  const id = payment.providerData?.saved_card_id;
  return typeof id === 'string' ? id : null;
}

/** Why a payment whose saved card was deleted before its create was sent is failed (the provider has no payment of it). */
export function cardDeletedReason(payment: Pick<Payment, 'provider'>, cardId: string): string {
  return (
    `the saved card ${cardId} was deleted (DELETE /v1/payments/cards/${cardId}) before this payment's charge was sent to ${payment.provider}, ` +
    `which has no payment of it: nothing was charged. Create a new payment with another card if the customer still wants to pay.`
  );
}

export type CreateSend = { kind: 'sent'; result: ProviderPaymentResult } | { kind: 'card_deleted'; cardId: string };

/**
 * Sends the provider's create of `payment` (`input`: creationInput) — unless it charges a saved card that is
 * no longer active (deleted, or not the merchant's): then nothing is sent (`card_deleted`). A provider error is
 * thrown as the gateway's. `knownCreds`: see ProviderGateway.createPayment.
 */
export async function sendCreate(em: EntityManager, gateway: ProviderGateway, payment: Payment, input: CreatePaymentInput, leaseMs: number, knownCreds?: unknown): Promise<CreateSend> {
  const cardId = savedCardOf(payment);
  if (cardId && !(await markCardSend(em, payment, cardId, leaseMs))) return { kind: 'card_deleted', cardId };
  try {
    return { kind: 'sent', result: await gateway.createPayment(payment, input, knownCreds) };
  } finally {
    // The DELETE waiting for this send answers now (or when the lease runs out, should this write fail).
    if (cardId) await em.fork().execute('UPDATE payments SET card_send_until = NULL WHERE id = ? AND card_send_until IS NOT NULL', [payment.id], 'run').catch(() => undefined);
  }
}

/** Marks the payment's create as being sent if its card is an active card of the merchant; whether it did. */
async function markCardSend(em: EntityManager, payment: Payment, cardId: string, leaseMs: number): Promise<boolean> {
  const [row] = await em.fork().execute<{ marked: boolean }[]>(
    `WITH card AS (SELECT active FROM saved_cards WHERE id = ?::uuid AND merchant_id = ? FOR SHARE),
      marked AS (
        UPDATE payments SET card_send_until = clock_timestamp() + (? * interval '1 millisecond')
         WHERE id = ? AND COALESCE((SELECT active FROM card), false)
        RETURNING id)
    SELECT EXISTS (SELECT 1 FROM marked) AS marked`,
    [cardId, payment.merchantId, leaseMs, payment.id],
  );
  return row?.marked === true;
}

/**
 * Waits (polling, no connection held in between) until no create of the card is being sent: every mark
 * cleared, or expired (each at most its lease after it was set, as the database's clock says). Called by the
 * DELETE after the commit that deactivated the card.
 */
export async function waitForCardSends(em: EntityManager, merchantId: string, cardId: string): Promise<void> {
  let deadline: number | null = null;
  for (;;) {
    const [row] = await em.fork().execute<{ left_ms: number | null }[]>(
      `SELECT (extract(epoch FROM max(card_send_until) - clock_timestamp()) * 1000)::float8 AS left_ms
         FROM payments WHERE merchant_id = ? AND card_send_until > clock_timestamp() AND provider_data->>'saved_card_id' = ?`,
      [merchantId, cardId],
    );
    if (row?.left_ms == null) return;
    deadline ??= Date.now() + row.left_ms + 1_000;
    if (Date.now() >= deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
