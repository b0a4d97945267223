import type { CardpayCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import type { AdapterDecorator, ProviderPort, RequestIssue } from '../../domain/ports.js';
import { CardpayAdapter, prepareCardpayCredentials, removeCardpayWebhookEndpoints } from './adapter.js';
import { apiAmountIssue } from './amounts.js';
import { IDEMPOTENCY_KEY_RETENTION_MS } from './client.js';
import { cardpayNotifications } from './notifications.js';

/** cardpay (Stripe PaymentIntents): cards, 3-D Secure, saved cards, partial refunds, signed events. */
export function cardpayProvider(config: AppConfig, instrument: AdapterDecorator = (_name, a) => a): ProviderPort<CardpayCredentials> {
  const adapter = instrument('cardpay', new CardpayAdapter(config));
  return {
    name: 'cardpay',
    // A create repeated after the provider forgot its idempotency key is a second charge. An intent still
    // awaiting 3-D Secure 24 h after its creation (Stripe Checkout's own session expiry) is an abandoned
    // checkout: the status sync cancels it, or the customer could still be charged days later.
    capabilities: { capture: false, partialRefunds: true, replayableCreate: true, createReplayWindowMs: IDEMPOTENCY_KEY_RETENTION_MS, expiresUnapprovedAfterMs: 24 * 3_600_000 },
    publicCredentialFields: [],

    refundAmountIssue: apiAmountIssue,
    normaliseRequest(body, amount) {
      if (body.provider !== 'cardpay') return { issues: [{ field: 'provider', issue: 'must be cardpay' }] };
      const issues: RequestIssue[] = [];
      // An amount the provider cannot charge in this currency (a fraction of MGA, 12.345 KWD): refused
      // here, before anything is written or sent, rather than rounded by anyone.
      const amountIssue = apiAmountIssue(amount);
      if (amountIssue) issues.push({ field: 'amount', issue: amountIssue });
      if (!body.payment_method && !body.saved_card_id) issues.push({ field: 'payment_method', issue: 'payment_method or saved_card_id is required' });
      if (body.payment_method && body.saved_card_id) issues.push({ field: 'saved_card_id', issue: 'give either payment_method or saved_card_id, not both' });
      if (issues.length > 0) return { issues };
      // A saved card's id is a UUID, taken in either case: lower-cased, a retry spelling it otherwise is the same request.
      return { fields: { payment_method: body.payment_method, return_url: body.return_url, saved_card_id: body.saved_card_id?.toLowerCase() } };
    },

    createPayment: (creds, input) => adapter.createPayment(creds, input),
    getPayment: (creds, lookup) => adapter.getPayment(creds, lookup),
    findPayment: (creds, lookup) => adapter.findPayment(creds, lookup),
    refundPayment: (creds, input) => adapter.refundPayment(creds, input),
    abandonPayment: (creds, input) => adapter.abandonPayment(creds, input),
    findRefund: (creds, lookup) => adapter.findRefund(creds, lookup),
    prepareCredentials: prepareCardpayCredentials(adapter, config),
    afterCredentialsRemoved: removeCardpayWebhookEndpoints(adapter, config),
    notifications: cardpayNotifications(adapter),
    cards: {
      paymentMethod: (creds, id) => adapter.paymentMethod(creds, id),
      createCustomer: (creds, input) => adapter.createCustomer(creds, input),
      attachPaymentMethod: (creds, input) => adapter.attachPaymentMethod(creds, input),
      customersOfSavedCard: (creds, savedCardId) => adapter.customersOfSavedCard(creds, savedCardId),
      cardsOf: (creds, customerId) => adapter.cardsOf(creds, customerId),
      deleteCustomer: (creds, customerId) => adapter.deleteCustomer(creds, customerId),
      detachPaymentMethod: (creds, id) => adapter.detachPaymentMethod(creds, id),
      chargeFields: (card) => ({ customer: card.customerRef, payment_method: card.paymentMethodToken, off_session: true }),
    },
  };
}
