import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Stores a verified callback once per (provider, event id) inside the transaction that applies it.
 * Returns false for a repeat: the caller acknowledges it and changes nothing.
 */
export async function recordCallbackOnce(tx: EntityManager, provider: string, eventId: string, paymentId: string | null, outcome: string): Promise<boolean> {
  const rows = await tx.execute<{ event_id: string }[]>(
    `INSERT INTO provider_events (provider, event_id, payment_id, outcome) VALUES (?, ?, ?, ?)
     ON CONFLICT (provider, event_id) DO NOTHING RETURNING event_id`,
    [provider, eventId, paymentId, outcome],
  );
  return rows.length > 0;
}
