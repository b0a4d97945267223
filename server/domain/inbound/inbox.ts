import type { EntityManager } from '@mikro-orm/postgresql';

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
       WHERE ?::bigint IS NOT NULL AND provider_events.received_at < now() - (?::bigint * interval '1 millisecond')
     RETURNING event_id`,
    [entry.provider, entry.dedupKey, entry.paymentId, entry.outcome, entry.windowMs, entry.windowMs],
  );
  return rows.length > 0;
}
