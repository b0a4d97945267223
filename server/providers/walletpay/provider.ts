import type { WalletpayCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { ProviderError, type AdapterDecorator, type ProviderPort } from '../../domain/ports.js';
import { WalletpayAdapter } from './adapter.js';
import { walletpayAmountIssue, walletpayIssueField } from './amounts.js';
import { prepareWalletpayCredentials } from './credentials.js';
import { walletpayNotifications } from './notifications.js';

/** The provider codes that mean "the buyer has not approved yet" and "captured already". */
const NOT_APPROVED = new Set(['ORDER_NOT_APPROVED', 'PAYER_ACTION_REQUIRED']);
const ALREADY_CAPTURED = 'ORDER_ALREADY_CAPTURED';

/** walletpay (PayPal Orders v2): the buyer approves at a link, the merchant captures; partial refunds. */
export function walletpayProvider(config: AppConfig, instrument: AdapterDecorator = (_name, a) => a): ProviderPort<WalletpayCredentials> {
  const adapter = instrument('walletpay', new WalletpayAdapter(config));
  return {
    name: 'walletpay',
    // PayPal keeps a PayPal-Request-Id 6 h by default; a create repeated after that makes a second order.
    // That moves no money: an order is only paid once the buyer approves it at its link (which the lost
    // answer of the first one never showed anyone) and we capture it. So no replay limit applies; and
    // Orders v2 cannot be searched by our id (custom_id), so there is no findPayment either.
    // An order the buyer does not approve expires after 3 h (PayPal's default); GET then answers 404
    // INVALID_RESOURCE_ID for it (reason `gone`), and the service fails the payment.
    capabilities: { capture: true, partialRefunds: true, replayableCreate: true, createReplayWindowMs: null, expiresUnapprovedAfterMs: 3 * 3_600_000 },
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
    getPayment: (creds, lookup) => adapter.getPayment(creds, lookup),
    refundPayment: (creds, input) => adapter.refundPayment(creds, input),
    findRefund: (creds, lookup) => adapter.findRefund(creds, lookup),

    async capturePayment(creds, input) {
      try {
        return await adapter.capturePayment(creds, { orderId: input.providerRef, idempotencyKey: input.idempotencyKey });
      } catch (err) {
        if (!(err instanceof ProviderError) || !err.providerCode) throw err;
        const reason = NOT_APPROVED.has(err.providerCode) ? 'not_approved' : err.providerCode === ALREADY_CAPTURED ? 'already_captured' : undefined;
        if (!reason) throw err;
        throw new ProviderError(err.provider, err.kind, err.message, err.providerCode, err.result, reason);
      }
    },

    prepareCredentials: prepareWalletpayCredentials(adapter, config),
    notifications: walletpayNotifications(adapter),
  };
}
