import type { EntityManager } from '@mikro-orm/postgresql';
import type { MobilemoneyCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import type { AdapterDecorator, ProviderPort, RequestIssue } from '../../domain/ports.js';
import { callbackUrl } from '../base-url.js';
import { MobilemoneyAdapter } from './adapter.js';
import { STORED_ADDRESS_ROUTES, signedCallbackUrl } from './callback-urls.js';
import { mobilemoneyNotifications } from './notifications.js';
import { normalisePhone } from './phone.js';

/** decisions.md "Money": at most 250,000 KES per push. */
const MAX_KES_MINOR = 250_000n * 100n;

/**
 * mobilemoney (M-Pesa Daraja): STK push in whole KES, full reversals only, and the operator's extra
 * operations — transaction-status reports, pull of settled transactions for reconciliation.
 */
export function mobilemoneyProvider(config: AppConfig, em: EntityManager, instrument: AdapterDecorator = (_name, a) => a): ProviderPort<MobilemoneyCredentials> {
  const adapter = instrument('mobilemoney', new MobilemoneyAdapter(config, em));
  return {
    name: 'mobilemoney',
    // The push cannot be repeated to learn its answer (a second push is a second prompt): a push whose
    // answer was lost is found by reconciliation (bill reference) instead of the status sync.
    capabilities: { capture: false, partialRefunds: false, replayableCreate: false, createReplayWindowMs: null },
    publicCredentialFields: ['env', 'shortcode', 'result_url', 'timeout_url'],
    serviceAddressFields: STORED_ADDRESS_ROUTES,

    normaliseRequest(body, amount) {
      if (body.provider !== 'mobilemoney') return { issues: [{ field: 'provider', issue: 'must be mobilemoney' }] };
      const issues: RequestIssue[] = [];
      if (amount.currency !== 'KES') issues.push({ field: 'currency', issue: 'must be KES for mobilemoney' });
      else if (amount.minor % 100n !== 0n) issues.push({ field: 'amount', issue: 'must be a whole number for mobilemoney' });
      else if (amount.minor > MAX_KES_MINOR) issues.push({ field: 'amount', issue: 'must be at most 250000 KES for mobilemoney' });
      const phone = normalisePhone(body.phone);
      if (!phone) issues.push({ field: 'phone', issue: 'must be a Kenyan phone number in the format 254XXXXXXXXX (07…, 7… and +254… are normalised)' });
      if (issues.length > 0) return { issues };
      return { fields: { phone: phone!, callback_url: body.callback_url } };
    },

    createPayment(creds, input) {
      // Our push callback carries the payment id and (sandbox env) its token, unless the merchant chose another address.
      const custom = input.fields.callback_url;
      const url = typeof custom === 'string' && custom ? custom : signedCallbackUrl(config, creds, '', input.paymentId);
      return adapter.createPayment(creds, { ...input, callbackUrl: url });
    },
    // A reversal names the M-Pesa receipt. A push confirmed by the STK query (live env: the operator's
    // callback is unsigned) has none until reconciliation finds its settled transaction.
    refundConflict: (payment) =>
      payment.receiptNumber
        ? null
        : "the payment's M-Pesa receipt number is not known yet (the operator's query that confirmed the payment names none); " +
          'it arrives with reconciliation (automatic every 15 minutes, or POST /v1/payments/mobilemoney/reconcile): refund the payment then',
    // A reversal needs an initiator and its password (or SecurityCredential); live has no test ones to fall back to.
    refundCredentialsIssue: (creds) => adapter.initiatorIssue(creds, 'reversals'),
    getPayment: (creds, lookup) => adapter.getPayment(creds, lookup),
    refundPayment: (creds, input) =>
      adapter.refundPayment(creds, {
        ...input,
        resultUrl: signedCallbackUrl(config, creds, '/reversal/result', input.refundId),
        timeoutUrl: signedCallbackUrl(config, creds, '/reversal/timeout', input.refundId),
      }),

    notifications: mobilemoneyNotifications(config),

    operations: {
      async requestStatusReport(creds, input) {
        const ack = await adapter.transactionStatus(creds, {
          ...('transactionId' in input ? { transactionId: input.transactionId } : { originalConversationId: input.requestRef }),
          resultUrl: signedCallbackUrl(config, creds, '/transactionstatus/result', input.queryId),
          timeoutUrl: signedCallbackUrl(config, creds, '/transactionstatus/timeout', input.queryId),
          remarks: 'Status check',
        });
        return { providerQueryRef: ack.OriginatorConversationID, ack: { ...ack } };
      },
      // A status query needs the initiator as a reversal does.
      statusReportCredentialsIssue: (creds) => adapter.initiatorIssue(creds, 'transaction status queries'),

      // Daraja's CheckoutRequestIDs are `ws_CO_…`; a receipt (TransactionID) is letters and digits only.
      namesPaymentRequest: (code) => /^ws_CO_/i.test(code),
      paymentRequestKey: 'checkoutRequestId',

      async listTransactions(creds, window) {
        const pulled = await adapter.pullTransactions(creds, window);
        return {
          transactions: pulled.transactions.map((r) => ({ receipt: r.transactionId, reference: r.billReference || null, amount: r.amount })),
          skipped: pulled.skipped.map((r) => ({ receipt: r.transactionId, reason: r.reason, ...(r.transactionType !== undefined ? { type: r.transactionType } : {}) })),
        };
      },

      async registerTransactionFeed(creds, input) {
        const nominatedNumber = input.nominated_number ?? creds.nominated_number;
        if (!nominatedNumber) {
          return { issues: [{ field: 'nominated_number', issue: 'is required when the mobilemoney credentials have none' }] };
        }
        const result = await adapter.registerPull(creds, { nominatedNumber, callbackUrl: input.callback_url ?? callbackUrl(config, 'mobilemoney') });
        return { result: { registered: result.registered, response_code: result.responseCode, response_description: result.responseDescription } };
      },
    },
  };
}
