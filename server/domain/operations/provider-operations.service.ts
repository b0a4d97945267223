import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { CheckStatusAck, Provider } from '../../../contract/index.js';
import type { Logger } from '../../observability/logger.js';
import { PaymentSchema, type Payment } from '../../persistence/entities/index.js';
import { DomainError, notFound, validationError } from '../errors.js';
import { formatMinorUnits } from '../money/money.js';
import type { CredentialsService } from '../merchants/credentials.service.js';
import type { AppConfig } from '../../config/config.js';
import { assertDeliverableUrl, type HostResolver } from '../merchants/webhook-url-policy.js';
import { cannotSendWith } from '../payments/credentials-issue.js';
import { paymentLookup, toUpdate } from '../payments/payment.service.js';
import type { ProviderGateway } from '../payments/provider-gateway.js';
import type { StatusWriter } from '../payments/status-writer.js';
import { ProviderError, type ProviderOperations, type ProviderRegistry } from '../ports.js';
import { AUTO_RECONCILE_WINDOW_MS, RECONCILE_CLOCK_SKEW_MS, RECONCILE_MAX_WINDOW_MS } from './reconcile-windows.js';

export { AUTO_RECONCILE_WINDOW_MS, RECONCILE_MAX_WINDOW_MS } from './reconcile-windows.js';

export interface ReconcileResult {
  receipt: string;
  outcome: 'updated' | 'skipped' | 'not_found';
  payment_id?: string;
  /**
   * A skipped result that was refused, not merely already settled: the transaction matches a pending
   * payment but not its amount or currency (with the payment's amount and what the provider's transaction
   * says), or it is exactly a payment we recorded `failed` (charged_but_failed: the customer was charged), or
   * it quotes a payment already paid with another receipt (duplicate_charge: the customer was charged twice).
   * decisions.md fixes the outcome enum at three values, so the difference is told here.
   */
  reason?: 'amount_mismatch' | 'currency_mismatch' | 'charged_but_failed' | 'duplicate_charge' | 'unreadable' | 'not_a_payment';
  expected_amount?: string;
  expected_currency?: string;
  reported_amount?: string;
  reported_currency?: string;
}

export interface ReconcileReport {
  pulled: number;
  updated: number;
  skipped: number;
  not_found: number;
  results: ReconcileResult[];
}

/** A provider's failure as the merchant's error; the ProviderError stays its `cause` (a job tells a rate limit or an outage by its kind). */
function providerFailure(err: unknown, provider: string, action: string): never {
  if (!(err instanceof ProviderError)) throw err;
  const failure = new DomainError('PROVIDER_ERROR', `${provider} ${action} failed: ${err.message}`);
  failure.cause = err;
  throw failure;
}

/**
 * The operations some providers offer beyond the payment lifecycle (ProviderOperations on the port):
 * an asynchronous status report, reconciliation from the provider's list of settled transactions, and
 * the registration that list needs. Generic on purpose: they read and write our payments and go through
 * the same status writer as everything else, so they live in the domain and the provider folder only
 * speaks the wire protocol (a provider-side service would need the domain handed back to it).
 */
export class ProviderOperationsService {
  constructor(
    private readonly em: EntityManager,
    private readonly config: AppConfig,
    private readonly providers: ProviderRegistry,
    private readonly credentials: CredentialsService,
    private readonly writer: StatusWriter,
    private readonly logger: Logger,
    private readonly hosts: HostResolver,
    private readonly gateway: ProviderGateway,
  ) {}

  private operation<K extends Exclude<keyof ProviderOperations<unknown>, 'paymentRequestKey'>>(provider: Provider, name: K): NonNullable<ProviderOperations<unknown>[K]> {
    const op = this.providers.get(provider).operations?.[name];
    if (!op) throw new DomainError('CONFLICT', `${provider} does not offer this operation`);
    return op.bind(this.providers.get(provider).operations) as NonNullable<ProviderOperations<unknown>[K]>;
  }

  /**
   * Asks the provider for a transaction's status. `code` is a receipt number or the provider's id for one of
   * our payment requests (mobilemoney: a CheckoutRequestID). A payment without a receipt (pending, failed, or
   * completed by a payment lookup) is answered at once by the provider's payment lookup, whatever its status
   * (the status report finds transactions by receipt only). A pending payment's answer goes through the
   * status writer; a payment no longer pending hands it only a success: one recorded failed that the lookup
   * reports paid stays failed and is recorded as charged_but_failed. A payment request reference that names
   * none of the merchant's payments is 404, never sent as a transaction id. Credentials that cannot send the
   * query are refused as a refund with them is (cannotSendWith). Otherwise the query is recorded and its
   * answer arrives as a `status-report` notification.
   */
  async checkStatus(merchantId: string, provider: Provider, code: string): Promise<CheckStatusAck> {
    const requestStatusReport = this.operation(provider, 'requestStatusReport');
    const creds = await this.credentials.require(merchantId, provider);
    const payment = await this.findPayment(merchantId, provider, code);
    if (payment && !payment.receiptNumber && payment.providerRef) return this.lookUpNow(provider, payment, creds);
    if (!payment && this.providers.get(provider).operations?.namesPaymentRequest?.(code)) throw notFound('payment');
    // Credentials that cannot send the query (mobilemoney: live ones without the initiator) are answered as a
    // refund with them is, before anything is recorded or sent: the merchant's 422 naming the field, or 503 for
    // our own configuration (no operator certificate), never a provider's refusal.
    const issue = this.providers.get(provider).operations?.statusReportCredentialsIssue?.(creds);
    if (issue) throw cannotSendWith(this.logger, issue, { merchantId, provider, what: 'transaction status queries' });
    const queryId = randomUUID();
    // Recorded before it is sent: the result may arrive before the send returns.
    await this.em.getConnection().execute(
      'INSERT INTO provider_status_queries (id, provider, merchant_id, payment_id, code) VALUES (?, ?, ?, ?, ?)',
      [queryId, provider, merchantId, payment?.id ?? null, code],
    );
    let answer;
    try {
      answer = await requestStatusReport(creds, { queryId, transactionId: payment?.receiptNumber ?? code });
    } catch (err) {
      // Refused, or never reached the provider: no result will name it, so it is dropped. An indeterminate
      // failure (timeout, 5xx) may have been taken: kept, so a result that still comes is recorded.
      if (err instanceof ProviderError && err.kind !== 'indeterminate') await this.em.getConnection().execute('DELETE FROM provider_status_queries WHERE id = ?', [queryId], 'run');
      providerFailure(err, provider, 'transaction status query');
    }
    await this.em.getConnection().execute('UPDATE provider_status_queries SET provider_query_ref = ? WHERE id = ?', [answer.providerQueryRef, queryId]);
    return answer.ack;
  }

  private async lookUpNow(provider: Provider, payment: Payment, creds: unknown): Promise<CheckStatusAck> {
    let result;
    try {
      // Through the gateway: a payment created under another provider account than the credentials' is not
      // asked about there (ProviderGateway.otherAccount); the merchant is told why (502), and it stays pending.
      result = await this.gateway.getPayment(payment, paymentLookup(payment), creds);
    } catch (err) {
      providerFailure(err, provider, 'status lookup');
    }
    // A payment no longer pending takes only a success from the lookup (charged_but_failed, recorded by the
    // writer); any other answer changes nothing, and the writer would log it as a refused move at every click.
    const status = payment.status === 'pending' || result.status === 'completed'
      ? (await this.writer.applyPayment(payment.id, { ...toUpdate(result), providerRef: undefined }, 'check-status')).payment.status
      : payment.status;
    this.logger.info({ merchantId: payment.merchantId, paymentId: payment.id, status, reported: result.status }, 'check-status answered by the payment lookup');
    // A terminal payment keeps its status whatever the provider now says: the answer tells both.
    const description = status === result.status ? `payment status: ${status}` : `payment status: ${status}; the provider reports ${result.status}`;
    return { OriginatorConversationID: payment.reference, ConversationID: payment.providerRef!, ResponseCode: '0', ResponseDescription: description };
  }

  /**
   * By receipt number, provider reference (a receipt, or the request's id until there is one), or the request
   * id the provider keeps in provider_data (paymentRequestKey, which has an expression index). Nothing else
   * the payment stores (the customer's phone, a callback URL) names it: such a code is an unknown receipt.
   */
  private async findPayment(merchantId: string, provider: Provider, code: string): Promise<Payment | null> {
    const em = this.em.fork();
    const byReceipt = await em.findOne(PaymentSchema, { merchantId, provider, receiptNumber: code.toUpperCase() });
    if (byReceipt) return byReceipt;
    const requestKey = this.providers.get(provider).operations?.paymentRequestKey;
    const byRequest = requestKey ? [{ providerData: { [requestKey]: code } }] : [];
    // No LIMIT (find, not findOne): with one, the planner may take a sequential scan for the OR, expecting a
    // match early (a merchant whose payments are all mobilemoney), and an unknown receipt reads every row.
    const [payment] = await em.find(PaymentSchema, { merchantId, provider, $or: [{ providerRef: code }, ...byRequest] });
    return payment ?? null;
  }

  /**
   * Reconciliation for a merchant-given window within what the pull can serve (interface.md "Limits": the
   * last 48 hours, at most 48 hours long): `since` no older than 48 hours ago, `until` not in the future,
   * each with a minute's leeway for the client's clock (RECONCILE_CLOCK_SKEW_MS). A window reaching further
   * is refused (422 naming the bound), never answered with the part the operator no longer lists left out —
   * that report would say nothing was missed there. Defaults: the last 48 hours; `since` alone ends 48
   * hours after it if that is before now (a "48 hours ago" computed by a clock a little behind ours);
   * `until` alone starts 48 hours before it, or 48 hours ago if that is later.
   */
  async reconcile(merchantId: string, provider: Provider, window: { since?: string; until?: string }): Promise<ReconcileReport> {
    const now = Date.now();
    const oldestPullable = now - RECONCILE_MAX_WINDOW_MS;
    const given = { since: window.since ? new Date(window.since).getTime() : null, until: window.until ? new Date(window.until).getTime() : null };
    if (given.until !== null && given.until > now + RECONCILE_CLOCK_SKEW_MS) throw validationError('until', 'must not be in the future');
    for (const field of ['until', 'since'] as const) {
      const at = given[field];
      if (at !== null && at < oldestPullable - RECONCILE_CLOCK_SKEW_MS) throw validationError(field, 'must be within the last 48 hours (the operator lists no older transactions)');
    }
    const since = new Date(given.since ?? Math.max(oldestPullable, (given.until ?? now) - RECONCILE_MAX_WINDOW_MS));
    const until = new Date(given.until ?? Math.min(now, since.getTime() + RECONCILE_MAX_WINDOW_MS));
    if (since >= until) throw validationError('since', 'must be before until');
    if (until.getTime() - since.getTime() > RECONCILE_MAX_WINDOW_MS) throw validationError('since', 'window must be at most 48 hours', 'Invalid request: the window may be at most 48 hours');
    return this.reconcileWindow(merchantId, provider, since, until);
  }

  /**
   * The automatic reconciliation's pull (interface.md "Limits": the last 2 hours, every 15 minutes), by the
   * database's clock. The last 2 hours come first, as always: a gap that cannot be pulled never holds back
   * today's payments. Then, when the last run got less far than these 2 hours start — workers down, the
   * pull API failing, an interval over 2 hours — the gap since then (from 2 hours before where it got, at
   * most 48 hours back: what the pull API keeps), oldest first, 2 hours at a time. Where the runs got to is
   * recorded (reconcile_cursors): up to `until` when everything was pulled, else up to the window that failed,
   * which the next run pulls again.
   */
  async reconcileAutomatically(merchantId: string, provider: Provider): Promise<ReconcileReport & { since: Date }> {
    const connection = this.em.getConnection();
    const [clock] = await connection.execute<{ now: Date; pulled_until: Date | null }[]>(
      'SELECT now() AS now, (SELECT pulled_until FROM reconcile_cursors WHERE merchant_id = ? AND provider = ?) AS pulled_until',
      [merchantId, provider],
    );
    const until = new Date(clock!.now).getTime();
    const lastTwoHours = until - AUTO_RECONCILE_WINDOW_MS;
    const report = await this.reconcileWindow(merchantId, provider, new Date(lastTwoHours), new Date(until));
    let since = lastTwoHours;
    let pulledUntil = until;
    // On schedule, the last run's 2 hours and these overlap: no gap. Else the gap, from 2 hours before where
    // the last run got to (the overlap every instant gets on schedule).
    if (clock!.pulled_until && new Date(clock!.pulled_until).getTime() < lastTwoHours) {
      const afterLastPull = new Date(clock!.pulled_until).getTime() - AUTO_RECONCILE_WINDOW_MS;
      const oldestPullable = until - RECONCILE_MAX_WINDOW_MS;
      if (afterLastPull < oldestPullable) {
        this.logger.warn({ merchantId, provider, lastPullEnded: clock!.pulled_until }, 'automatic reconciliation: the last successful pull ended more than 46 hours ago; transactions older than 48 hours can no longer be pulled (settle those payments with the provider\'s statement)');
      }
      for (let from = Math.max(oldestPullable, afterLastPull); from < lastTwoHours; from += AUTO_RECONCILE_WINDOW_MS) {
        since = Math.min(since, from);
        const to = Math.min(from + AUTO_RECONCILE_WINDOW_MS, lastTwoHours);
        try {
          addReport(report, await this.reconcileWindow(merchantId, provider, new Date(from), new Date(to)));
        } catch (err) {
          // The next run starts with this window again (2 hours before the end recorded).
          pulledUntil = from + AUTO_RECONCILE_WINDOW_MS;
          this.logger.warn({ merchantId, provider, from: new Date(from), to: new Date(to), err: { message: (err as Error).message } }, 'automatic reconciliation: a window of the gap since the last successful pull failed; the next run pulls it again');
          break;
        }
      }
    }
    await connection.execute(
      `INSERT INTO reconcile_cursors (merchant_id, provider, pulled_until) VALUES (?, ?, ?)
       ON CONFLICT (merchant_id, provider) DO UPDATE SET pulled_until = GREATEST(reconcile_cursors.pulled_until, EXCLUDED.pulled_until)`,
      [merchantId, provider, new Date(pulledUntil)], 'run',
    );
    return { ...report, since: new Date(since) };
  }

  /**
   * Pulls the provider's settled transactions for the window and settles missed callbacks: known and
   * pending → completed (event enqueued); known otherwise → skipped; unknown → not_found (logged);
   * known and pending but another amount or currency → skipped with a reason (nothing settles; see the
   * status writer); known and `failed`, of its amount → skipped with reason charged_but_failed (logged at
   * error, recorded in the audit and counted once); matched by reference to a payment that has another
   * receipt → skipped with reason duplicate_charge (the same, once per receipt).
   * Matched by receipt, else by the reference the customer paid to (= the payment's `reference`). Each
   * transaction is judged by the status writer on the payment as it locks it (UnitOfWork.settledTransaction),
   * and reported as the writer judged it: a callback (or another run) that moved the payment since this run
   * read it decides the outcome and reason, never the earlier read.
   */
  async reconcileWindow(merchantId: string, provider: Provider, since: Date, until: Date): Promise<ReconcileReport> {
    const listTransactions = this.operation(provider, 'listTransactions');
    const creds = await this.credentials.require(merchantId, provider);
    let pulled;
    try {
      pulled = await listTransactions(creds, { since, until });
    } catch (err) {
      providerFailure(err, provider, 'pull query');
    }
    if (pulled.skipped.length > 0) {
      // Receipts, reasons and types only: the rows' customer numbers and names stay out of the log.
      this.logger.warn({ merchantId, provider, skipped: pulled.skipped }, 'reconciliation: pulled entries that settle nothing (unreadable, or not a customer payment) were set aside');
    }
    const report: ReconcileReport = { pulled: pulled.transactions.length + pulled.skipped.length, updated: 0, skipped: pulled.skipped.length, not_found: 0, results: [] };
    // Set aside, and said so: a pull with such an entry proves no payment unpaid (lost-creation.ts).
    for (const entry of pulled.skipped) report.results.push({ receipt: entry.receipt ?? '', outcome: 'skipped', reason: entry.reason });
    for (const tx of pulled.transactions) {
      // A fresh read per transaction: an earlier one of this run may have settled the payment.
      const em = this.em.fork();
      const byReceipt = await em.findOne(PaymentSchema, { merchantId, provider, receiptNumber: tx.receipt });
      const payment = byReceipt ?? (tx.reference ? await em.findOne(PaymentSchema, { merchantId, provider, reference: tx.reference }) : null);
      if (!payment) {
        this.logger.info({ merchantId, provider, receipt: tx.receipt }, 'reconciliation: pulled transaction matches no payment');
        report.not_found += 1;
        report.results.push({ receipt: tx.receipt, outcome: 'not_found' });
        continue;
      }
      // Judged by the status writer on the payment as locked, not on the read above (a callback or another run
      // may have moved it since): what the report says is what the writer did.
      const outcome = await this.writer.commit((uow) => uow.settledTransaction(payment.id, tx, byReceipt !== null, 'reconciliation'));
      switch (outcome.kind) {
        case 'completed':
          report.updated += 1;
          report.results.push({ receipt: tx.receipt, outcome: 'updated', payment_id: payment.id });
          break;
        case 'mismatch':
          // The transaction quotes this payment but is not its amount (e.g. a 1 KES paybill payment that
          // quotes the reference of a 10,000 KES one): nothing settles; the merchant sees both amounts.
          report.skipped += 1;
          report.results.push({
            receipt: tx.receipt,
            outcome: 'skipped',
            payment_id: payment.id,
            reason: tx.amount.currency.toUpperCase() === payment.currency ? 'amount_mismatch' : 'currency_mismatch',
            expected_amount: formatMinorUnits(payment.amountMinor, payment.currency),
            expected_currency: payment.currency,
            reported_amount: formatMinorUnits(tx.amount.minor, tx.amount.currency),
            reported_currency: tx.amount.currency,
          });
          break;
        case 'charged_but_failed':
        case 'duplicate_charge':
          // The customer paid for a payment the merchant was told failed, or paid one already paid with another
          // receipt: nothing settles it, so it is said loudly — in the result, and by the writer in the audit,
          // the integrity metric and the log.
          report.skipped += 1;
          report.results.push({ receipt: tx.receipt, outcome: 'skipped', payment_id: payment.id, reason: outcome.kind });
          break;
        case 'unchanged':
          // Confirmed by asking the provider, which named no receipt: the settled transaction supplied it.
          if (outcome.receiptRecorded) this.logger.info({ merchantId, provider, paymentId: payment.id }, 'reconciliation: receipt recorded for a payment confirmed without one');
          report.skipped += 1;
          report.results.push({ receipt: tx.receipt, outcome: 'skipped', payment_id: payment.id });
          break;
      }
    }
    return report;
  }

  /** One-time registration for the provider's transaction list; defaults come from the stored credentials. */
  async registerTransactionFeed(merchantId: string, provider: Provider, input: Record<string, string | undefined>): Promise<Record<string, unknown>> {
    const register = this.operation(provider, 'registerTransactionFeed');
    // The provider will post there: the same policy as the merchant's webhook URL.
    if (input.callback_url) await assertDeliverableUrl(input.callback_url, { allowPrivate: this.config.webhookAllowPrivateUrls, hosts: this.hosts, merchantId }, 'callback_url');
    const creds = await this.credentials.require(merchantId, provider);
    let answer;
    try {
      answer = await register(creds, input);
    } catch (err) {
      providerFailure(err, provider, 'pull registration');
    }
    if ('issues' in answer) {
      const first = answer.issues[0]!;
      throw new DomainError('VALIDATION_ERROR', `Invalid request: ${first.field} ${first.issue}`, answer.issues);
    }
    return answer.result;
  }

  /** Merchants with credentials for a provider (to schedule every merchant's automatic reconciliation). */
  async merchantsWithCredentials(provider: Provider): Promise<string[]> {
    const rows = await this.em.getConnection().execute<{ merchant_id: string }[]>(`SELECT merchant_id FROM provider_credentials WHERE provider = ?`, [provider]);
    return rows.map((r) => r.merchant_id);
  }

  /** Whether the merchant has credentials for the provider (one row of the unique (merchant_id, provider) index). */
  async hasCredentials(merchantId: string, provider: Provider): Promise<boolean> {
    const [row] = await this.em.getConnection().execute<{ found: boolean }[]>(
      `SELECT EXISTS (SELECT 1 FROM provider_credentials WHERE provider = ? AND merchant_id = ?) AS found`,
      [provider, merchantId],
    );
    return row!.found;
  }
}

/** Adds `more` (another window's report) to `report`. */
function addReport(report: ReconcileReport, more: ReconcileReport): void {
  report.pulled += more.pulled;
  report.updated += more.updated;
  report.skipped += more.skipped;
  report.not_found += more.not_found;
  report.results.push(...more.results);
}
