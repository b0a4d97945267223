import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * A notification the integrity check refused does not use up its id (a payment has one genuine
 * result): the provider's real notification with the same id is still applied when it comes.
 */
const INTEGRITY_REFUSED = 'refused: amount or currency not ours';

/**
 * The one inbox of provider notifications, for every provider: a notification id is stored once per
 * provider inside the transaction that applies it, so a repeat changes nothing. `windowMs` is the
 * provider's de-duplication window (NotificationScheme.dedupWindowMs): null keeps an id for ever; a
 * window lets the same id be applied again once it has passed (the operator re-uses ids after 24 h).
 * Returns false for a repeat.
 */
export async function recordInInbox(
  tx: EntityManager,
  entry: { provider: string; dedupKey: string; paymentId: string | null; outcome: string; windowMs: number | null },
): Promise<boolean> {
  const rows = await tx.execute<{ event_id: string }[]>(
    `INSERT INTO provider_events (provider, event_id, payment_id, outcome) VALUES (?, ?, ?, ?)
     ON CONFLICT (provider, event_id) DO UPDATE SET received_at = now(), payment_id = EXCLUDED.payment_id, outcome = EXCLUDED.outcome
       WHERE (?::bigint IS NOT NULL AND provider_events.received_at < now() - (?::bigint * interval '1 millisecond'))
          OR provider_events.outcome = ?
     RETURNING event_id`,
    [entry.provider, entry.dedupKey, entry.paymentId, entry.outcome, entry.windowMs, entry.windowMs, INTEGRITY_REFUSED],
  );
  return rows.length > 0;
}

/** Marks an inbox entry as refused by the integrity check, so the id may be applied again (see INTEGRITY_REFUSED). */
export async function markRefusedInInbox(tx: EntityManager, provider: string, dedupKey: string): Promise<void> {
  await tx.execute('UPDATE provider_events SET outcome = ? WHERE provider = ? AND event_id = ?', [INTEGRITY_REFUSED, provider, dedupKey], 'run');
}
