import type { NextFunction, Response, Router } from 'express';
import { operatorTimestamp } from './eat-clock.js';
import { takeLoss } from '../controls.js';
import type { SandboxDeps } from '../module.js';
import { afterDelay, scheduleCallback } from './callbacks.js';
import { conversationId, dashedId, receiptNumber } from './ids.js';
import { requireToken, type AuthedRequest } from './oauth.js';
import { asReported } from './misreport.js';
import { findCompletedByReceipt, findReversalByOriginator, isReversed, recordReversal, type ReversalRow, type StkRow } from './store.js';
import { initiatorIsValid } from './security-credential.js';
import type { StalledRequests } from './stalled-requests.js';
import { INITIATOR_WITHOUT_ROLE, INSUFFICIENT_BALANCE_AMOUNT, TIMEOUT_TRANSACTION_ID } from './test-values.js';
import { body, invalidField, isShortcode, isUrl, text, wholeAmount } from './wire.js';

/**
 * Transaction status and reversal: the request is acknowledged at once, the Result is POSTed to the
 * ResultURL `sandboxCallbackDelayMs` later (or a queue-timeout notice to the QueueTimeOutURL).
 */

const SUCCESS_DESC = 'The service request is processed successfully.';

const REVERSAL_FAILURES: Record<string, string> = {
  R000001: 'The transaction has already been reversed.',
  R000002: 'The OriginalTransactionID is invalid.',
  '1': 'The balance is insufficient for the transaction.',
  '21': 'The initiator is not allowed to initiate this request.',
  '2001': 'The initiator information is invalid.',
};

/** `SIM:<code>` in Remarks or Occasion forces a reversal result (test-values.ts). */
const FORCED_CODE = /SIM:(R000001|R000002|2001|21|1|0)\b/;

interface Common {
  initiator: string;
  securityCredential: string;
  /** The receipt asked about; '' when a status query names the request instead (originalConversationId). */
  transactionId: string;
  originalConversationId: string;
  resultUrl: string;
  timeoutUrl: string;
  remarks: string;
  occasion: string;
  originatorConversationId: string;
  conversationId: string;
}

/** The fields both requests share, or the first bad field. `alt` accepts the doc's spaced keys. */
function common(b: Record<string, unknown>, commandId: string, remarksMin: number): Common | { bad: string } {
  const field = (key: string, alt?: string) => (b[key] !== undefined ? b[key] : alt ? b[alt] : undefined);
  const initiator = text(field('Initiator'));
  if (!initiator) return { bad: 'Initiator' };
  const securityCredential = text(field('SecurityCredential'));
  if (!securityCredential) return { bad: 'SecurityCredential' };
  if (text(field('CommandID', 'Command ID')) !== commandId) return { bad: 'CommandID' };
  const transactionId = text(field('TransactionID', 'Transaction ID')) ?? '';
  const originalConversationId = text(field('OriginalConversationID')) ?? '';
  // A status query may name the request instead ("if you don't have the M-PESA transaction ID").
  const byRequest = commandId === 'TransactionStatusQuery' && transactionId === '' && originalConversationId !== '';
  if (!byRequest && !/^[A-Za-z0-9]{1,20}$/.test(transactionId)) return { bad: 'TransactionID' };
  const resultUrl = text(field('ResultURL'));
  if (!isUrl(resultUrl)) return { bad: 'ResultURL' };
  const timeoutUrl = text(field('QueueTimeOutURL'));
  if (!isUrl(timeoutUrl)) return { bad: 'QueueTimeOutURL' };
  const remarks = text(field('Remarks')) ?? '';
  if (remarks.length < remarksMin || remarks.length > 100) return { bad: 'Remarks' };
  const occasion = field('Occasion') === undefined || field('Occasion') === null ? '' : text(field('Occasion'));
  if (occasion === null || occasion.length > 100) return { bad: 'Occasion' };
  const now = new Date();
  return {
    initiator, securityCredential, transactionId, originalConversationId, resultUrl, timeoutUrl, remarks, occasion,
    originatorConversationId: dashedId(),
    conversationId: conversationId(now),
  };
}

/**
 * The acknowledgement of a request the operator has taken (its result scheduled); lost on its way back
 * when the lose-answers control says so (index.ts): the connection just drops, as when an answer times out.
 */
async function ack(deps: SandboxDeps, res: Response, c: Common): Promise<void> {
  if (await takeLoss((sql, params) => deps.em.getConnection().execute(sql, params), 'mobilemoney', 'lost_answers')) {
    deps.logger.info({ provider: 'mobilemoney', originatorConversationId: c.originatorConversationId }, 'sandbox acknowledgement lost on purpose (lose-answers control)');
    res.destroy();
    return;
  }
  res.json({
    OriginatorConversationID: c.originatorConversationId,
    ConversationID: c.conversationId,
    ResponseCode: '0',
    ResponseDescription: 'Accept the service request successfully.',
  });
}

const referenceData = (c: Common) => ({ ReferenceItem: { Key: 'Occasion', Value: c.occasion } });

function failure(c: Common, code: string, desc: string) {
  return {
    Result: {
      ResultType: 0,
      ResultCode: code,
      ResultDesc: desc,
      OriginatorConversationID: c.originatorConversationId,
      ConversationID: c.conversationId,
      TransactionID: receiptNumber(),
      ReferenceData: referenceData(c),
    },
  };
}

/** What the QueueTimeOutURL receives when the request expired in the operator's queue. */
function queueTimeout(c: Common) {
  return {
    Result: {
      ResultType: 1,
      ResultCode: '1037',
      ResultDesc: 'The request timed out in the queue before it was processed.',
      OriginatorConversationID: c.originatorConversationId,
      ConversationID: c.conversationId,
      TransactionID: '',
      ReferenceData: referenceData(c),
    },
  };
}

/** A completed request's result: the operator's success envelope around its ResultParameters. */
function completedResult(c: Common, transactionId: string, parameters: { Key: string; Value: string | number | null }[]) {
  return {
    Result: {
      ResultType: 0,
      ResultCode: 0,
      ResultDesc: SUCCESS_DESC,
      OriginatorConversationID: c.originatorConversationId,
      ConversationID: c.conversationId,
      TransactionID: transactionId,
      ResultParameters: { ResultParameter: parameters },
      ReferenceData: referenceData(c),
    },
  };
}

function statusSuccess(c: Common, row: StkRow) {
  const when = Number(operatorTimestamp(row.completes_at));
  return completedResult(c, receiptNumber(), [
    { Key: 'DebitPartyName', Value: `${row.phone} - Sandbox Customer` },
    { Key: 'CreditPartyName', Value: `${row.shortcode} - Sandbox Merchant` },
    { Key: 'OriginatorConversationID', Value: c.originatorConversationId },
    { Key: 'InitiatedTime', Value: when },
    { Key: 'DebitAccountType', Value: 'MMF Account For Customer' },
    { Key: 'DebitPartyCharges', Value: '' },
    { Key: 'TransactionReason', Value: '' },
    { Key: 'ReasonType', Value: 'Pay Bill Online' },
    { Key: 'TransactionStatus', Value: 'Completed' },
    { Key: 'FinalisedTime', Value: when },
    { Key: 'Amount', Value: Number(row.amount) },
    { Key: 'ConversationID', Value: c.conversationId },
    { Key: 'ReceiptNo', Value: row.receipt_number },
  ]);
}

/** A completed reversal, asked about by the OriginatorConversationID of its request: the reversal transaction's own details. */
function reversalStatus(c: Common, reversal: ReversalRow & { reversal_receipt: string }, row: StkRow | null) {
  const when = Number(operatorTimestamp(new Date(reversal.created_at)));
  return completedResult(c, receiptNumber(), [
    { Key: 'DebitPartyName', Value: `${row?.shortcode ?? '174379'} - Sandbox Merchant` },
    { Key: 'CreditPartyName', Value: `${row?.phone ?? '254708374149'} - Sandbox Customer` },
    { Key: 'OriginatorConversationID', Value: c.originalConversationId },
    { Key: 'InitiatedTime', Value: when },
    { Key: 'ReasonType', Value: 'Reversal' },
    { Key: 'TransactionStatus', Value: 'Completed' },
    { Key: 'FinalisedTime', Value: when },
    { Key: 'Amount', Value: Number(reversal.amount) },
    { Key: 'ReceiptNo', Value: reversal.reversal_receipt },
  ]);
}

function reversalSuccess(c: Common, reversalReceipt: string, originalId: string, amount: number, row: StkRow | null) {
  return completedResult(c, reversalReceipt, [
    { Key: 'DebitAccountBalance', Value: 'Utility Account|KES|0.00|0.00|0.00|0.00' },
    { Key: 'Amount', Value: amount },
    { Key: 'TransCompletedTime', Value: Number(operatorTimestamp(new Date())) },
    { Key: 'OriginalTransactionID', Value: originalId },
    { Key: 'Charge', Value: 0 },
    { Key: 'CreditPartyPublicName', Value: `${row?.phone ?? '254708374149'} - Sandbox Customer` },
    { Key: 'DebitPartyPublicName', Value: `${row?.shortcode ?? '174379'} - Sandbox Merchant` },
  ]);
}

export function mountResults(router: Router, deps: SandboxDeps, stalled: StalledRequests): void {
  router.post('/mpesa/transactionstatus/v1/query', requireToken(deps), async (req: AuthedRequest, res: Response, next: NextFunction) => {
    try {
      const b = body(req);
      const c = common(b, 'TransactionStatusQuery', 1);
      if ('bad' in c) return invalidField(res, c.bad);
      const partyA = text(b.PartyA);
      if (!partyA || !/^\d{5,12}$/.test(partyA)) return invalidField(res, 'PartyA');
      if (!['1', '2', '4'].includes(text(b.IdentifierType) ?? '')) return invalidField(res, 'IdentifierType');

      if (c.transactionId === TIMEOUT_TRANSACTION_ID) {
        await scheduleCallback(deps, afterDelay(deps), { kind: 'result', url: c.timeoutUrl, body: queueTimeout(c), attempt: 0 });
        return ack(deps, res, c);
      }
      let result;
      if (!(await initiatorIsValid(deps, c.initiator, c.securityCredential))) {
        result = failure(c, '2001', REVERSAL_FAILURES['2001']!);
      } else if (c.transactionId === '') {
        // By request: only a completed reversal is a transaction; a refused one never existed.
        const reversal = await findReversalByOriginator(deps.em, c.originalConversationId);
        result = reversal?.result_code === '0' && reversal.reversal_receipt
          ? reversalStatus(c, { ...reversal, reversal_receipt: reversal.reversal_receipt }, await findCompletedByReceipt(deps.em, reversal.transaction_id, partyA))
          : failure(c, 'R000002', 'The transaction does not exist.');
      } else {
        const row = await findCompletedByReceipt(deps.em, c.transactionId, partyA);
        result = row ? statusSuccess(c, row) : failure(c, 'R000002', 'The transaction receipt number does not exist.');
      }
      await scheduleCallback(deps, afterDelay(deps), { kind: 'result', url: c.resultUrl, body: await asReported(deps.em, result), attempt: 0 });
      await ack(deps, res, c);
    } catch (err) {
      next(err);
    }
  });

  router.post('/mpesa/reversal/v1/request', requireToken(deps), async (req: AuthedRequest, res: Response, next: NextFunction) => {
    try {
      if (await stalled.stall(res)) return;
      const b = body(req);
      const c = common(b, 'TransactionReversal', 2);
      if ('bad' in c) return invalidField(res, c.bad);
      const amount = wholeAmount(b.Amount);
      if (amount === null) return invalidField(res, 'Amount');
      const receiver = text(b.ReceiverParty);
      if (!isShortcode(receiver)) return invalidField(res, 'ReceiverParty');
      const identifierType = text(b.RecieverIdentifierType ?? b.ReceiverIdentifierType);
      if (identifierType !== '11' && identifierType !== '4') return invalidField(res, 'RecieverIdentifierType');

      if (c.transactionId === TIMEOUT_TRANSACTION_ID) {
        await scheduleCallback(deps, afterDelay(deps), { kind: 'result', url: c.timeoutUrl, body: queueTimeout(c), attempt: 0 });
        return ack(deps, res, c);
      }
      // The documented rules, in order (test-values.ts).
      const row = await findCompletedByReceipt(deps.em, c.transactionId, receiver);
      let code = FORCED_CODE.exec(`${c.remarks} ${c.occasion}`)?.[1];
      if (!code) {
        if (!(await initiatorIsValid(deps, c.initiator, c.securityCredential))) code = '2001';
        else if (c.initiator === INITIATOR_WITHOUT_ROLE) code = '21';
        else if (!row) code = 'R000002';
        else if (await isReversed(deps.em, c.transactionId)) code = 'R000001';
        else if (Number(row.amount) === INSUFFICIENT_BALANCE_AMOUNT) code = '1';
        else code = '0';
      }
      const reversalReceipt = receiptNumber();
      if (code === '0' && row) {
        const first = await recordReversal(deps.em, { ...ids(c), transactionId: c.transactionId, reversalReceipt, amount, resultCode: '0' });
        if (!first) code = 'R000001'; // a concurrent request reversed it first
      }
      if (code !== '0') await recordReversal(deps.em, { ...ids(c), transactionId: c.transactionId, reversalReceipt: null, amount, resultCode: code });
      const result = code === '0' ? reversalSuccess(c, reversalReceipt, c.transactionId, amount, row) : failure(c, code, REVERSAL_FAILURES[code] ?? 'The request failed.');
      let resultAt = afterDelay(deps);
      if (await takeLoss((sql, params) => deps.em.getConnection().execute(sql, params), 'mobilemoney', 'queue_timeouts')) {
        // The queue-timeouts control: the notice first, and the request carried out all the same, its result after.
        await scheduleCallback(deps, resultAt, { kind: 'result', url: c.timeoutUrl, body: queueTimeout(c), attempt: 0 });
        resultAt = new Date(resultAt.getTime() + deps.config.sandboxCallbackDelayMs + 1);
      }
      await scheduleCallback(deps, resultAt, { kind: 'result', url: c.resultUrl, body: result, attempt: 0 });
      await ack(deps, res, c);
    } catch (err) {
      next(err);
    }
  });
}

const ids = (c: Common) => ({ conversationId: c.conversationId, originatorConversationId: c.originatorConversationId });
