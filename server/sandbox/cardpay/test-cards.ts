/**
 * Stripe's documented test PaymentMethod tokens and what a charge with each one does. A token used in a
 * request becomes a new `pm_…` object that remembers its token (so a saved card keeps its behaviour).
 */
export type Decline = { code: string; decline_code: string | null; message: string };

export type CardBehaviour =
  | { kind: 'succeed' }
  | { kind: 'decline'; decline: Decline }
  /**
   * 3-D Secure required; `then` is what happens after a successful authentication. `offSessionOnceSetUp`:
   * an off-session payment needs none once the card was set up for future payments (charging.ts).
   */
  | { kind: 'three_d_secure'; then: { kind: 'succeed' } | { kind: 'decline'; decline: Decline }; offSessionOnceSetUp?: true };

export interface TestCard {
  brand: 'visa' | 'mastercard' | 'amex';
  last4: string;
  funding: 'credit' | 'debit';
  country: string;
  behaviour: CardBehaviour;
  /** Decline cards cannot be attached to a Customer (attach answers with the decline). */
  attachable: boolean;
  /**
   * What happens to a refund of a charge on this card (docs.stripe.com/testing, "Refunds"): by default it
   * succeeds at once; `pending_then_succeeded` starts pending and succeeds later (refund.updated);
   * `succeeded_then_failed` starts succeeded and fails later with expired_or_canceled_card
   * (refund.updated + refund.failed).
   */
  refund?: 'pending_then_succeeded' | 'succeeded_then_failed';
}

export const DECLINES = {
  generic: { code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' },
  insufficientFunds: { code: 'card_declined', decline_code: 'insufficient_funds', message: 'Your card has insufficient funds.' },
  expired: { code: 'expired_card', decline_code: null, message: 'Your card has expired.' },
  incorrectCvc: { code: 'incorrect_cvc', decline_code: null, message: "Your card's security code is incorrect." },
  processing: { code: 'processing_error', decline_code: null, message: 'An error occurred while processing your card. Try again in a little bit.' },
  authenticationRequired: {
    code: 'authentication_required',
    decline_code: 'authentication_required',
    message: 'Your card was declined. This transaction requires authentication.',
  },
} satisfies Record<string, Decline>;

/** The last_payment_error of a failed 3-D Secure authentication. */
export const AUTHENTICATION_FAILURE: Decline = {
  code: 'payment_intent_authentication_failure',
  decline_code: null,
  message:
    'The provided PaymentMethod has failed authentication. You can provide payment_method_data or a new PaymentMethod to attempt to fulfill this PaymentIntent again.',
};

const succeed = { kind: 'succeed' } as const;
const decline = (d: Decline): CardBehaviour => ({ kind: 'decline', decline: d });
const visa = (last4: string, behaviour: CardBehaviour, attachable = true): TestCard => ({
  brand: 'visa', last4, funding: 'credit', country: 'US', behaviour, attachable,
});

export const TEST_CARDS: Record<string, TestCard> = {
  pm_card_visa: visa('4242', succeed),
  pm_card_visa_debit: { ...visa('5556', succeed), funding: 'debit' },
  pm_card_mastercard: { brand: 'mastercard', last4: '4444', funding: 'credit', country: 'US', behaviour: succeed, attachable: true },
  pm_card_amex: { brand: 'amex', last4: '8431', funding: 'credit', country: 'US', behaviour: succeed, attachable: true },
  pm_card_chargeDeclined: visa('0002', decline(DECLINES.generic), false),
  pm_card_visa_chargeDeclined: visa('0002', decline(DECLINES.generic), false),
  pm_card_visa_chargeDeclinedInsufficientFunds: visa('9995', decline(DECLINES.insufficientFunds), false),
  pm_card_chargeDeclinedInsufficientFunds: visa('9995', decline(DECLINES.insufficientFunds), false),
  pm_card_chargeDeclinedExpiredCard: visa('0069', decline(DECLINES.expired), false),
  pm_card_chargeDeclinedIncorrectCvc: visa('0127', decline(DECLINES.incorrectCvc), false),
  pm_card_chargeDeclinedProcessingError: visa('0119', decline(DECLINES.processing), false),
  // Attaches fine; every charge then declines.
  pm_card_chargeCustomerFail: visa('0341', decline(DECLINES.generic)),
  pm_card_pendingRefund: { ...visa('7726', succeed), refund: 'pending_then_succeeded' },
  pm_card_refundFail: { ...visa('5126', succeed), refund: 'succeeded_then_failed' },
  pm_card_threeDSecureRequired: visa('3063', { kind: 'three_d_secure', then: succeed }),
  pm_card_threeDSecure2Required: visa('3220', { kind: 'three_d_secure', then: succeed }),
  pm_card_authenticationRequired: visa('3184', { kind: 'three_d_secure', then: succeed }),
  // docs.stripe.com/testing ("Authenticate unless set up", 4000002500003155): on-session payments always
  // authenticate; off-session ones are declined authentication_required until a payment with
  // setup_future_usage has set the card up, then succeed without authentication.
  pm_card_authenticationRequiredOnSetup: visa('3155', { kind: 'three_d_secure', then: succeed, offSessionOnceSetUp: true }),
  pm_card_threeDSecureRequiredChargeDeclined: visa('0083', { kind: 'three_d_secure', then: { kind: 'decline', decline: DECLINES.generic } }),
};

export function testCard(token: string): TestCard | undefined {
  return Object.prototype.hasOwnProperty.call(TEST_CARDS, token) ? TEST_CARDS[token] : undefined;
}

/**
 * Stripe's documented test PaymentMethod of another type than card (docs.stripe.com/payments/ach-direct-debit,
 * "Test your integration": the manually entered test account 000123456789, routing 110000000): it can be
 * read and attached to a Customer like a card token (a new `pm_…` each time), but it is no card, and the
 * simulator charges none of it.
 */
export const TEST_BANK_ACCOUNTS: Record<string, { last4: string; routingNumber: string }> = {
  pm_usBankAccount_success: { last4: '6789', routingNumber: '110000000' },
};

export function testBankAccount(token: string): { last4: string; routingNumber: string } | undefined {
  return Object.prototype.hasOwnProperty.call(TEST_BANK_ACCOUNTS, token) ? TEST_BANK_ACCOUNTS[token] : undefined;
}

/** A documented test token of any type: it names behaviour, and becomes a new `pm_…` when attached. */
export function isTestToken(token: string): boolean {
  return testCard(token) !== undefined || testBankAccount(token) !== undefined;
}
