import Stripe from 'stripe';
import { ProviderError } from '../../domain/ports.js';
import { NOT_CONNECTED_CODES } from '../http-client.js';
import { toPaymentResult } from './transformers.js';

/**
 * Normalises what stripe-node throws into ProviderError. `write` calls whose outcome is unknown
 * (timeout, network failure, 5xx, 409 concurrent use of a key) are `indeterminate`; the same for a read
 * is `unavailable` (nothing can have happened), as is a write that never connected (nothing was sent).
 */
export function toProviderError(err: unknown, op: 'read' | 'write'): ProviderError {
  if (err instanceof ProviderError) return err;
  const unknownOutcome = op === 'write' ? 'indeterminate' : 'unavailable';
  if (!(err instanceof Stripe.errors.StripeError)) {
    return new ProviderError('cardpay', unknownOutcome, 'cardpay call failed unexpectedly');
  }
  if (err instanceof Stripe.errors.StripeConnectionError || err.statusCode === undefined) {
    // stripe-node keeps the transport's error as `detail`; its own timeout carries code ETIMEDOUT (a socket
    // timeout, which does not say whether the request was written).
    const code = (err.detail as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string' && NOT_CONNECTED_CODES.has(code)) return new ProviderError('cardpay', 'unavailable', `cardpay could not be reached (${code})`);
    return new ProviderError('cardpay', unknownOutcome, code === 'ETIMEDOUT' ? 'cardpay did not answer in time' : 'cardpay could not be reached');
  }
  const status = err.statusCode;
  const said = err.message || 'no message';
  if (status === 402) {
    const intent = err.payment_intent;
    return new ProviderError(
      'cardpay',
      'declined',
      said,
      err.decline_code ?? err.code ?? undefined,
      intent ? toPaymentResult(intent) : undefined,
    );
  }
  if (status === 401 || status === 403) return new ProviderError('cardpay', 'auth', `cardpay refused the credentials: ${said}`, err.code ?? undefined);
  if (status === 429) return new ProviderError('cardpay', 'rate_limited', `cardpay rate limit: ${said}`, err.code ?? undefined);
  if (status === 409) return new ProviderError('cardpay', unknownOutcome, `cardpay: ${said}`, err.code ?? undefined);
  if (status >= 400 && status < 500) {
    // `amount` and `currency` are the merchant's own fields under the same names (a minimum or maximum
    // charge, an amount the currency cannot take): the refusal names that field to the merchant.
    const field = err.param === 'amount' || err.param === 'currency' ? err.param : undefined;
    return new ProviderError('cardpay', 'invalid_request', `cardpay rejected the request: ${said}`, err.code ?? err.rawType ?? undefined, undefined, undefined, field);
  }
  return new ProviderError('cardpay', unknownOutcome, `cardpay answered HTTP ${status}: ${said}`, err.code ?? undefined);
}
