import type { EntityManager } from '@mikro-orm/postgresql';
import { PaymentSchema } from '../../persistence/entities/index.js';
import type { StatusReportNotification } from '../ports.js';

/**
 * Records a provider's answer to a status query on the query (the first answer wins: a queue timeout
 * after the result changes nothing) and returns the payment it is about: the one the query was asked
 * for, else the merchant's payment with the reported receipt.
 */
export async function recordStatusReport(
  tx: EntityManager,
  provider: string,
  queryId: string,
  merchantId: string,
  report: StatusReportNotification,
): Promise<string | null> {
  const rows = await tx.execute<{ payment_id: string | null }[]>(
    `UPDATE provider_status_queries SET result_code = ?, result = ?::jsonb, completed_at = now()
     WHERE id = ? AND completed_at IS NULL RETURNING payment_id`,
    [report.resultCode, JSON.stringify(report.raw), queryId],
  );
  if (rows.length === 0) return null;
  if (rows[0]!.payment_id) return rows[0]!.payment_id;
  if (!report.completed) return null;
  const payment = await tx.findOne(PaymentSchema, { merchantId, provider, receiptNumber: report.completed.receipt });
  return payment?.id ?? null;
}
