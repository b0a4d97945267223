import type { CardpayCredentials } from '../../../contract/index.js';
import { MalformedNotificationError, providerAccountOf, type NotificationScheme, type ProviderNotification } from '../../domain/ports.js';
import { eventAccount } from './account.js';
import type { CardpayAdapter } from './adapter.js';
import { parseCardpayEvent, verifyCardpaySignature } from './webhook.js';

/**
 * cardpay events through the inbound pipeline: every event is signed (Cardpay-Signature, HMAC with the
 * merchant's webhook secret), so a missing or wrong signature is `invalid`; event ids never repeat.
 */
export function cardpayNotifications(adapter: CardpayAdapter): NotificationScheme<CardpayCredentials> {
  return {
    dedupWindowMs: null,

    parse(request): ProviderNotification {
      let event;
      try {
        event = parseCardpayEvent(request.body);
      } catch {
        throw new MalformedNotificationError('Body is not a cardpay event');
      }
      if (event.kind === 'ignored') return { kind: 'ignored', label: event.type, reason: 'event type not used' };
      if (event.kind === 'payment') {
        return {
          kind: 'payment',
          dedupKey: event.eventId,
          label: event.type,
          raw: event.raw,
          payment: { ourId: event.paymentId, providerRef: event.paymentIntentId },
          status: event.status,
          amount: event.amount,
          providerRef: event.paymentIntentId,
          failureReason: event.failureReason,
        };
      }
      // charge.refunded carries no refunds (API ≥ 2022-11-15): the pipeline fetches the charge's list once verified.
      return {
        kind: 'refund',
        dedupKey: event.eventId,
        label: event.type,
        raw: event.raw,
        payment: { ourId: event.paymentId, providerRef: event.paymentIntentId },
        refunds: [],
        fetchRefundsOf: event.chargeId,
      };
    },

    // The endpoint the service registers for a merchant names it (registrationUrl): see NotificationScheme.addressee.
    addressee: (request) => request.query.merchant ?? null,

    async verify(request, creds) {
      const header = request.headers['cardpay-signature'] ?? request.headers['stripe-signature'];
      if (!creds.webhook_secret) return 'invalid';
      return verifyCardpaySignature(request.rawBody, header, creds.webhook_secret) ? 'verified' : 'invalid';
    },

    // An event of the other mode (or of a connected account) is another account's than the key's.
    accountOf: (request, creds) => eventAccount(request.body, providerAccountOf(creds)),

    async fetchRefunds(creds, chargeId) {
      const listed = await adapter.listChargeRefunds(creds, chargeId); // newest first
      return listed.reverse().map((r) => ({
        providerRefundId: r.providerRef,
        ourRefundId: r.ourRefundId,
        status: r.status,
        amount: r.amount,
        failureReason: r.failureReason,
        raw: r.raw,
      }));
    },
  };
}
