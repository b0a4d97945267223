import type { WalletpayCredentials } from '../../../contract/index.js';
import type { NotificationScheme, ProviderNotification } from '../../domain/ports.js';
import type { WalletpayAdapter } from './adapter.js';
import { parseWalletpayEvent, verifyWalletpayEvent, walletpayTransmissionId } from './webhook.js';

/**
 * walletpay events through the inbound pipeline: de-duplicated by transmission id (for ever), verified
 * with the provider's verify-webhook-signature postback using the merchant's credentials and stored
 * webhook id. An event without a transmission id is refused before anything is looked up.
 */
export function walletpayNotifications(adapter: WalletpayAdapter): NotificationScheme<WalletpayCredentials> {
  return {
    dedupWindowMs: null,

    screen: (request) => walletpayTransmissionId(request) !== null,

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
        refunds: [{
          providerRefundId: event.refundId,
          ourRefundId: event.customId,
          status: event.status,
          amount: event.amount,
        }],
      };
    },

    verify: (request, creds) => verifyWalletpayEvent(adapter, creds, request),
  };
}
