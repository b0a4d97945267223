import type { WalletpayCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { formatMinorUnits } from '../../lib/money.js';
import { ProviderError, type AdapterDecorator, type Money, type ProviderPaymentResult, type ProviderPort } from '../../domain/ports.js';
import { WalletpayAdapter } from './adapter.js';
import { walletpayAmountIssue, walletpayIssueField } from './amounts.js';
import { prepareWalletpayCredentials } from './credentials.js';
import { walletpayNotifications } from './notifications.js';
import { storedPayee } from './transformers.js';

/** The provider codes that mean "the buyer has not approved yet" and "captured already". */
const NOT_APPROVED = new Set(['ORDER_NOT_APPROVED', 'PAYER_ACTION_REQUIRED']);
const ALREADY_CAPTURED = 'ORDER_ALREADY_CAPTURED';
/**
 * Capture refusals that send the buyer back to approve with another funding source: PayPal's "restart
 * the payment" (developer.paypal.com, Handle funding failures) for INSTRUMENT_DECLINED, and its
 * "redirect the payer" for REDIRECT_PAYER_FOR_ALTERNATE_FUNDING.
 */
const REAPPROVE = new Set(['INSTRUMENT_DECLINED', 'REDIRECT_PAYER_FOR_ALTERNATE_FUNDING']);
/**
 * Capture refusals about the buyer or the transaction itself, which another attempt of this order does
 * not change: the payment fails. (Other refusals — the merchant's account set-up, a malformed request —
 * stay 502 with the payment pending: nothing about the buyer is decided, and an order never captured
 * expires and fails by itself.)
 */
const TERMINAL = new Set([
  'TRANSACTION_REFUSED', 'PAYER_CANNOT_PAY', 'MAX_NUMBER_OF_PAYMENT_ATTEMPTS_EXCEEDED', 'COMPLIANCE_VIOLATION', 'DUPLICATE_INVOICE_ID',
  'PAYER_ACCOUNT_LOCKED_OR_CLOSED', 'PAYER_ACCOUNT_RESTRICTED', 'PAYEE_BLOCKED_TRANSACTION', 'TRANSACTION_BLOCKED_BY_PAYEE',
  'TRANSACTION_LIMIT_EXCEEDED', 'TRANSACTION_RECEIVING_LIMIT_EXCEEDED', 'CARD_EXPIRED',
]);

/** How many captures of the order were refused for the buyer to approve again (provider_data.declinedCaptures). */
const declinedCaptures = (data: Record<string, unknown>): number => {
  const n = data.declinedCaptures;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : 0;
};

/** How many captures of the order were refused as not approved yet (provider_data.unapprovedCaptures). */
const unapprovedCaptures = (data: Record<string, unknown>): number => {
  const n = data.unapprovedCaptures;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : 0;
};

const sameMoney = (a: Money | null | undefined, b: Money) => Boolean(a) && a!.minor === b.minor && a!.currency.toUpperCase() === b.currency.toUpperCase();
const moneyText = (m: Money | null | undefined) => (m ? `${formatMinorUnits(m.minor, m.currency)} ${m.currency.toUpperCase()}` : 'no amount');

/**
 * After a capture refused for the buyer to approve again (INSTRUMENT_DECLINED) PayPal may leave the order
 * APPROVED, listing no payer-action link: read as it is, the order has no next action, and the status
 * sync would erase the approval link the capture's refusal put on the payment. While captures were so
 * refused and none was made, the stored approval link (provider_data.approvalUrl) stays the next action.
 */
function keepApprovalLink(result: ProviderPaymentResult, stored: Record<string, unknown>): ProviderPaymentResult {
  if (result.status !== 'pending' || result.nextAction || declinedCaptures(stored) === 0 || result.data?.captureId) return result;
  const url = typeof stored.approvalUrl === 'string' && stored.approvalUrl ? stored.approvalUrl : null;
  return url ? { ...result, nextAction: { type: 'redirect', url } } : result;
}

/**
 * The read of the order before its capture. One that gets no answer about the order (an outage, a
 * timeout, its 5xx, its token refused or rate-limited) sent no capture: reason `not_sent`, so the
 * merchant learns that nothing was captured. A refusal about the order itself (invalid_request, e.g. an
 * order that expired: `gone`) is left as it is.
 */
async function readBeforeCapture(read: () => Promise<ProviderPaymentResult>, orderId: string): Promise<ProviderPaymentResult> {
  try {
    return await read();
  } catch (err) {
    if (!(err instanceof ProviderError) || err.kind === 'invalid_request') throw err;
    throw new ProviderError(err.provider, err.kind, `walletpay order ${orderId} could not be read before the capture (${err.message}): no capture sent`, err.providerCode, undefined, 'not_sent');
  }
}

/** walletpay (PayPal Orders v2): the buyer approves at a link, the merchant captures; partial refunds. */
export function walletpayProvider(config: AppConfig, instrument: AdapterDecorator = (_name, a) => a): ProviderPort<WalletpayCredentials> {
  const adapter = instrument('walletpay', new WalletpayAdapter(config));
  const prepareWalletpay = prepareWalletpayCredentials(adapter, config);
  return {
    name: 'walletpay',
    // PayPal keeps a PayPal-Request-Id 6 h by default; a create repeated after that makes a second order.
    // That moves no money: an order is only paid once the buyer approves it at its link (which the lost
    // answer of the first one never showed anyone) and we capture it. So no replay limit applies; and
    // Orders v2 cannot be searched by our id (custom_id), so there is no findPayment either.
    // An order the buyer does not approve expires after 3 h (PayPal's default); GET then answers 404
    // INVALID_RESOURCE_ID for it (reason `gone`), and the service fails the payment.
    capabilities: { capture: true, partialRefunds: true, replayableCreate: true, createReplayWindowMs: null, expiresUnapprovedAfterMs: 3 * 3_600_000, livesUnapprovedAtMostMs: 75 * 3_600_000 },
    publicCredentialFields: ['env', 'webhook_id'],

    refundAmountIssue: walletpayAmountIssue,
    normaliseRequest(body, amount) {
      if (body.provider !== 'walletpay') return { issues: [{ field: 'provider', issue: 'must be walletpay' }] };
      // A currency the provider does not have, or a fraction of HUF, JPY or TWD: refused before anything is written.
      const amountIssue = walletpayAmountIssue(amount);
      if (amountIssue) return { issues: [{ field: walletpayIssueField(amount), issue: amountIssue }] };
      return { fields: { return_url: body.return_url, cancel_url: body.cancel_url } };
    },

    createPayment: (creds, input) => adapter.createPayment(creds, input),
    getPayment: async (creds, lookup) => keepApprovalLink(await adapter.getPayment(creds, lookup), lookup.providerData),
    refundPayment: (creds, input) => adapter.refundPayment(creds, input),
    findRefund: (creds, lookup) => adapter.findRefund(creds, lookup),

    /**
     * PayPal captures whatever the order holds when the capture arrives — every purchase unit, each paid to
     * its unit's payee — and an order awaiting approval or capture can be changed (PATCH
     * /v2/checkout/orders/{id}: purchase units added or replaced, a payee's email replaced) by anyone holding
     * the merchant's credentials. So the order is read first, and a capture is sent only when it is still the
     * order the service created: its amount and currency the payment's, one purchase unit, paid to the payee
     * its create answer named (provider_data.payee; one whose answer named none is compared on nothing),
     * intent CAPTURE. Otherwise reason `amount_mismatch`, with the order as read (nothing was sent): the
     * status writer records it as an integrity mismatch (its amount: all the units; its `integrityIssue`).
     *
     * PayPal answers a repeated PayPal-Request-Id with "the latest status of the previous request", a
     * refusal included: after the buyer approved (again), the same id would only replay the refusal. So
     * each capture after a refusal that leaves the order capturable later has its own id (the key, then
     * `<key>-1`, `<key>-2`…): after INSTRUMENT_DECLINED (the buyer approves again) and after
     * ORDER_NOT_APPROVED / PAYER_ACTION_REQUIRED (the buyer has not approved yet). That is safe: intent
     * CAPTURE allows one capture per order, so a second capture with a new id is ORDER_ALREADY_CAPTURED.
     */
    async capturePayment(creds, input) {
      const lookup = { paymentId: '', providerRef: input.providerRef, reference: '', providerData: input.providerData };
      const order = keepApprovalLink(await readBeforeCapture(() => adapter.getPayment(creds, lookup), input.providerRef), input.providerData);
      // Only while nothing is captured: an order captured already (a retry after a lost answer, or a capture
      // made at PayPal) goes on to the capture's replay or ORDER_ALREADY_CAPTURED, and the status writer then
      // records what was captured — a mismatch included — instead of "nothing was captured".
      if (order.status === 'pending' && (!sameMoney(order.amount, input.amount) || order.integrityIssue)) {
        const what = order.integrityIssue ? `is not the order created (${order.integrityIssue})` : `is for ${moneyText(order.amount)}, not the payment's ${moneyText(input.amount)}`;
        const message = `walletpay order ${input.providerRef} ${what}: no capture sent`;
        throw new ProviderError('walletpay', 'invalid_request', message, 'ORDER_AMOUNT_MISMATCH', order, 'amount_mismatch');
      }
      const declined = declinedCaptures(input.providerData);
      const unapproved = unapprovedCaptures(input.providerData);
      const attempt = declined + unapproved;
      const idempotencyKey = attempt > 0 ? `${input.idempotencyKey}-${attempt}` : input.idempotencyKey;
      try {
        return await adapter.capturePayment(creds, { orderId: input.providerRef, idempotencyKey, payee: storedPayee(input.providerData) });
      } catch (err) {
        if (!(err instanceof ProviderError) || !err.providerCode) throw err;
        const code = err.providerCode;
        if (REAPPROVE.has(code)) {
          // Back to the approval link: the order's own while it lists one, else the one it had at creation.
          const current = await adapter.getPayment(creds, lookup).catch(() => null);
          const stored = typeof input.providerData.approvalUrl === 'string' ? input.providerData.approvalUrl : null;
          const url = current?.nextAction?.url ?? stored;
          // provider_response stays the order (interface.md: the approval URL is held in the raw provider
          // response): the order as read now, with its payer-action link; when it cannot be read, what is
          // stored is kept (no raw). The refusal itself is the capture's answer (409 with its code).
          const result = {
            providerRef: input.providerRef,
            status: 'pending' as const,
            nextAction: url ? { type: 'redirect' as const, url } : null,
            data: { declinedCaptures: declined + 1, ...(url ? { approvalUrl: url } : {}) },
            raw: current ? current.raw : undefined,
          };
          throw new ProviderError(err.provider, err.kind, err.message, code, result, 'reapprove');
        }
        if (TERMINAL.has(code)) {
          const result = { providerRef: input.providerRef, status: 'failed' as const, failureReason: `capture refused: ${err.message}`, raw: { error: err.message, code } };
          throw new ProviderError(err.provider, 'declined', err.message, code, result);
        }
        if (NOT_APPROVED.has(code)) {
          // The order as read before the capture tells a voided order from one still awaiting the buyer
          // (no second read); its data counts the refusal, so the next capture has a new request id.
          const result = { ...order, data: { ...order.data, unapprovedCaptures: unapproved + 1 } };
          throw new ProviderError(err.provider, err.kind, err.message, code, result, 'not_approved');
        }
        if (code !== ALREADY_CAPTURED) throw err;
        throw new ProviderError(err.provider, err.kind, err.message, code, err.result, 'already_captured');
      }
    },

    prepareCredentials: async (merchantId, creds) => ({ credentials: await prepareWalletpay(merchantId, creds) }),
    notifications: walletpayNotifications(adapter),
  };
}
