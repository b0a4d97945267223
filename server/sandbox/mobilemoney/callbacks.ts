import { takeLoss } from '../controls.js';
import { postOut } from '../egress.js';
import type { SandboxDeps } from '../module.js';
import { operatorTimestamp } from './eat-clock.js';
import { holdResult } from './held-results.js';
import { findStk, type StkRow } from './store.js';

/** The one job that delivers every operator callback (STK results, transaction-status and reversal results, queue timeouts). */
export const CALLBACK_JOB = 'sandbox.mobilemoney.callback';

/** Delivery attempts per callback, the first included; then the simulator gives up, like the operator. */
const MAX_ATTEMPTS = 5;
const CALLBACK_TIMEOUT_MS = 10_000;

/** `released`: a held result sent now (held-results.ts), not to be lost or held again. */
export type CallbackJobData = { url: string; attempt: number; released?: boolean } & ({ kind: 'stk'; checkoutRequestId: string } | { kind: 'result'; body: unknown });

export async function scheduleCallback(deps: SandboxDeps, at: Date, data: CallbackJobData): Promise<void> {
  await deps.agenda.schedule(at, CALLBACK_JOB, data);
}

/**
 * A callback URL as logged: its `token` (the HMAC that makes the service believe a result sent there)
 * replaced by `[redacted]`; `ref` (our id) and the path kept, to tell which request it was.
 */
const loggableUrl = (url: string): string => url.replace(/([?&]token=)[^&#]*/gi, '$1[redacted]');

/** `config.sandboxCallbackDelayMs` from now: when asynchronous results are sent. */
export const afterDelay = (deps: SandboxDeps) => new Date(Date.now() + deps.config.sandboxCallbackDelayMs);

/** `{Body:{stkCallback:{…}}}`; CallbackMetadata only on success, with numbers where the operator sends numbers. */
export function stkCallbackBody(row: StkRow) {
  const callback: Record<string, unknown> = {
    MerchantRequestID: row.merchant_request_id,
    CheckoutRequestID: row.checkout_request_id,
    ResultCode: row.result_code,
    ResultDesc: row.result_desc,
  };
  if (row.result_code === 0 && row.receipt_number) {
    callback.CallbackMetadata = {
      Item: [
        { Name: 'Amount', Value: Number(row.amount) },
        { Name: 'MpesaReceiptNumber', Value: row.receipt_number },
        { Name: 'Balance' },
        { Name: 'TransactionDate', Value: Number(operatorTimestamp(row.completes_at)) },
        { Name: 'PhoneNumber', Value: Number(row.phone) },
      ],
    };
  }
  return { Body: { stkCallback: callback } };
}

/**
 * POSTs one callback; on failure retries with a growing delay, up to MAX_ATTEMPTS. The operator does not
 * sign callbacks. Returns the HTTP status of this attempt (null: not sent, or no answer).
 */
export async function deliverCallback(deps: SandboxDeps, data: CallbackJobData): Promise<number | null> {
  let body: unknown;
  if (data.kind === 'stk') {
    const row = await findStk(deps.em, data.checkoutRequestId);
    if (!row) return null;
    body = stkCallbackBody(row);
  } else {
    if (data.attempt === 0 && !data.released && (await takeLoss((sql, params) => deps.em.getConnection().execute(sql, params), 'mobilemoney'))) {
      deps.logger.info({ provider: 'mobilemoney', url: loggableUrl(data.url) }, 'sandbox result lost on purpose (lose-results control)');
      return null;
    }
    if (data.attempt === 0 && !data.released && (await holdResult(deps, data))) {
      deps.logger.info({ provider: 'mobilemoney', url: loggableUrl(data.url) }, 'sandbox result held on purpose (hold-results control)');
      return null;
    }
    body = data.body;
  }
  // Through the service's egress: no redirect followed, no private address unless allowed (egress.ts).
  const answer = await postOut(deps, 'mobilemoney', data.url, {
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    timeoutMs: CALLBACK_TIMEOUT_MS,
  });
  const status = answer.status;
  const failure = answer.status === null ? answer.failure : answer.status < 200 || answer.status >= 300 ? `HTTP ${answer.status}` : null;
  if (failure === null) return status;
  const attempt = data.attempt + 1;
  if (attempt >= MAX_ATTEMPTS) {
    deps.logger.warn({ provider: 'mobilemoney', kind: data.kind, attempts: attempt, failure }, 'sandbox callback given up');
    return status;
  }
  const delay = Math.max(deps.config.sandboxCallbackDelayMs, 250) * 2 ** attempt;
  deps.logger.info({ provider: 'mobilemoney', kind: data.kind, attempt, failure }, 'sandbox callback failed, retrying');
  await scheduleCallback(deps, new Date(Date.now() + delay), { ...data, attempt });
  return status;
}
