import type { Request } from 'express';
import { unprocessable, type PaypalError } from './errors.js';

/**
 * PayPal's sandbox negative testing: `PayPal-Mock-Response: {"mock_application_codes":"<ISSUE>"}` makes a
 * call answer that issue's error without doing anything (providers.md, Errors). The issues and their
 * descriptions are PayPal's capture and refund 422s (orders.capture-422, captures.refund-422).
 */
const CAPTURE_ISSUES: Record<string, string> = {
  ORDER_NOT_APPROVED:
    "Payer has not yet approved the Order for payment. Please redirect the payer to the 'rel':'approve' url returned as part of the HATEOAS links within the Create Order call.",
  ORDER_ALREADY_CAPTURED: "Order already captured. If 'intent=CAPTURE' only one capture per order is allowed.",
  INSTRUMENT_DECLINED: "The instrument presented was either declined by the processor or bank, or it can't be used for this payment.",
  PAYER_ACTION_REQUIRED: 'Transaction cannot complete successfully, instruct the buyer to return to PayPal.',
  TRANSACTION_REFUSED: 'The request was refused.',
  MAX_NUMBER_OF_PAYMENT_ATTEMPTS_EXCEEDED: 'You have exceeded the maximum number of payment attempts.',
  DUPLICATE_INVOICE_ID:
    'Duplicate Invoice ID detected. To avoid a potential duplicate transaction your account setting requires that Invoice Id be unique for each transaction.',
};

const REFUND_ISSUES: Record<string, string> = {
  CAPTURE_FULLY_REFUNDED: 'The capture has already been fully refunded',
  REFUND_AMOUNT_EXCEEDED: 'The refund amount must be less than or equal to the capture amount that has not yet been refunded.',
  REFUND_TIME_LIMIT_EXCEEDED: 'You are over the time limit to perform a refund on this capture.',
  CURRENCY_MISMATCH: 'Refund must be in the same currency as the capture.',
  PARTIAL_REFUND_NOT_ALLOWED: 'You cannot do a refund for an amount less than the original capture amount.',
  DECIMAL_PRECISION: 'If the currency supports decimals, only two decimal place precision is supported.',
  TRANSACTION_DISPUTED:
    'Partial refunds cannot be offered at this time because there is an open case on this transaction. Visit the PayPal Resolution Center to review this case.',
};

const ISSUES = { capture: CAPTURE_ISSUES, refund: REFUND_ISSUES };

/** The issues the simulator mocks for each call, for the README and tests. */
export const MOCKED_ISSUES = { capture: Object.keys(CAPTURE_ISSUES), refund: Object.keys(REFUND_ISSUES) };

/**
 * The error a `PayPal-Mock-Response` header asks this call to answer, or null. As PayPal's sandbox does,
 * a header without a known test value for the call (not JSON, another code) changes nothing: the call
 * gets its actual answer.
 */
export function mockedRefusal(req: Request, call: 'capture' | 'refund'): PaypalError | null {
  const header = req.header('paypal-mock-response');
  if (!header) return null;
  let code: unknown;
  try {
    code = (JSON.parse(header) as { mock_application_codes?: unknown } | null)?.mock_application_codes;
  } catch {
    return null;
  }
  const issues = ISSUES[call];
  return typeof code === 'string' && Object.hasOwn(issues, code) ? unprocessable(code, issues[code]!) : null;
}
