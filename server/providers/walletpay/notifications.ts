import type { WalletpayCredentials } from '../../../contract/index.js';
import { OWNER_NOT_VISIBLE, ProviderError, type NotificationScheme, type ProviderNotification } from '../../domain/ports.js';
import type { WalletpayAdapter } from './adapter.js';
import { parseWalletpayEvent, verifyWalletpayEvent, walletpayHeaderProblem, walletpayTransmissionId } from './webhook.js';

/**
 * walletpay events through the inbound pipeline: de-duplicated by transmission id (for ever), verified
 * with the provider's verify-webhook-signature postback using the merchant's credentials and stored
 * webhook id. Malformed signature headers are refused before anything is looked up.
 */
export function walletpayNotifications(adapter: WalletpayAdapter): NotificationScheme<WalletpayCredentials> {
  return {
    dedupWindowMs: null,

    // Cheap local checks first: a malformed forgery costs no lookup and no verification call.
    screen: (request) => walletpayHeaderProblem(request),

    parse(request): ProviderNotification {
      const transmissionId = walletpayTransmissionId(request) ?? '';
      const event = parseWalletpayEvent(request.body);
      if (event.kind === 'ignored') return { kind: 'ignored', label: event.eventType ?? 'unknown', reason: 'event type not used' };
      if (event.kind === 'payment') {
        return {
          kind: 'payment',
          dedupKey: transmissionId,
          label: event.eventType,
          raw: request.body,
          payment: { ourId: event.customId, providerRef: event.orderId },
          status: event.status,
          amount: event.amount,
          // As the capture's answer has them (orderToResult): the capture id is the receipt, and a failed
          // capture says why.
          receiptNumber: event.captureId,
          failureReason: event.failureReason,
          data: { captureId: event.captureId },
        };
      }
      return {
        kind: 'refund',
        dedupKey: transmissionId,
        label: event.eventType,
        raw: request.body,
        // The refunded capture: the payment stored it as provider_data.captureId when it was captured.
        payment: { ourId: null, providerRef: event.captureId, providerDataKey: 'captureId' },
        // The capture id is stored only once the capture's answer (or its event, or the status sync) is
        // applied: a reversal can come first. Then PayPal is asked whose capture it is (paymentOwning).
        ownerMayBeUnrecorded: true,
        refunds: [{
          providerRefundId: event.refundId,
          ourRefundId: event.customId,
          status: event.status,
          amount: event.amount,
          failureReason: event.failureReason,
        }],
      };
    },

    verify: (request, creds) => verifyWalletpayEvent(adapter, creds, request),

    // A refund event names only the capture: PayPal says which order (our payment's provider_ref) it is of.
    async paymentOwning(creds, captureId) {
      const capture = await adapter.getCapture(creds, captureId);
      if (capture === null) return null;
      if (capture === 'not_visible') return OWNER_NOT_VISIBLE;
      const orderId = capture.supplementary_data?.related_ids?.order_id;
      // Every capture of an order carries its order id. One without says nothing of whose it is: not an
      // answer (the event is refused and sent again), never "not ours" (an acknowledged refund is lost).
      if (typeof orderId !== 'string' || orderId === '') throw new ProviderError('walletpay', 'indeterminate', 'walletpay answered a capture without its order id');
      return orderId;
    },
  };
}
