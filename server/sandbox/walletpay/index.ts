import express, { type NextFunction, type Request, type Response } from 'express';
import { controlsGate, outageSwitch } from '../controls.js';
import { eachObject, type MisreportRewriter } from '../misreport.js';
import type { SandboxModule } from '../module.js';
import { mountApproval } from './approval.js';
import { mountAuth, requireBearer } from './auth.js';
import { INTERNAL_ERROR_BODY, PaypalError, sendError } from './errors.js';
import {
  FAIL_REFUND_JOB, SEND_EVENT_JOB, SETTLE_CAPTURE_JOB, failRefund, sendTransmission, settleCapture, type FailRefundJob, type SendEventJob, type SettleCaptureJob,
} from './events.js';
import { dbOf } from './db.js';
import { mountOrderPatch } from './order-patch.js';
import { isCaptureRequest, mountOrders } from './orders.js';
import { mountPayments, mountReversalControl } from './payments.js';
import { prepareSigningKeys } from './signing.js';
import { mountCertificate, mountWebhooks } from './webhooks.js';

/**
 * The walletpay simulator: PayPal's Orders v2 wire protocol (OAuth2 client credentials, orders with
 * buyer approval and capture, capture refunds, webhook subscriptions with RSA-signed events and the
 * verify-webhook-signature postback), mounted at /sandbox/walletpay. State is in the
 * `sandbox_walletpay_*` tables; events are sent by Agenda jobs.
 */
/** Integrity tests: every money object (order, capture, refund amounts) reports another value / currency. */
const misreport: MisreportRewriter = (body, m) => {
  eachObject(body, (o) => {
    if (typeof o.currency_code !== 'string' || typeof o.value !== 'string') return;
    if (m.amount !== undefined) o.value = String(m.amount);
    if (m.currency !== undefined) o.currency_code = m.currency;
  });
  return body;
};

/** PayPal's answer to a path it does not have. */
const unknownPath = (_req: Request, res: Response) => sendError(res, new PaypalError(404));

/** Larger than any request the adapter sends; PayPal documents no limit. */
const BODY_LIMIT = '100kb';

export const walletpaySandbox: SandboxModule = {
  path: '/sandbox/walletpay',

  router(deps) {
    const router = express.Router();
    // SANDBOX_CONTROLS off: every /_control path answers as the unknown paths below do; on: JSON only.
    controlsGate(router, deps, unknownPath);
    outageSwitch(router, deps, 'walletpay', INTERNAL_ERROR_BODY, misreport, isCaptureRequest);
    mountAuth(router, deps);
    mountCertificate(router, deps);
    mountApproval(router, deps);
    mountReversalControl(router, deps);
    // Everything below needs a live bearer token, and takes JSON (the token request above takes a form only).
    router.use(['/v1', '/v2'], requireBearer(deps));
    router.use(['/v1', '/v2'], express.json({ limit: BODY_LIMIT, type: ['application/json', 'application/*+json'] }));
    mountOrders(router, deps);
    mountOrderPatch(router, deps);
    mountPayments(router, deps);
    mountWebhooks(router, deps);

    router.use(unknownPath);
    router.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
      if (err instanceof PaypalError) return sendError(res, err);
      if ((err as { type?: string }).type === 'entity.parse.failed') {
        // PayPal's answer to a body that is not JSON.
        return sendError(res, new PaypalError(400, [{ field: '/', location: 'body', issue: 'MALFORMED_REQUEST_JSON', description: 'The request JSON is not well formed.' }]));
      }
      const status = (err as { status?: number }).status;
      if (typeof status === 'number' && status >= 400 && status < 500) {
        // Body-parser failures (malformed or oversized form bodies).
        return sendError(res, new PaypalError(400, [{ issue: 'MALFORMED_REQUEST', description: 'The request is not well formed.' }]));
      }
      deps.logger.error({ provider: 'walletpay', err: { type: (err as Error).name, message: (err as Error).message } }, 'sandbox walletpay error');
      res.status(500).json(INTERNAL_ERROR_BODY);
    });
    return router;
  },

  async prepare(deps) {
    await prepareSigningKeys(dbOf(deps.em));
  },

  defineJobs(deps, define) {
    define<SendEventJob>(SEND_EVENT_JOB, (data) => sendTransmission(deps, data));
    define<SettleCaptureJob>(SETTLE_CAPTURE_JOB, (data) => settleCapture(deps, data));
    define<FailRefundJob>(FAIL_REFUND_JOB, (data) => failRefund(deps, data));
  },
};
