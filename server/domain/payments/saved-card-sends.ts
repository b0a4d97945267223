import type { EntityManager } from '@mikro-orm/postgresql';
import type { Payment } from '../../persistence/entities/index.js';
import { ProviderError, type CreatePaymentInput, type ProviderPaymentResult } from '../ports.js';
import type { ProviderGateway } from './provider-gateway.js';

/**
 * A payment that charges a saved card (provider_data.saved_card_id) has its create sent only while the card is
 * active, and a DELETE of the card answers 200 only once no create of it is being sent. The DELETE wins over
 * every send that had not begun when it committed; a send already under way then wins, and the DELETE waits
 * for it (at most its lease):
 * - right before each send of the create (the first, a resumed request's after a dead one, the status sync's
 *   repeat), ONE statement reads the card FOR SHARE and, only if it is active, marks the payment's create as
 *   being sent (payments.card_send_until, a lease: the longest the call can take);
 * - once the provider's answer says what it did, the mark is ended (set to now, never back to NULL: a
 *   payment whose card_send_until is NULL never had a create sent); an answer that does not say (no answer
 *   in time, a 5xx) leaves it to its lease, as a process dying mid-send does;
 * - the DELETE reads the card FOR UPDATE (so it waits for a mark being written, and a mark written after its
 *   commit finds the card inactive) and deactivates it; then, after its commit, it waits until the marks of
 *   that card's creates ended (the provider answered) or their lease ran out (SavedCardService.remove).
 * No connection is held across the provider call. A payment whose card was deleted is never sent again
 * (deletedCardVerdict: failed at once when no create of it was ever sent, else left to the status sync).
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

/** Why a payment whose saved card was deleted before any create of it was sent is failed (deletedCardVerdict). */
export function cardDeletedReason(payment: Pick<Payment, 'provider'>, cardId: string): string {
  return (
    `the saved card ${cardId} was deleted (DELETE /v1/payments/cards/${cardId}) before this payment's charge was ever sent to ${payment.provider}: ` +
    `nothing was charged. Create a new payment with another card if the customer still wants to pay.`
  );
}

export type CreateSend =
  | { kind: 'sent'; result: ProviderPaymentResult }
  /** Not sent: the card is no longer active. `sentBefore`: a create of the payment was sent before (its mark was ever set). */
  | { kind: 'card_deleted'; cardId: string; sentBefore: boolean };

/**
 * What a payment whose saved card was deleted before its create could be sent (again) becomes — the one
 * decision, for the first send, a resumed request's and the status sync's repeat:
 * - no create of it was ever sent (card_send_until never set): nothing can have been charged — `failed` now,
 *   with cardDeletedReason;
 * - a create was sent before (a timeout, a stored 500, a request that died after its mark): the provider may
 *   have it, and a lookup that finds none proves little (cardpay's search trails its writes by up to a
 *   minute, an hour in an incident). It is never sent again and stays `pending` for the status sync, whose
 *   verdicts settle it (lost-creation.ts): `found` by the provider's answer, `absent` once the create could
 *   no longer be repeated and the provider has none of it (nothing charged, proven).
 */
export function deletedCardVerdict(payment: Pick<Payment, 'provider'>, deleted: Extract<CreateSend, { kind: 'card_deleted' }>):
  { kind: 'failed'; failureReason: string } | { kind: 'pending'; reason: string } {
  if (!deleted.sentBefore) return { kind: 'failed', failureReason: cardDeletedReason(payment, deleted.cardId) };
  return {
    kind: 'pending',
    reason: `its saved card ${deleted.cardId} was deleted since a create of it was sent to ${payment.provider}; not sent again; the status sync asks ${payment.provider} about it`,
  };
}

/**
 * Sends the provider's create of `payment` (`input`: creationInput) — unless it charges a saved card that is
 * no longer active (deleted, or not the merchant's): then nothing is sent (`card_deleted`). A provider error is
 * thrown as the gateway's. `knownCreds`: see ProviderGateway.createPayment. The send's mark is ended once the
 * provider's answer says what it did (a result, or a ProviderError other than `indeterminate`); after an
 * outcome that does not (no answer in time, a 5xx, anything else thrown) the request may still be running at
 * the provider, and the mark is left to its lease: the DELETE of the card waits for it.
 */
export async function sendCreate(em: EntityManager, gateway: ProviderGateway, payment: Payment, input: CreatePaymentInput, leaseMs: number, knownCreds?: unknown): Promise<CreateSend> {
  const cardId = savedCardOf(payment);
  if (cardId) {
    const mark = await markCardSend(em, payment, cardId, leaseMs);
    if (!mark.marked) return { kind: 'card_deleted', cardId, sentBefore: mark.sentBefore };
  }
  let result: ProviderPaymentResult;
  try {
    result = await gateway.createPayment(payment, input, knownCreds);
  } catch (err) {
    if (cardId && err instanceof ProviderError && err.kind !== 'indeterminate') await endCardSend(em, payment.id);
    throw err;
  }
  if (cardId) await endCardSend(em, payment.id);
  return { kind: 'sent', result };
}

/**
 * The provider answered a send: its mark ends now (a DELETE waiting for it answers), and stays set — in the
 * past — as the record that a create of the payment was sent (deletedCardVerdict). Should this write fail,
 * the mark runs out with its lease.
 */
async function endCardSend(em: EntityManager, paymentId: string): Promise<void> {
  await em.fork().execute('UPDATE payments SET card_send_until = LEAST(card_send_until, clock_timestamp()) WHERE id = ? AND card_send_until > clock_timestamp()', [paymentId], 'run').catch(() => undefined);
}

/**
 * Marks the payment's create as being sent if its card is an active card of the merchant: whether it did,
 * and whether a create of it was marked (sent) before.
 */
async function markCardSend(em: EntityManager, payment: Payment, cardId: string, leaseMs: number): Promise<{ marked: boolean; sentBefore: boolean }> {
  const [row] = await em.fork().execute<{ marked: boolean; sent_before: boolean }[]>(
    `WITH card AS (SELECT active FROM saved_cards WHERE id = ?::uuid AND merchant_id = ? FOR SHARE),
      marked AS (
        UPDATE payments SET card_send_until = clock_timestamp() + (? * interval '1 millisecond')
         WHERE id = ? AND COALESCE((SELECT active FROM card), false)
        RETURNING id)
    SELECT EXISTS (SELECT 1 FROM marked) AS marked,
           EXISTS (SELECT 1 FROM payments WHERE id = ? AND card_send_until IS NOT NULL) AS sent_before`,
    [cardId, payment.merchantId, leaseMs, payment.id, payment.id],
  );
  return { marked: row?.marked === true, sentBefore: row?.sent_before === true };
}

/**
 * Waits (polling, no connection held in between) until no create of the card is being sent: every mark
 * ended, or expired (each at most its lease after it was set, as the database's clock says). Called by the
 * DELETE after the commit that deactivated the card.
 */
export async function waitForCardSends(em: EntityManager, merchantId: string, cardId: string): Promise<void> {
  let deadline: number | null = null;
  for (;;) {
    const [row] = await em.fork().execute<{ left_ms: number | null }[]>(
      `SELECT (extract(epoch FROM max(card_send_until) - clock_timestamp()) * 1000)::float8 AS left_ms
         FROM payments
        WHERE provider_data \\? 'saved_card_id' AND provider_data->>'saved_card_id' = ? AND merchant_id = ? AND card_send_until > clock_timestamp()`,
      [cardId, merchantId],
    );
    if (row?.left_ms == null) return;
    deadline ??= Date.now() + row.left_ms + 1_000;
    if (Date.now() >= deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
