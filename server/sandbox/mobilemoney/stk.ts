import type { NextFunction, Response, Router } from 'express';
import { parseOperatorTimestamp } from './eat-clock.js';
import type { SandboxDeps } from '../module.js';
import { scheduleCallback } from './callbacks.js';
import { checkoutRequestId, dashedId, receiptNumber } from './ids.js';
import { requireToken, type AuthedRequest } from './oauth.js';
import { findStk, insertStkUnlessSubscriberBusy, recordQuery } from './store.js';
import { SANDBOX_PASSKEY, SANDBOX_SHORTCODE, TEST_PHONES } from './test-values.js';
import { body, invalidField, isMpesaNumber, isMsisdn, isShortcode, isUrl, operatorError, text, wholeAmount } from './wire.js';

const TRANSACTION_TYPES = new Set(['CustomerPayBillOnline', 'CustomerBuyGoodsOnline']);

type Outcome = { resultCode: number; resultDesc: string; sendsCallback: boolean };

/**
 * Whether the shortcode's product takes this TransactionType and PartyB (Daraja's M-Pesa Express result
 * 2028: "For Pay Bills: … PartyB: Pay Bill – TransactionType: CustomerPayBillOnline"; for tills PartyB is
 * the till, CustomerBuyGoodsOnline). The published sandbox shortcode 174379 is a paybill; another
 * shortcode stands for a merchant's own, a paybill (PartyB itself) or a store whose till the simulator
 * cannot know.
 */
function productAssignmentFits(shortcode: string, transactionType: string, partyB: string): boolean {
  if (transactionType === 'CustomerPayBillOnline') return partyB === shortcode;
  return shortcode !== SANDBOX_SHORTCODE;
}

/**
 * The push's outcome (test-values.ts), decided as the operator checks it: the product assignment first,
 * then the phone. The result comes in the callback: Daraja's page lists 2028 (and 1037) among the result
 * codes, its synchronous ResponseCode being only 0.
 */
function outcomeFor(shortcode: string, transactionType: string, partyB: string, phone: string): Outcome {
  if (!productAssignmentFits(shortcode, transactionType, partyB)) {
    return { resultCode: 2028, resultDesc: 'The request is not permitted according to product assignment.', sendsCallback: true };
  }
  // Daraja's page names no answer for a number that is not on M-Pesa (its fields ask for a "valid Safaricom
  // M-PESA number"; 400.002.02 is for a malformed field, and this one is well formed). The documented
  // result closest to it: 1037, the prompt reached no phone ("The customer's phone could not be reached").
  if (!isMpesaNumber(phone)) return { resultCode: 1037, resultDesc: 'DS timeout user cannot be reached', sendsCallback: true };
  switch (phone) {
    case TEST_PHONES.cancelled:
      return { resultCode: 1032, resultDesc: 'Request cancelled by user', sendsCallback: true };
    case TEST_PHONES.insufficientFunds:
      return { resultCode: 1, resultDesc: 'The balance is insufficient for the transaction', sendsCallback: true };
    case TEST_PHONES.silent:
      return { resultCode: 0, resultDesc: 'The service request is processed successfully.', sendsCallback: false };
    case TEST_PHONES.unreachable:
      return { resultCode: 1037, resultDesc: 'DS timeout user cannot be reached', sendsCallback: true };
    case TEST_PHONES.wrongPin:
      return { resultCode: 2001, resultDesc: 'The initiator information is invalid.', sendsCallback: true };
    case TEST_PHONES.expired:
      return { resultCode: 1019, resultDesc: 'Transaction has expired', sendsCallback: true };
    default:
      return { resultCode: 0, resultDesc: 'The service request is processed successfully.', sendsCallback: true };
  }
}

/**
 * Password = base64(BusinessShortCode + Passkey + Timestamp). The published sandbox shortcode takes only
 * its published passkey, as Daraja's sandbox does (a typo fails here as it would there); another shortcode
 * stands for a merchant's own, whose passkey the simulator cannot know: any non-empty one around this
 * shortcode and timestamp.
 */
function passwordMatches(password: string, shortcode: string, timestamp: string): boolean {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(password)) return false;
  const decoded = Buffer.from(password, 'base64').toString('utf8');
  if (shortcode === SANDBOX_SHORTCODE) return decoded === `${SANDBOX_SHORTCODE}${SANDBOX_PASSKEY}${timestamp}`;
  return decoded.length > shortcode.length + timestamp.length && decoded.startsWith(shortcode) && decoded.endsWith(timestamp);
}

/** Shortcode, Password and Timestamp, common to push and query: the error to answer, or the shortcode. */
function checkCredentials(b: Record<string, unknown>): { shortcode: string } | { error: [code: string, message: string] } {
  const shortcode = text(b.BusinessShortCode);
  if (!isShortcode(shortcode)) return { error: ['400.002.02', 'Bad Request - Invalid BusinessShortCode'] };
  const password = text(b.Password);
  if (!password) return { error: ['400.002.02', 'Bad Request - Invalid Password'] };
  const timestamp = text(b.Timestamp);
  if (!timestamp || !parseOperatorTimestamp(timestamp)) return { error: ['400.002.02', 'Bad Request - Invalid Timestamp'] };
  if (!passwordMatches(password, shortcode, timestamp)) return { error: ['500.001.1001', 'Wrong credentials'] };
  return { shortcode };
}

export function mountStk(router: Router, deps: SandboxDeps): void {
  router.post('/mpesa/stkpush/v1/processrequest', requireToken(deps), async (req: AuthedRequest, res: Response, next: NextFunction) => {
    try {
      const b = body(req);
      // Field checks in the order of the operator's documentation; the first bad field is named.
      const shortcode = text(b.BusinessShortCode);
      if (!isShortcode(shortcode)) return invalidField(res, 'BusinessShortCode');
      if (!text(b.Password)) return invalidField(res, 'Password');
      const timestamp = text(b.Timestamp);
      if (!timestamp || !parseOperatorTimestamp(timestamp)) return invalidField(res, 'Timestamp');
      const transactionType = text(b.TransactionType);
      if (!transactionType || !TRANSACTION_TYPES.has(transactionType)) return invalidField(res, 'TransactionType');
      const amount = wholeAmount(b.Amount);
      if (amount === null) return invalidField(res, 'Amount');
      const partyA = text(b.PartyA);
      if (!isMsisdn(partyA)) return invalidField(res, 'PartyA');
      const partyB = text(b.PartyB);
      if (!isShortcode(partyB)) return invalidField(res, 'PartyB');
      const phone = text(b.PhoneNumber);
      if (!isMsisdn(phone)) return invalidField(res, 'PhoneNumber');
      const callbackUrl = text(b.CallBackURL);
      if (!isUrl(callbackUrl)) return invalidField(res, 'CallBackURL');
      const accountReference = text(b.AccountReference);
      if (!accountReference || accountReference.length > 12) return invalidField(res, 'AccountReference');
      const transactionDesc = b.TransactionDesc === undefined || b.TransactionDesc === null ? null : text(b.TransactionDesc);
      if (b.TransactionDesc !== undefined && b.TransactionDesc !== null && (transactionDesc === null || transactionDesc.length > 13)) {
        return invalidField(res, 'TransactionDesc');
      }
      const creds = checkCredentials(b);
      if ('error' in creds) return operatorError(res, ...creds.error);

      const outcome = outcomeFor(shortcode, transactionType, partyB, phone);
      const checkoutId = checkoutRequestId(new Date());
      const merchantRequestId = dashedId();
      const completesAt = await insertStkUnlessSubscriberBusy(deps.em, {
        checkoutRequestId: checkoutId,
        merchantRequestId,
        consumerKey: req.consumerKey!,
        shortcode,
        transactionType,
        partyA,
        partyB,
        phone,
        amount,
        accountReference,
        transactionDesc,
        callbackUrl,
        resultCode: outcome.resultCode,
        resultDesc: outcome.resultDesc,
        receiptNumber: outcome.resultCode === 0 ? receiptNumber() : null,
        sendsCallback: outcome.sendsCallback,
        delayMs: deps.config.sandboxCallbackDelayMs,
      });
      // The phone's previous prompt is still open (until its customer answers): Daraja refuses the push.
      if (!completesAt) {
        return operatorError(res, '500.001.1001', 'Unable to lock subscriber, a transaction is already in process for the current subscriber');
      }
      if (outcome.sendsCallback) {
        await scheduleCallback(deps, completesAt, { kind: 'stk', url: callbackUrl, checkoutRequestId: checkoutId, attempt: 0 });
      }
      res.json({
        MerchantRequestID: merchantRequestId,
        CheckoutRequestID: checkoutId,
        ResponseCode: '0',
        ResponseDescription: 'Success. Request accepted for processing',
        CustomerMessage: 'Success. Request accepted for processing',
      });
    } catch (err) {
      next(err);
    }
  });

  router.post('/mpesa/stkpushquery/v1/query', requireToken(deps), async (req: AuthedRequest, res: Response, next: NextFunction) => {
    try {
      const b = body(req);
      const creds = checkCredentials(b);
      if ('error' in creds) return operatorError(res, ...creds.error);
      const id = text(b.CheckoutRequestID);
      const row = id ? await findStk(deps.em, id) : null;
      if (!row || row.shortcode !== creds.shortcode) return invalidField(res, 'CheckoutRequestID');
      await recordQuery(deps.em, row.checkout_request_id);
      // Until the customer has answered (the callback delay), the operator says it is still processing: as an
      // error body, or (the under-processing test phone) as a result in a 200, ResultCode 4999, as Daraja also answers.
      if (!row.done && row.phone === TEST_PHONES.underProcessing) {
        res.json({
          ResponseCode: '0',
          ResponseDescription: 'The service request has been accepted successsfully',
          MerchantRequestID: row.merchant_request_id,
          CheckoutRequestID: row.checkout_request_id,
          ResultCode: '4999',
          ResultDesc: 'The transaction is still under processing',
        });
        return;
      }
      if (!row.done) return operatorError(res, '500.001.1001', 'The transaction is being processed');
      res.json({
        ResponseCode: '0',
        ResponseDescription: 'The service request has been accepted successsfully',
        MerchantRequestID: row.merchant_request_id,
        CheckoutRequestID: row.checkout_request_id,
        ResultCode: String(row.result_code),
        ResultDesc: row.result_desc,
      });
    } catch (err) {
      next(err);
    }
  });
}
