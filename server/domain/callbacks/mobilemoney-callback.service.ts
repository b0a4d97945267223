import { readFileSync } from 'node:fs';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { MobilemoneyCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, RefundSchema, type Payment } from '../../persistence/entities/index.js';
import {
  MalformedCallbackError, isAllowedSource, parseResult, parseStkCallback, reversalResultStatus, reversedAmount, stkResultStatus, verifyCallbackToken, verifyLiveSignature,
  type OperatorResult,
} from '../../providers/mobilemoney/index.js';
import type { InboundCallback } from '../../providers/types.js';
import { DomainError } from '../errors.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import type { StatusWriter } from '../payments/status-writer.js';
import type { CallbackOutcome } from './cardpay-callback.service.js';
import { CALLBACK_UNVERIFIED } from '../../../contract/errors.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** interface.md: replays are rejected through a 24-hour de-duplication by CheckoutRequestID. */
const DEDUP_WINDOW = '24 hours';
/**
 * A callback the integrity check refused does not use up its key (a CheckoutRequestID has one genuine
 * result): the operator's real callback for it is still applied when it comes.
 */
const INTEGRITY_REFUSED = 'refused: amount or currency not ours';

/**
 * The mobile-money operator's callbacks: STK push results, transaction-status results and reversal
 * results. None is signed by the operator itself, so each is checked three ways: the source address
 * must be on the allowlist; in the sandbox env the URL's `ref` + `token` (HMAC keyed by the merchant's
 * passkey) must match; in the live env the RSA signature in X-Mobilemoney-Signature must verify with
 * the operator certificate. Anything else is 401 and changes nothing.
 */
export class MobilemoneyCallbackService {
  private certPem: string | null | undefined;

  constructor(
    private readonly em: EntityManager,
    private readonly config: AppConfig,
    private readonly credentials: CredentialsService,
    private readonly writer: StatusWriter,
    private readonly logger: Logger,
  ) {}

  /** POST /v1/webhooks/mobilemoney — the STK push result. */
  async handleStkResult(callback: InboundCallback): Promise<CallbackOutcome> {
    this.assertAllowedSource(callback);
    let result;
    try {
      result = parseStkCallback(callback.body);
    } catch (err) {
      if (err instanceof MalformedCallbackError) throw new DomainError('BAD_REQUEST', 'Body is not a mobilemoney STK callback');
      throw err;
    }
    const payment = await this.findByCheckout(result.checkoutRequestId);
    if (!payment) {
      this.logger.warn({ provider: 'mobilemoney', checkoutRequestId: result.checkoutRequestId }, 'callback for an unknown reference; acknowledged and ignored');
      return 'unknown_reference';
    }
    await this.verify(callback, payment.merchantId, payment.id);

    const status = stkResultStatus(result.resultCode);
    return this.writer.commit(async (uow) => {
      const key = `stk:${result.checkoutRequestId}`;
      if (!(await this.recordOnce(uow.tx, key, payment.id, `ResultCode ${result.resultCode}`))) return 'duplicate' as const;
      const applied = await uow.payment(
        payment.id,
        {
          status,
          providerRef: status === 'completed' && result.receiptNumber ? result.receiptNumber : undefined,
          receiptNumber: result.receiptNumber ?? null,
          failureReason: status === 'failed' ? `${result.resultDesc} (ResultCode ${result.resultCode})` : null,
          raw: callback.body,
          data: { checkoutRequestId: result.checkoutRequestId },
          reported: result.amount ?? null,
        },
        'callback:stk',
      );
      if (applied.mismatch) await this.markRefused(uow.tx, key);
      return 'applied' as const;
    });
  }

  /** POST /v1/webhooks/mobilemoney/transactionstatus/result — the answer to a check-status query. */
  async handleStatusResult(callback: InboundCallback): Promise<CallbackOutcome> {
    this.assertAllowedSource(callback);
    const result = this.parse(callback);
    const query = await this.findStatusQuery(callback, result);
    if (!query) return 'unknown_reference';
    await this.verify(callback, query.merchant_id, query.id);

    return this.writer.commit(async (uow) => {
      const tx = uow.tx;
      if (!(await this.recordOnce(tx, `status:${result.originatorConversationId}`, query.payment_id, `ResultCode ${result.resultCode}`))) return 'duplicate' as const;
      await tx.execute(
        `UPDATE mobilemoney_status_queries SET result_code = ?, result = ?::jsonb, completed_at = now(), conversation_id = coalesce(conversation_id, ?) WHERE id = ?`,
        [result.resultCode, JSON.stringify(callback.body), result.conversationId, query.id],
        'run',
      );
      const paymentId = query.payment_id ?? (await this.paymentIdByReceipt(tx, query.merchant_id, result.parameters.ReceiptNo ?? result.transactionId));
      if (!paymentId) return 'applied' as const;
      // Only a confirmed completion moves a payment: a status answer never fails or reverses one.
      const completed = result.resultCode === '0' && /^completed$/i.test(result.parameters.TransactionStatus ?? '');
      if (!completed) return 'applied' as const;
      const receipt = result.parameters.ReceiptNo || result.transactionId || null;
      const applied = await uow.payment(paymentId, { status: 'completed', providerRef: receipt, receiptNumber: receipt, raw: callback.body, reported: result.amount }, 'callback:transaction-status');
      if (applied.mismatch) await this.markRefused(tx, `status:${result.originatorConversationId}`);
      return 'applied' as const;
    });
  }

  /** POST /v1/webhooks/mobilemoney/{transactionstatus|reversal}/timeout — the request expired in the operator's queue. */
  async handleTimeout(callback: InboundCallback, kind: 'transactionstatus' | 'reversal'): Promise<CallbackOutcome> {
    this.assertAllowedSource(callback);
    const result = this.parse(callback);
    const ref = callback.query.ref;
    if (kind === 'reversal') {
      const refund = ref && UUID.test(ref) ? await this.em.fork().findOne(RefundSchema, { id: ref }) : null;
      if (!refund) return 'unknown_reference';
      await this.verify(callback, refund.merchantId, refund.id);
    } else {
      const query = await this.findStatusQuery(callback, result);
      if (!query) return 'unknown_reference';
      await this.verify(callback, query.merchant_id, query.id);
      await this.em.getConnection().execute(
        `UPDATE mobilemoney_status_queries SET result_code = ?, result = ?::jsonb, completed_at = now() WHERE id = ? AND completed_at IS NULL`,
        [result.resultCode, JSON.stringify(callback.body), query.id],
      );
    }
    // A timed-out reversal stays pending: the merchant may retry the refund once it is settled.
    this.logger.warn({ provider: 'mobilemoney', kind, originatorConversationId: result.originatorConversationId }, 'operator request timed out in its queue');
    return 'applied';
  }

  /**
   * POST /v1/webhooks/mobilemoney/reversal/result — 0 or R000001: refund completed, payment reversed,
   * payment.reversed; anything else: refund failed with the reason, payment stays completed, refund.failed.
   */
  async handleReversalResult(callback: InboundCallback): Promise<CallbackOutcome> {
    this.assertAllowedSource(callback);
    const result = this.parse(callback);
    const ref = callback.query.ref;
    const em = this.em.fork();
    const refund =
      (ref && UUID.test(ref) ? await em.findOne(RefundSchema, { id: ref }) : null) ??
      (await em.findOne(RefundSchema, { providerRef: result.originatorConversationId }));
    if (!refund) {
      this.logger.warn({ provider: 'mobilemoney', originatorConversationId: result.originatorConversationId }, 'reversal result for an unknown refund; acknowledged');
      return 'unknown_reference';
    }
    await this.verify(callback, refund.merchantId, refund.id);

    return this.writer.commit(async (uow) => {
      if (!(await this.recordOnce(uow.tx, `reversal:${result.originatorConversationId}`, refund.paymentId, `ResultCode ${result.resultCode}`))) return 'duplicate' as const;
      const succeeded = reversalResultStatus(result.resultCode) === 'completed';
      const outcome = await uow.refund(
        refund.id,
        succeeded
          ? {
              status: 'completed',
              reversal: true,
              raw: callback.body,
              reported: reversedAmount(result.resultCode, result.amount, { minor: refund.amountMinor, currency: refund.currency }),
            }
          : { status: 'failed', failureReason: `${result.resultDesc || 'reversal failed'} (ResultCode ${result.resultCode})`, raw: callback.body },
        'callback:reversal',
      );
      if (outcome.mismatch) await this.markRefused(uow.tx, `reversal:${result.originatorConversationId}`);
      return outcome.transitioned || outcome.mismatch ? ('applied' as const) : ('duplicate' as const);
    });
  }

  private parse(callback: InboundCallback): OperatorResult {
    try {
      return parseResult(callback.body);
    } catch (err) {
      if (err instanceof MalformedCallbackError) throw new DomainError('BAD_REQUEST', 'Body is not a mobilemoney Result');
      throw err;
    }
  }

  private assertAllowedSource(callback: InboundCallback): void {
    if (!isAllowedSource(callback.sourceIp, this.config.mobilemoneyCallbackAllowlist, this.config.sandbox)) {
      this.logger.warn({ provider: 'mobilemoney', source: callback.sourceIp }, 'callback from an address not on the allowlist');
      throw new DomainError('UNAUTHORIZED', 'Callback source address is not allowed');
    }
  }

  /** sandbox env: the URL's ref/token; live env: the operator's RSA signature over the raw body. */
  private async verify(callback: InboundCallback, merchantId: string, ref: string): Promise<MobilemoneyCredentials> {
    const creds = await this.credentials.find(merchantId, 'mobilemoney');
    let ok = false;
    if (creds?.env === 'sandbox') {
      ok = callback.query.ref === ref && verifyCallbackToken(creds.passkey, ref, callback.query.token);
    } else if (creds?.env === 'live') {
      const cert = this.certificate();
      ok = cert !== null && verifyLiveSignature(callback.rawBody, callback.headers['x-mobilemoney-signature'], cert);
    }
    if (!creds || !ok) {
      this.logger.warn({ provider: 'mobilemoney', ref }, 'callback verification failed');
      throw new DomainError('UNAUTHORIZED', CALLBACK_UNVERIFIED.mobilemoney);
    }
    return creds;
  }

  private certificate(): string | null {
    if (this.certPem === undefined) {
      this.certPem = this.config.mobilemoneyCertPath ? readFileSync(this.config.mobilemoneyCertPath, 'utf8') : null;
    }
    return this.certPem;
  }

  /** Lets a later callback with this key be applied (see INTEGRITY_REFUSED). */
  private async markRefused(tx: EntityManager, eventId: string): Promise<void> {
    await tx.execute(`UPDATE provider_events SET outcome = ? WHERE provider = 'mobilemoney' AND event_id = ?`, [INTEGRITY_REFUSED, eventId], 'run');
  }

  /** Stores a callback key once; a repeat within 24 h is a duplicate, unless the first was refused for its amount. */
  private async recordOnce(tx: EntityManager, eventId: string, paymentId: string | null, outcome: string): Promise<boolean> {
    const rows = await tx.execute<{ event_id: string }[]>(
      `INSERT INTO provider_events (provider, event_id, payment_id, outcome) VALUES ('mobilemoney', ?, ?, ?)
       ON CONFLICT (provider, event_id) DO UPDATE SET received_at = now(), outcome = EXCLUDED.outcome
       WHERE provider_events.received_at < now() - interval '${DEDUP_WINDOW}' OR provider_events.outcome = '${INTEGRITY_REFUSED}'
       RETURNING event_id`,
      [eventId, paymentId, outcome],
    );
    return rows.length > 0;
  }

  private async findByCheckout(checkoutRequestId: string): Promise<Payment | null> {
    const em = this.em.fork();
    const byRef = await em.findOne(PaymentSchema, { provider: 'mobilemoney', providerRef: checkoutRequestId });
    if (byRef) return byRef;
    const rows = await em.getConnection().execute<{ id: string }[]>(
      `SELECT id FROM payments WHERE provider = 'mobilemoney' AND provider_data->>'checkoutRequestId' = ? LIMIT 1`,
      [checkoutRequestId],
    );
    return rows[0] ? em.findOne(PaymentSchema, { id: rows[0].id }) : null;
  }

  private async findStatusQuery(callback: InboundCallback, result: OperatorResult) {
    const ref = callback.query.ref;
    const rows = await this.em.getConnection().execute<{ id: string; merchant_id: string; payment_id: string | null }[]>(
      `SELECT id, merchant_id, payment_id FROM mobilemoney_status_queries
       WHERE ${ref && UUID.test(ref) ? 'id = ?' : 'originator_conversation_id = ?'} LIMIT 1`,
      [ref && UUID.test(ref) ? ref : result.originatorConversationId],
    );
    if (!rows[0]) this.logger.warn({ provider: 'mobilemoney', originatorConversationId: result.originatorConversationId }, 'status result for an unknown query; acknowledged');
    return rows[0] ?? null;
  }

  private async paymentIdByReceipt(tx: EntityManager, merchantId: string, receipt: string): Promise<string | null> {
    if (!receipt) return null;
    const payment = await tx.findOne(PaymentSchema, { merchantId, provider: 'mobilemoney', receiptNumber: receipt });
    return payment?.id ?? null;
  }
}
