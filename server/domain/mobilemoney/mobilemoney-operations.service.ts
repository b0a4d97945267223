import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { MobilemoneyCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, type Payment } from '../../persistence/entities/index.js';
import { callbackUrl } from '../../providers/base-url.js';
import type { MobilemoneyAdapter } from '../../providers/mobilemoney/adapter.js';
import { ProviderError } from '../../providers/types.js';
import { DomainError } from '../errors.js';
import { formatMinorUnits } from '../money/money.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import { assertDeliverableUrl } from '../merchants/webhook-url-policy.js';
import type { PaymentService } from '../payments/payment.service.js';
import { signedCallbackUrl } from './callback-urls.js';

/** interface.md "Limits": the pull API keeps 48 hours; automatic reconciliation pulls the last 2. */
export const RECONCILE_MAX_WINDOW_MS = 48 * 3_600_000;
export const AUTO_RECONCILE_WINDOW_MS = 2 * 3_600_000;

export interface ReconcileResult {
  receipt: string;
  outcome: 'updated' | 'skipped' | 'mismatched' | 'not_found';
  payment_id?: string;
  /** mismatched only: the payment's amount and what the operator's transaction says. */
  expected_amount?: string;
  expected_currency?: string;
  reported_amount?: string;
  reported_currency?: string;
}

export interface ReconcileReport {
  pulled: number;
  updated: number;
  skipped: number;
  mismatched: number;
  not_found: number;
  results: ReconcileResult[];
}

function providerFailure(err: unknown, action: string): never {
  if (err instanceof ProviderError) throw new DomainError('PROVIDER_ERROR', `mobilemoney ${action} failed: ${err.message}`);
  throw err;
}

/** check-status, reconcile and register-pull: the mobile-money operations of the interface. */
export class MobilemoneyOperationsService {
  constructor(
    private readonly em: EntityManager,
    private readonly config: AppConfig,
    private readonly credentials: CredentialsService,
    private readonly adapter: MobilemoneyAdapter,
    private readonly payments: PaymentService,
    private readonly logger: Logger,
  ) {}

  /**
   * Asks the operator for a transaction's status. `code` is a receipt number or a CheckoutRequestID
   * (decisions.md); a CheckoutRequestID resolves to its payment's receipt when one is known. The answer
   * only confirms the query was accepted; the result arrives at transactionstatus/result.
   */
  async checkStatus(merchantId: string, code: string) {
    const creds = await this.credentials.require(merchantId, 'mobilemoney');
    const payment = await this.findPayment(merchantId, code);
    if (payment && !payment.receiptNumber && payment.status === 'pending' && payment.providerRef) {
      // No receipt yet: the transaction-status API cannot look up a push by its CheckoutRequestID, so
      // ask the STK query instead and apply its answer at once (same state machine, same events).
      return this.queryPush(merchantId, payment, creds);
    }
    const transactionId = payment?.receiptNumber ?? code;
    const queryId = randomUUID();
    await this.em.getConnection().execute(
      'INSERT INTO mobilemoney_status_queries (id, merchant_id, payment_id, code) VALUES (?, ?, ?, ?)',
      [queryId, merchantId, payment?.id ?? null, code],
    );
    let ack;
    try {
      ack = await this.adapter.transactionStatus(creds, {
        transactionId,
        resultUrl: signedCallbackUrl(this.config, creds, '/transactionstatus/result', queryId),
        timeoutUrl: signedCallbackUrl(this.config, creds, '/transactionstatus/timeout', queryId),
        remarks: 'Status check',
      });
    } catch (err) {
      providerFailure(err, 'transaction status query');
    }
    await this.em.getConnection().execute(
      'UPDATE mobilemoney_status_queries SET originator_conversation_id = ?, conversation_id = ? WHERE id = ?',
      [ack.OriginatorConversationID, ack.ConversationID, queryId],
    );
    return ack;
  }

  private async queryPush(merchantId: string, payment: Payment, creds: MobilemoneyCredentials) {
    let result;
    try {
      result = await this.adapter.queryPayment(creds, payment.providerRef!, { minor: payment.amountMinor, currency: payment.currency });
    } catch (err) {
      providerFailure(err, 'STK query');
    }
    await this.payments.applyUpdate(payment.id, { status: result.status, failureReason: result.failureReason ?? null, raw: result.raw, reported: result.amount }, 'check-status');
    this.logger.info({ merchantId, paymentId: payment.id, status: result.status }, 'check-status answered by STK query');
    const merchantRequestId = typeof payment.providerData.merchantRequestId === 'string' ? payment.providerData.merchantRequestId : payment.providerRef!;
    return {
      OriginatorConversationID: merchantRequestId,
      ConversationID: payment.providerRef!,
      ResponseCode: '0',
      ResponseDescription: `STK push status: ${result.status}`,
    };
  }

  private async findPayment(merchantId: string, code: string): Promise<Payment | null> {
    const em = this.em.fork();
    const byReceipt = await em.findOne(PaymentSchema, { merchantId, provider: 'mobilemoney', receiptNumber: code.toUpperCase() });
    if (byReceipt) return byReceipt;
    const rows = await em.getConnection().execute<{ id: string }[]>(
      `SELECT id FROM payments WHERE merchant_id = ? AND provider = 'mobilemoney'
       AND (provider_ref = ? OR provider_data->>'checkoutRequestId' = ?) LIMIT 1`,
      [merchantId, code, code],
    );
    return rows[0] ? em.findOne(PaymentSchema, { id: rows[0].id }) : null;
  }

  /**
   * Pulls the operator's completed transactions for the window and settles missed callbacks: known and
   * pending → completed (event enqueued); known otherwise → skipped; unknown → not_found (logged);
   * known and pending but another amount → mismatched (nothing settles; see the status writer).
   * Matched by receipt, else by bill reference (= the payment's `reference`).
   */
  async reconcile(merchantId: string, window: { since?: string; until?: string }): Promise<ReconcileReport> {
    const until = window.until ? new Date(window.until) : new Date();
    const since = window.since ? new Date(window.since) : new Date(until.getTime() - RECONCILE_MAX_WINDOW_MS);
    if (since >= until) throw new DomainError('VALIDATION_ERROR', 'Invalid request: since must be before until', [{ field: 'since', issue: 'must be before until' }]);
    if (until.getTime() - since.getTime() > RECONCILE_MAX_WINDOW_MS) {
      throw new DomainError('VALIDATION_ERROR', 'Invalid request: the window may be at most 48 hours', [{ field: 'since', issue: 'window must be at most 48 hours' }]);
    }
    return this.reconcileWindow(merchantId, since, until);
  }

  async reconcileWindow(merchantId: string, since: Date, until: Date): Promise<ReconcileReport> {
    const creds = await this.credentials.require(merchantId, 'mobilemoney');
    let pulled;
    try {
      pulled = await this.adapter.pullTransactions(creds, { since, until });
    } catch (err) {
      providerFailure(err, 'pull query');
    }
    const report: ReconcileReport = { pulled: pulled.length, updated: 0, skipped: 0, mismatched: 0, not_found: 0, results: [] };
    const em = this.em.fork();
    for (const tx of pulled) {
      const payment =
        (await em.findOne(PaymentSchema, { merchantId, provider: 'mobilemoney', receiptNumber: tx.transactionId })) ??
        (tx.billReference ? await em.findOne(PaymentSchema, { merchantId, provider: 'mobilemoney', reference: tx.billReference }) : null);
      if (!payment) {
        this.logger.info({ merchantId, receipt: tx.transactionId }, 'reconciliation: pulled transaction matches no payment');
        report.not_found += 1;
        report.results.push({ receipt: tx.transactionId, outcome: 'not_found' });
        continue;
      }
      const applied =
        payment.status === 'pending'
          ? await this.payments.applyUpdate(
              payment.id,
              { status: 'completed', providerRef: tx.transactionId, receiptNumber: tx.transactionId, raw: { reconciled: tx.transactionId }, reported: tx.amount },
              'reconciliation',
            )
          : null;
      if (applied?.mismatch) {
        // The transaction quotes this payment but is not its amount (e.g. a 1 KES paybill payment that
        // quotes the reference of a 10,000 KES one): nothing settles; the merchant sees both amounts.
        report.mismatched += 1;
        report.results.push({
          receipt: tx.transactionId,
          outcome: 'mismatched',
          payment_id: payment.id,
          expected_amount: formatMinorUnits(payment.amountMinor, payment.currency),
          expected_currency: payment.currency,
          reported_amount: formatMinorUnits(tx.amount.minor, tx.amount.currency),
          reported_currency: tx.amount.currency,
        });
        continue;
      }
      const outcome = applied?.transitioned ? 'updated' : 'skipped';
      report[outcome] += 1;
      report.results.push({ receipt: tx.transactionId, outcome, payment_id: payment.id });
    }
    return report;
  }

  /** One-time pull registration; defaults from the stored credentials. */
  async registerPull(merchantId: string, input: { nominated_number?: string; callback_url?: string }) {
    // The operator will post pull results there: the same policy as the merchant's webhook URL.
    if (input.callback_url) await assertDeliverableUrl(input.callback_url, this.config.webhookAllowPrivateUrls, 'callback_url');
    const creds = await this.credentials.require(merchantId, 'mobilemoney');
    const nominatedNumber = input.nominated_number ?? creds.nominated_number;
    if (!nominatedNumber) {
      throw new DomainError('VALIDATION_ERROR', 'Invalid request: nominated_number is required (not in the stored credentials either)', [
        { field: 'nominated_number', issue: 'is required when the mobilemoney credentials have none' },
      ]);
    }
    try {
      const result = await this.adapter.registerPull(creds, { nominatedNumber, callbackUrl: input.callback_url ?? callbackUrl(this.config, 'mobilemoney') });
      return { registered: result.registered, response_code: result.responseCode, response_description: result.responseDescription };
    } catch (err) {
      providerFailure(err, 'pull registration');
    }
  }

  /** Merchants with mobilemoney credentials (for the automatic reconciliation). */
  async merchantsWithCredentials(): Promise<string[]> {
    const rows = await this.em.getConnection().execute<{ merchant_id: string }[]>(`SELECT merchant_id FROM provider_credentials WHERE provider = 'mobilemoney'`);
    return rows.map((r) => r.merchant_id);
  }
}
