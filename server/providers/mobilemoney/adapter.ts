import type { EntityManager } from '@mikro-orm/postgresql';
import type { MobilemoneyCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { providerBaseUrl, providerIdentity } from '../base-url.js';
import { httpRequest, type HttpResponse } from '../http-client.js';
import {
  ProviderError,
  answerAboutSomethingElse,
  type CreatePaymentInput,
  type CredentialsIssue,
  type Money,
  type PaymentLookup,
  type ProviderPaymentResult,
  type ProviderRefundResult,
  type RefundInput,
} from '../../domain/ports.js';
import { isInvalidTokenError, operatorError, toProviderError, unreadable, type OperatorCall } from './errors.js';
import { pullDateTime } from './eat-time.js';
import { normalisePhone } from './phone.js';
import { encryptInitiatorPassword, operatorCertificate, type CertificateSource } from './security-credential.js';
import { MobilemoneyTokenStore, type Operator } from './token-store.js';
import {
  AsyncAckSchema,
  buildReversal,
  buildStkPush,
  buildStkQuery,
  buildTransactionStatus,
  isStillProcessing,
  PullQueryResponseSchema,
  pulledTransactions,
  PullRegisterResponseSchema,
  SANDBOX_INITIATOR,
  SANDBOX_INITIATOR_PASSWORD,
  StkPushResponseSchema,
  StkQueryResponseSchema,
  stkQueryStatus,
  wholeShillings,
  type AsyncAck,
  type InitiatorCredentials,
  type PulledTransaction,
  type SkippedPullRow,
  type PullRegistration,
} from './transformers.js';

/** A push names where the operator posts its result. */
export type MobilemoneyPaymentInput = CreatePaymentInput & { callbackUrl: string };
/** A transaction-status query names the transaction (receipt, or our request's OriginatorConversationID) and where the operator posts. */
export type TransactionStatusInput = ({ transactionId: string } | { originalConversationId: string }) & {
  resultUrl: string;
  timeoutUrl: string;
  remarks?: string;
  occasion?: string;
};
/** A reversal names where the operator posts its result and its queue timeout. */
export type MobilemoneyRefundInput = RefundInput & { resultUrl: string; timeoutUrl: string };

/** A guard against an operator that never says "no more rows". */
const MAX_PULL_PAGES = 500;

/**
 * The mobilemoney (M-Pesa Daraja) adapter: STK push and query, transaction status, reversal and pull.
 * Stateless apart from the OAuth token, which lives in PostgreSQL and is shared by every process.
 */
export class MobilemoneyAdapter {
  readonly provider = 'mobilemoney' as const;
  private readonly tokens: MobilemoneyTokenStore;

  constructor(
    private readonly config: AppConfig,
    em: EntityManager,
  ) {
    this.tokens = new MobilemoneyTokenStore(em, config.providerTimeoutMs);
  }

  baseUrl(creds: MobilemoneyCredentials): string {
    return providerBaseUrl(this.config, 'mobilemoney', creds.env);
  }

  /** The shared access token (fetched only when the stored one is missing or near expiry). */
  accessToken(creds: MobilemoneyCredentials): Promise<string> {
    return this.tokens.token(creds, this.operator(creds));
  }

  /** Where this process calls the operator, and who it is: the shared token is keyed by the latter. */
  private operator(creds: MobilemoneyCredentials): Operator {
    return { baseUrl: this.baseUrl(creds), identity: providerIdentity(this.config, 'mobilemoney', creds.env) };
  }

  /** STK push: the customer gets a prompt; the outcome arrives by callback (or queryPayment). */
  async createPayment(creds: MobilemoneyCredentials, input: MobilemoneyPaymentInput): Promise<ProviderPaymentResult> {
    const rawPhone = input.fields.phone;
    const phone = typeof rawPhone === 'string' ? normalisePhone(rawPhone) : null;
    if (!phone) throw new ProviderError('mobilemoney', 'invalid_request', 'mobilemoney needs a phone number in the format 254XXXXXXXXX');
    const description = typeof input.fields.description === 'string' && input.fields.description.trim() ? input.fields.description.trim() : 'Payment';
    const request = buildStkPush(
      creds,
      { phone, amount: wholeShillings(input.amount), reference: input.reference, callbackUrl: input.callbackUrl, description },
      new Date(),
    );
    const res = await this.post(creds, '/mpesa/stkpush/v1/processrequest', request, 'STK push');
    if (!ok(res)) throw toProviderError(res, 'STK push');
    const parsed = StkPushResponseSchema.safeParse(res.json);
    if (!parsed.success) throw unreadable('STK push');
    if (parsed.data.ResponseCode !== '0') {
      throw new ProviderError('mobilemoney', 'invalid_request', `mobilemoney STK push refused: ${parsed.data.ResponseDescription}`, parsed.data.ResponseCode);
    }
    return {
      providerRef: parsed.data.CheckoutRequestID,
      status: 'pending',
      raw: res.json,
      // The push callback names the CheckoutRequestID; provider_ref becomes the receipt once completed.
      data: { merchantRequestId: parsed.data.MerchantRequestID, checkoutRequestId: parsed.data.CheckoutRequestID },
    };
  }

  /**
   * STK query: "being processed" (an error body) or "still under processing" (a 200 with ResultCode
   * 4999) → pending; ResultCode 0 → completed; any other ResultCode → failed. A 200 whose ResponseCode is
   * not 0, or with no ResultCode, is no answer: unavailable, asked again.
   * The operator's answer names no amount: it is about the one push request `checkoutRequestId`,
   * whose amount is the one we sent (`pushAmount`) and which the customer can only accept or decline.
   * So the push's amount is reported; every source that does carry an amount (callback, status
   * result, pull, reversal) reports the operator's own. Sound only for a push sent for `pushAmount`: the
   * payment's recorded CheckoutRequestID, or one a verified callback stating that amount names — never
   * one an unverifiable callback names (InboundPipeline.confirm asks about no such push).
   */
  async queryPayment(creds: MobilemoneyCredentials, checkoutRequestId: string, pushAmount?: Money): Promise<ProviderPaymentResult> {
    const res = await this.post(creds, '/mpesa/stkpushquery/v1/query', buildStkQuery(creds, checkoutRequestId, new Date()), 'STK query');
    if (!ok(res)) {
      const error = operatorError(res);
      if (error && isStillProcessing(error)) return { providerRef: checkoutRequestId, status: 'pending', raw: res.json };
      throw toProviderError(res, 'STK query');
    }
    const parsed = StkQueryResponseSchema.safeParse(res.json);
    if (!parsed.success) throw unreadable('STK query');
    // The answer names no amount: the CheckoutRequestID it echoes is all that ties it to our push. An
    // answer about another push is no answer about ours, and is never applied.
    if (parsed.data.CheckoutRequestID !== checkoutRequestId) {
      throw answerAboutSomethingElse('mobilemoney', 'unavailable', `the STK query for ${checkoutRequestId} answered about ${String(parsed.data.CheckoutRequestID)}`);
    }
    // ResponseCode is the query's own ("any other code means an error occurred"), and a result is only what
    // ResultCode says: a refused query, or one with no ResultCode, says nothing of the push. Asked again later.
    if (parsed.data.ResponseCode.trim() !== '0' || parsed.data.ResultCode.trim() === '') {
      const said = parsed.data.ResponseDescription || parsed.data.ResultDesc;
      throw new ProviderError(
        'mobilemoney', 'unavailable',
        `mobilemoney STK query gave no result (ResponseCode ${parsed.data.ResponseCode}, ResultCode ${parsed.data.ResultCode || 'none'})${said ? `: ${said}` : ''}`,
        parsed.data.ResponseCode,
      );
    }
    const status = stkQueryStatus(parsed.data.ResultCode, parsed.data.ResultDesc);
    if (status === 'pending') return { providerRef: checkoutRequestId, status: 'pending', raw: res.json };
    return {
      providerRef: parsed.data.CheckoutRequestID,
      status,
      failureReason: status === 'failed' ? parsed.data.ResultDesc || `ResultCode ${parsed.data.ResultCode}` : null,
      raw: res.json,
      amount: pushAmount ?? null,
    };
  }

  /** The payment port's lookup: the STK query by CheckoutRequestID. */
  getPayment(creds: MobilemoneyCredentials, lookup: PaymentLookup): Promise<ProviderPaymentResult> {
    if (!lookup.providerRef) throw new ProviderError('mobilemoney', 'invalid_request', 'mobilemoney payment has no CheckoutRequestID to query');
    return this.queryPayment(creds, lookup.providerRef, lookup.amount);
  }

  /**
   * Asks for a transaction's status, by receipt or (for a request of ours with no receipt known, e.g. a
   * reversal) by the OriginatorConversationID the operator gave that request; the result is POSTed to
   * `resultUrl` later.
   */
  async transactionStatus(creds: MobilemoneyCredentials, input: TransactionStatusInput): Promise<AsyncAck> {
    const body = buildTransactionStatus(creds, await this.initiator(creds), input);
    return this.queued(creds, '/mpesa/transactionstatus/v1/query', body, 'transaction status query');
  }

  /** Requests a (full) reversal of a receipt; the result is POSTed to `resultUrl` later. */
  async reverse(
    creds: MobilemoneyCredentials,
    input: { transactionId: string; amountMinor: bigint; resultUrl: string; timeoutUrl: string; remarks: string; occasion?: string },
  ): Promise<AsyncAck> {
    const amount = wholeShillings({ minor: input.amountMinor, currency: 'KES' });
    const body = buildReversal(creds, await this.initiator(creds), { ...input, amount });
    return this.queued(creds, '/mpesa/reversal/v1/request', body, 'reversal');
  }

  /**
   * The payment port's refund: a full reversal, `pending` until the result callback. The refund's
   * provider reference is the OriginatorConversationID the result callback carries.
   */
  async refundPayment(creds: MobilemoneyCredentials, input: MobilemoneyRefundInput): Promise<ProviderRefundResult> {
    const receipt = input.payment.receiptNumber;
    if (!receipt) throw new ProviderError('mobilemoney', 'invalid_request', 'mobilemoney payment has no receipt number to reverse');
    const ack = await this.reverse(creds, {
      transactionId: receipt,
      amountMinor: input.amount.minor,
      resultUrl: input.resultUrl,
      timeoutUrl: input.timeoutUrl,
      remarks: `Reversal ${input.payment.reference}`,
      occasion: input.refundId,
    });
    return { providerRef: ack.OriginatorConversationID, status: 'pending', raw: ack };
  }

  /** One-time registration of the shortcode for the pull API. 1000 = registered now, 1001 = already. */
  async registerPull(creds: MobilemoneyCredentials, input: { nominatedNumber: string; callbackUrl: string }): Promise<PullRegistration> {
    const body = { ShortCode: creds.shortcode, RequestType: 'Pull', NominatedNumber: input.nominatedNumber, CallBackURL: input.callbackUrl };
    const res = await this.post(creds, '/pulltransactions/v1/register', body, 'pull registration');
    if (!ok(res)) throw toProviderError(res, 'pull registration');
    const parsed = PullRegisterResponseSchema.safeParse(res.json);
    if (!parsed.success) throw unreadable('pull registration');
    const code = parsed.data.ResponseStatus ?? parsed.data.ResponseCode ?? '';
    return { registered: code === '1000' || code === '1001', responseCode: code, responseDescription: parsed.data.ResponseDescription };
  }

  /**
   * Every C2B payment to the shortcode in [since, until] (the operator keeps 48 h), all pages; rows that
   * cannot be read or are no customer payment are returned apart (`skipped`), never failing the pull.
   */
  async pullTransactions(creds: MobilemoneyCredentials, window: { since: Date; until: Date }): Promise<{ transactions: PulledTransaction[]; skipped: SkippedPullRow[] }> {
    // Whole seconds: round the start down and the end up so the window is never narrowed.
    const start = new Date(Math.floor(window.since.getTime() / 1000) * 1000);
    const end = new Date(Math.ceil(window.until.getTime() / 1000) * 1000);
    const all = { transactions: [] as PulledTransaction[], skipped: [] as SkippedPullRow[] };
    // OffSetValue is a row offset: every row the operator listed counts, usable or not.
    let offset = 0;
    for (let page = 0; page < MAX_PULL_PAGES; page++) {
      const body = { ShortCode: creds.shortcode, StartDate: pullDateTime(start), EndDate: pullDateTime(end), OffSetValue: String(offset) };
      const res = await this.post(creds, '/pulltransactions/v1/query', body, 'pull query');
      if (!ok(res)) throw toProviderError(res, 'pull query');
      const parsed = PullQueryResponseSchema.safeParse(res.json);
      if (!parsed.success) throw unreadable('pull query');
      if (parsed.data.ResponseCode === '1001') return all;
      if (parsed.data.ResponseCode !== '1000') {
        throw new ProviderError('mobilemoney', 'invalid_request', `mobilemoney pull query failed: ${parsed.data.ResponseMessage}`, parsed.data.ResponseCode);
      }
      const rows = pulledTransactions(parsed.data);
      if (rows.rowCount === 0) return all;
      all.transactions.push(...rows.transactions);
      all.skipped.push(...rows.skipped);
      offset += rows.rowCount;
    }
    throw new ProviderError('mobilemoney', 'indeterminate', `mobilemoney pull returned more than ${MAX_PULL_PAGES} pages`);
  }

  /**
   * Initiator and SecurityCredential for status queries and reversals. The stored initiator password is
   * encrypted with the operator certificate of the credential's env (MOBILEMONEY_<ENV>_CERT_PATH; for the
   * built-in simulator, its own certificate). A stored pre-encrypted security_credential is sent as it
   * is. Live needs the merchant's own; sandbox falls back to the operator's published test initiator.
   */
  private async initiator(creds: MobilemoneyCredentials): Promise<InitiatorCredentials> {
    const fields = initiatorFields(creds);
    if ('missing' in fields) throw new ProviderError('mobilemoney', 'invalid_request', `mobilemoney credentials need ${MISSING_INITIATOR_FIELD[fields.missing]} for this operation`);
    if ('securityCredential' in fields) return { Initiator: fields.initiator, SecurityCredential: fields.securityCredential };
    const source = this.certificateSource(creds.env);
    if (!source) throw new ProviderError('mobilemoney', 'invalid_request', missingCertificate(creds.env));
    const certificate = await operatorCertificate(source, this.config.providerTimeoutMs);
    return { Initiator: fields.initiator, SecurityCredential: encryptInitiatorPassword(certificate, fields.password) };
  }

  /**
   * Why `creds` cannot send `use` (reversals, transaction status queries: both need the initiator), known
   * without calling anyone: a field the merchant did not store (live has no test initiator to fall back to),
   * or, for a password to encrypt, no operator certificate configured for the env (the operator's setting).
   * null: nothing is known to be missing.
   */
  initiatorIssue(creds: MobilemoneyCredentials, use: 'reversals' | 'transaction status queries'): CredentialsIssue | null {
    const fields = initiatorFields(creds);
    if ('missing' in fields) {
      const issue =
        fields.missing === 'initiator'
          ? `is required for ${use} with ${creds.env} credentials (the API operator username): store it with PUT /v1/merchant/credentials`
          : `or security_credential is required for ${use} with ${creds.env} credentials (the API operator password, or the SecurityCredential it encrypts to): store one with PUT /v1/merchant/credentials`;
      return { merchant: { field: fields.missing, issue } };
    }
    if ('password' in fields && !this.certificateSource(creds.env)) return { operator: missingCertificate(creds.env) };
    return null;
  }

  /** Where the env's operator certificate comes from; null when none is configured (missingCertificate). */
  private certificateSource(env: MobilemoneyCredentials['env']): CertificateSource | null {
    const path = this.config.mobilemoneySecurityCertPaths[env];
    if (path) return { kind: 'file', path };
    const baseUrl = this.baseUrl({ env } as MobilemoneyCredentials);
    if (this.config.sandbox && !this.config.providerBaseUrls.mobilemoney) return { kind: 'simulator', url: `${baseUrl}/certificates/SandboxCertificate.cer` };
    return null;
  }

  private async queued(creds: MobilemoneyCredentials, path: string, body: object, action: OperatorCall): Promise<AsyncAck> {
    const res = await this.post(creds, path, body, action);
    if (!ok(res)) throw toProviderError(res, action);
    const parsed = AsyncAckSchema.safeParse(res.json);
    if (!parsed.success) throw unreadable(action);
    const ack: AsyncAck = {
      OriginatorConversationID: parsed.data.OriginatorConversationID,
      ConversationID: parsed.data.ConversationID,
      ResponseCode: parsed.data.ResponseCode,
      ResponseDescription: parsed.data.ResponseDescription,
    };
    if (ack.ResponseCode !== '0') {
      throw new ProviderError('mobilemoney', 'invalid_request', `mobilemoney ${action} refused: ${ack.ResponseDescription}`, ack.ResponseCode);
    }
    return ack;
  }

  /** An authorised JSON POST; an "invalid token" answer gets one new token and one retry. */
  private async post(creds: MobilemoneyCredentials, path: string, body: object, action: OperatorCall): Promise<HttpResponse> {
    const baseUrl = this.baseUrl(creds);
    const send = (token: string) =>
      httpRequest('mobilemoney', `${baseUrl}${path}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify(body),
        timeoutMs: this.config.providerTimeoutMs,
      }).catch((err: unknown) => {
        if (err instanceof ProviderError) throw new ProviderError('mobilemoney', err.kind, err.message.replace(/^mobilemoney/, `mobilemoney ${action}:`));
        throw err;
      });
    const token = await this.tokens.token(creds, this.operator(creds));
    const first = await send(token);
    if (!isInvalidToken(first)) return first;
    const fresh = await this.tokens.token(creds, this.operator(creds), token);
    const second = await send(fresh);
    if (isInvalidToken(second)) throw toProviderError(second, action);
    return second;
  }
}

/** What each credential field the initiator needs is, for the messages that say it is missing. */
const MISSING_INITIATOR_FIELD = {
  initiator: 'initiator (the API operator username)',
  initiator_password: 'initiator_password (the API operator password) or security_credential',
} as const;

/**
 * The initiator and its password (to encrypt) or pre-encrypted SecurityCredential the credentials give —
 * the sandbox env falling back to the operator's published test initiator — or the first field missing.
 */
function initiatorFields(
  creds: MobilemoneyCredentials,
): { initiator: string; password: string } | { initiator: string; securityCredential: string } | { missing: keyof typeof MISSING_INITIATOR_FIELD } {
  const live = creds.env === 'live';
  const initiator = creds.initiator ?? (live ? null : SANDBOX_INITIATOR);
  if (!initiator) return { missing: 'initiator' };
  const password = creds.initiator_password ?? (live || creds.security_credential ? null : SANDBOX_INITIATOR_PASSWORD);
  if (password) return { initiator, password };
  if (creds.security_credential) return { initiator, securityCredential: creds.security_credential };
  return { missing: 'initiator_password' };
}

/** The operator's setting an env's certificate is read from, when it is not set. */
const missingCertificate = (env: MobilemoneyCredentials['env']) =>
  `mobilemoney ${env} operator certificate is not configured: set MOBILEMONEY_${env.toUpperCase()}_CERT_PATH to the operator's ${env === 'live' ? 'ProductionCertificate.cer' : 'SandboxCertificate.cer'}`;

const ok = (res: HttpResponse) => res.status >= 200 && res.status < 300;

function isInvalidToken(res: HttpResponse): boolean {
  if (ok(res)) return false;
  const error = operatorError(res);
  return error !== null && isInvalidTokenError(error);
}
