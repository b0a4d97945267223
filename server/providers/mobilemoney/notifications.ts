import { readFileSync } from 'node:fs';
import type { MobilemoneyCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { MalformedNotificationError, type InboundRequest, type NotificationScheme, type ProviderNotification } from '../../domain/ports.js';
import { answersOurRequest } from './callback-urls.js';
import { MalformedCallbackError, isAllowedSource, parseResult, parseStkCallback, verifyCallbackToken, verifyLiveSignature, type OperatorResult } from './callback.js';
import { reversalResultStatus, stkResultStatus } from './transformers.js';

/** interface.md: replays are rejected through a 24-hour de-duplication by CheckoutRequestID. */
const DEDUP_WINDOW_MS = 24 * 3_600_000;

function result(request: InboundRequest): OperatorResult {
  try {
    return parseResult(request.body);
  } catch (err) {
    if (err instanceof MalformedCallbackError) throw new MalformedNotificationError('Body is not a mobilemoney Result');
    throw err;
  }
}

/** The request's address is `subjectId`'s: its `ref` and the token bound to it (callback-urls.ts). */
const boundTo = (request: InboundRequest, creds: MobilemoneyCredentials, subjectId: string): boolean =>
  request.query.ref === subjectId && verifyCallbackToken(creds.passkey, subjectId, request.query.token);

/**
 * The operator's callbacks (STK results, transaction-status results, reversal results, queue
 * timeouts). The operator signs none of them itself: each must come from an allowlisted address; in
 * the sandbox env the URL's `ref` + `token` (HMAC keyed by the merchant's passkey) must match; in the
 * live env an X-Mobilemoney-Signature, when present, must verify with the operator certificate. A
 * status-query or reversal result answers a request of ours: it comes to an address carrying the token
 * bound to that request, which verifies it (a wrong token is refused). Any other callback without a
 * signature (how the real operator sends them) is `unverifiable`, and the pipeline asks the operator
 * instead of believing it: the STK query for a push, a transaction-status query for the rest. A signed
 * one at an address without the token (every live push callback) is tied to our payment or refund only
 * by the reference it names: naming one its subject has not recorded, it is confirmed the same way (boundToSubject).
 */
export function mobilemoneyNotifications(config: AppConfig): NotificationScheme<MobilemoneyCredentials> {
  let certPem: string | null | undefined;
  const certificate = () => {
    if (certPem === undefined) certPem = config.mobilemoneyCertPath ? readFileSync(config.mobilemoneyCertPath, 'utf8') : null;
    return certPem;
  };

  return {
    dedupWindowMs: DEDUP_WINDOW_MS,

    screen: (request) => (isAllowedSource(request.sourceIp, config.mobilemoneyCallbackAllowlist, config.sandbox) ? null : 'the source address is not an operator address'),
    // The operator does not send a callback again (Daraja documents no retry): one refused with 429 at a sales
    // peak would leave its payment to the status sync and its refunds to reconciliation. Its own addresses (the
    // allowlist; never loopback, which only the sandbox's simulator uses) are not counted; strangers still are.
    uncountedSource: (sourceIp) => isAllowedSource(sourceIp, config.mobilemoneyCallbackAllowlist, false),

    parse(request): ProviderNotification {
      const ref = request.query.ref ?? null;
      switch (request.subpath) {
        case '': {
          let stk;
          try {
            stk = parseStkCallback(request.body);
          } catch (err) {
            if (err instanceof MalformedCallbackError) throw new MalformedNotificationError('Body is not a mobilemoney STK callback');
            throw err;
          }
          const status = stkResultStatus(stk.resultCode);
          return {
            kind: 'payment',
            dedupKey: `stk:${stk.checkoutRequestId}`,
            label: 'stk',
            raw: request.body,
            payment: { ourId: ref, providerRef: stk.checkoutRequestId, providerDataKey: 'checkoutRequestId' },
            status,
            amount: stk.amount ?? null,
            providerRef: status === 'completed' && stk.receiptNumber ? stk.receiptNumber : undefined,
            receiptNumber: stk.receiptNumber ?? null,
            failureReason: status === 'failed' ? `${stk.resultDesc} (ResultCode ${stk.resultCode})` : null,
            data: { checkoutRequestId: stk.checkoutRequestId },
          };
        }
        case '/transactionstatus/result':
        case '/transactionstatus/timeout': {
          const r = result(request);
          const timeout = request.subpath.endsWith('timeout');
          const completed = !timeout && r.resultCode === '0' && /^completed$/i.test(r.parameters.TransactionStatus ?? '');
          // Only ReceiptNo is the transaction's receipt: Result.TransactionID is the status query's own
          // transaction (a real result: TransactionID MBN0000000 beside ReceiptNo MBN31H462N), never recorded.
          const receipt = r.parameters.ReceiptNo || null;
          return {
            kind: 'status-report',
            dedupKey: `${timeout ? 'status-timeout' : 'status'}:${r.originatorConversationId}`,
            label: timeout ? 'transaction-status-timeout' : 'transaction-status',
            raw: request.body,
            query: { ourId: ref, providerRef: r.originatorConversationId },
            resultCode: r.resultCode,
            queueTimeout: timeout,
            completed: completed ? { receipt, amount: r.amount } : null,
          };
        }
        case '/reversal/result':
        case '/reversal/timeout': {
          const r = result(request);
          const timeout = request.subpath.endsWith('timeout');
          const succeeded = timeout ? null : reversalResultStatus(r.resultCode) === 'completed';
          // "Already reversed" (R000001) names no amount: the operator reverses whole receipts, so it is the whole request.
          const alreadyReversed = r.resultCode === 'R000001' && r.amount === null;
          return {
            kind: 'reversal',
            dedupKey: `${timeout ? 'reversal-timeout' : 'reversal'}:${r.originatorConversationId}`,
            label: timeout ? 'reversal-timeout' : 'reversal',
            raw: request.body,
            refund: { ourId: ref, providerRef: r.originatorConversationId },
            succeeded,
            amount: alreadyReversed ? 'as-requested' : r.amount,
            failureReason: succeeded === false ? `${r.resultDesc || 'reversal failed'} (ResultCode ${r.resultCode})` : null,
          };
        }
        default:
          return { kind: 'ignored', label: request.subpath, reason: 'not an operator callback address' };
      }
    },

    answersOurRequestAbout: (request, creds, subjectId) => answersOurRequest(request.subpath) && boundTo(request, creds, subjectId),

    // A live push callback carries no token (callback-urls.ts): its signature proves the operator wrote the
    // body, not that it answers our push — anyone's push may name our payment's address as its CallBackURL.
    boundToSubject: (request, creds, subjectId) => boundTo(request, creds, subjectId),

    async verify(request, creds, subjectId) {
      const tokenVerdict = () => (boundTo(request, creds, subjectId) ? 'verified' : 'invalid');
      if (creds.env === 'sandbox') return tokenVerdict();
      const signature = request.headers['x-mobilemoney-signature'];
      if (signature !== undefined && signature !== '') {
        const cert = certificate();
        return cert !== null && verifyLiveSignature(request.rawBody, signature, cert) ? 'verified' : 'invalid';
      }
      // The result of a request of ours (status query, reversal), at the address bound to it (callback-urls.ts).
      if (answersOurRequest(request.subpath) && request.query.token !== undefined) return tokenVerdict();
      return 'unverifiable';
    },
  };
}
