import type { Payment } from '../../persistence/entities/index.js';
import type { ProviderPort } from '../ports.js';

/**
 * A checkout its customer abandoned, which the status sync ends at the provider: the payment still awaits
 * the customer as far as we know (its next action: cardpay's 3-D Secure page) past its provider's
 * expiresUnapprovedAfterMs, and the provider would keep it payable (abandonPayment: a Stripe intent stays
 * confirmable for days, so a customer finishing late would be charged for an order the merchant gave up
 * on). The failure reason it gets once cancelled there; null when it is no such payment (yet).
 */
export function abandonedCheckoutReason(port: ProviderPort, payment: Payment, now: number): string | null {
  const lifetime = port.capabilities.expiresUnapprovedAfterMs;
  if (!lifetime || !port.abandonPayment || !payment.providerRef || !payment.nextAction) return null;
  if (now - payment.createdAt.getTime() < lifetime) return null;
  const hours = Math.round(lifetime / 3_600_000);
  return (
    `The customer did not complete authentication within ${hours} h of the payment's creation (an abandoned checkout): ` +
    `cancelled at ${payment.provider}, nothing was charged. Create a new payment if the customer still wants to pay.`
  );
}
