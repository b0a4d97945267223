import type { EntityManager } from '@mikro-orm/postgresql';
import { PaymentSchema } from '../../persistence/entities/index.js';
import type { StatusReportNotification } from '../ports.js';

/** What a status report is about, once recorded on its query. */
export interface StatusReportSubject {
  /** The payment the query was asked for, else the merchant's payment with the reported receipt. */
  paymentId: string | null;
  /** The refund a reversal confirmation is about. */
  refundId: string | null;
  /** What the query confirms (see provider_status_queries.confirms), or null. */
  confirms: string | null;
}

/**
 * Records a provider's answer to a status query on the query, closing it (the first answer wins), and
 * returns what it is about; null when the query was answered already. Not for a queue timeout (recordQueueTimeout).
 */
export async function recordStatusReport(
  tx: EntityManager,
  provider: string,
  queryId: string,
  merchantId: string,
  report: StatusReportNotification,
): Promise<StatusReportSubject | null> {
  const rows = await tx.execute<{ payment_id: string | null; refund_id: string | null; confirms: string | null }[]>(
    `UPDATE provider_status_queries SET result_code = ?, result = ?::jsonb, completed_at = now()
     WHERE id = ? AND completed_at IS NULL RETURNING payment_id, refund_id, confirms`,
    [report.resultCode, JSON.stringify(report.raw), queryId],
  );
  const row = rows[0];
  if (!row) return null;
  const subject = { paymentId: row.payment_id, refundId: row.refund_id, confirms: row.confirms };
  if (subject.paymentId || subject.refundId || !report.completed?.receipt) return subject;
  const payment = await tx.findOne(PaymentSchema, { merchantId, provider, receiptNumber: report.completed.receipt });
  return { ...subject, paymentId: payment?.id ?? null };
}

/**
 * Records a queue-timeout notice on a query not answered yet, leaving it open: the provider may still
 * carry the query out and send its result, which is then applied as the query's answer (recordStatusReport).
 * A notice after the result changes nothing. Returns whether it was recorded.
 */
export async function recordQueueTimeout(tx: EntityManager, queryId: string, notice: StatusReportNotification): Promise<boolean> {
  const rows = await tx.execute<{ id: string }[]>(
    'UPDATE provider_status_queries SET result_code = ?, result = ?::jsonb WHERE id = ? AND completed_at IS NULL RETURNING id',
    [notice.resultCode, JSON.stringify(notice.raw), queryId],
  );
  return rows.length > 0;
}
