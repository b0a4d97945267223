import Stripe from 'stripe';
import { ProviderError } from '../../domain/ports.js';
import { toPaymentResult } from './transformers.js';

/**
 * Normalises what stripe-node throws into ProviderError. `write` calls whose outcome is unknown
 * (timeout, network failure, 5xx, 409 concurrent use of a key) are `indeterminate`; the same for a read
 * is `unavailable` (nothing can have happened).
 */
export function toProviderError(err: unknown, op: 'read' | 'write'): ProviderError {
  if (err instanceof ProviderError) return err;
  const unknownOutcome = op === 'write' ? 'indeterminate' : 'unavailable';
  if (!(err instanceof Stripe.errors.StripeError)) {
    return new ProviderError('cardpay', unknownOutcome, 'cardpay call failed unexpectedly');
  }
  if (err instanceof Stripe.errors.StripeConnectionError || err.statusCode === undefined) {
    // stripe-node keeps the transport's error as `detail`; its own timeout carries code ETIMEDOUT.
    const timedOut = (err.detail as { code?: unknown } | undefined)?.code === 'ETIMEDOUT';
    return new ProviderError('cardpay', unknownOutcome, timedOut ? 'cardpay did not answer in time' : 'cardpay could not be reached');
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
    return new ProviderError('cardpay', 'invalid_request', `cardpay rejected the request: ${said}`, err.code ?? err.rawType ?? undefined);
  }
  return new ProviderError('cardpay', unknownOutcome, `cardpay answered HTTP ${status}: ${said}`, err.code ?? undefined);
}
