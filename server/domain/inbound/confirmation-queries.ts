import type { EntityManager } from '@mikro-orm/postgresql';
import { ProviderError } from '../ports.js';

/** One confirmation per subject at a time: forged notifications in a burst cause one provider query, not one each. */
const OPEN_CONFIRMATION_MS = 10 * 60_000;

export interface ConfirmationQuery {
  id: string;
  provider: string;
  merchantId: string;
  paymentId: string | null;
  refundId: string | null;
  /** What the provider is asked about (a receipt, or the provider's id of our request). */
  code: string;
  /** The label of the unverifiable notification it confirms (the answer's audit trigger: `confirmed:<label>`). */
  confirms: string;
}

/**
 * The query unless one still open is found, through provider_status_queries_open_confirmation_idx (only the
 * unanswered confirmations): it runs under the subject's advisory lock, which a scan of every query ever
 * sent would hold for as long as the table is big.
 */
export const OPEN_CONFIRMATION_SQL = `INSERT INTO provider_status_queries (id, provider, merchant_id, payment_id, refund_id, code, confirms)
  SELECT ?, ?, ?, ?, ?, ?, ?
  WHERE NOT EXISTS (SELECT 1 FROM provider_status_queries WHERE provider = ? AND merchant_id = ? AND code = ? AND confirms IS NOT NULL
                    AND completed_at IS NULL AND created_at > now() - (? * interval '1 millisecond'))
  RETURNING id`;

/**
 * Records a status query that confirms an unverifiable notification, unless one about the same
 * transaction is still open (unanswered, younger than OPEN_CONFIRMATION_MS). Returns whether it was recorded.
 *
 * Under READ COMMITTED two of these at once would each see no open query and each insert one (and each
 * ask the operator, against the merchant's quota). A transaction-scoped advisory lock on the subject
 * orders them: the second's INSERT runs once the first has committed, and sees its query.
 */
async function openConfirmation(em: EntityManager, q: ConfirmationQuery): Promise<boolean> {
  return em.fork().transactional(async (tx) => {
    await tx.execute('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`provider_status_queries:${q.provider}:${q.merchantId}:${q.code}`]);
    const rows = await tx.execute<{ id: string }[]>(
      OPEN_CONFIRMATION_SQL,
      [q.id, q.provider, q.merchantId, q.paymentId, q.refundId, q.code, q.confirms, q.provider, q.merchantId, q.code, OPEN_CONFIRMATION_MS],
      'all',
    );
    return rows.length > 0;
  });
}

/**
 * Opens a confirmation query and sends it with `send`: 'asked' (its answer arrives as a status report
 * and is applied then), or 'open' (one about the same transaction is still unanswered: nothing sent).
 * A provider that could not be asked throws its ProviderError; the query is dropped, so the next asks again.
 */
export async function askForConfirmation(
  em: EntityManager,
  q: ConfirmationQuery,
  send: (queryId: string) => Promise<{ providerQueryRef: string }>,
): Promise<'asked' | 'open'> {
  if (!(await openConfirmation(em, q))) return 'open';
  let answer;
  try {
    answer = await send(q.id);
  } catch (err) {
    if (err instanceof ProviderError) await dropConfirmation(em, q.id);
    throw err;
  }
  await confirmationSent(em, q.id, answer.providerQueryRef);
  return 'asked';
}

/** The provider accepted the query: its id for it (results may name only that). */
async function confirmationSent(em: EntityManager, id: string, providerQueryRef: string): Promise<void> {
  await em.getConnection().execute('UPDATE provider_status_queries SET provider_query_ref = ? WHERE id = ?', [providerQueryRef, id], 'run');
}

/** The provider could not be asked: the query is forgotten, so the next notification asks again. */
async function dropConfirmation(em: EntityManager, id: string): Promise<void> {
  await em.getConnection().execute('DELETE FROM provider_status_queries WHERE id = ?', [id], 'run');
}
