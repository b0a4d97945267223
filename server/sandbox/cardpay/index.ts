import express, { type NextFunction, type Request, type Response, Router } from 'express';
import { controlsGate, mountControls, mountLossCountdown } from '../controls.js';
import type { SandboxDeps, SandboxModule } from '../module.js';
import { accountRoutes } from './account.js';
import { mountApiErrorsControl } from './api-errors.js';
import { customerRoutes } from './customers.js';
import { SEND_EVENT_JOB, sendEvent, type SendEventJob } from './events.js';
import { apiRoutes } from './http.js';
import { paymentIntentRoutes } from './payment-intents.js';
import { paymentMethodRoutes } from './payment-methods.js';
import { SETTLE_REFUND_JOB, settleRefund } from './refund-settlement.js';
import { refundRoutes } from './refunds.js';
import { mountRollKeyControl } from './roll-key.js';
import { threeDsRoutes } from './three-ds.js';
import { misreport, switchesGate } from './switches.js';
import { webhookEndpointRoutes } from './webhook-endpoints.js';

/**
 * The cardpay simulator: Stripe's v1 PaymentIntents protocol (form-encoded requests, JSON answers,
 * Stripe's errors and idempotency), enough for the official `stripe` package to work against it.
 */
function router(deps: SandboxDeps): Router {
  const r = Router();
  // The app's JSON parser ignores form bodies; Stripe's bracket syntax needs qs (extended).
  r.use(express.urlencoded({ extended: true, limit: '100kb', parameterLimit: 1000 }));
  // The API reads the switches with its first statement (http.ts); the other routes read them here.
  const gate = switchesGate(deps.pool, deps.heldAnswers);
  const api = apiRoutes(r, deps);
  // SANDBOX_CONTROLS off: the controls below answer as unknown URLs do (a key first, then 404); on: JSON only.
  controlsGate(r, deps, api.notFound);
  mountControls(r, deps.em, 'cardpay', misreport);
  // The next n answers to API requests that change something (POST, DELETE) are lost on their way back
  // (http.ts): carried out and committed, then the connection drops, as when a network fails after the
  // provider acted. stripe-node retries a dropped connection once with the same idempotency key (and
  // that answer is lost too while the count lasts): {"count": 2} loses the adapter's answer to one create.
  mountLossCountdown(r, deps.em, 'cardpay', '/_control/lose-answers', 'lose_answers');
  // The same for attaching a payment method alone (POST /v1/payment_methods/:id/attach): the customer
  // made before it is answered, the card attached and its answer lost, as a saved card's save may meet.
  mountLossCountdown(r, deps.em, 'cardpay', '/_control/lose-attach-answers', 'lose_attach_answers', 'lost_answers');
  // An account's next n requests that change something run, then fail 500 api_error, stored under their
  // idempotency key as Stripe stores a 500 (api-errors.ts).
  mountApiErrorsControl(r, deps);
  // A key rolled as in Stripe's Dashboard: a new key of the same account, the rolled one expiring now or
  // within 7 days (roll-key.ts).
  mountRollKeyControl(r, deps);
  r.use('/3ds', gate);
  threeDsRoutes(r, deps);
  paymentIntentRoutes(api);
  refundRoutes(api);
  customerRoutes(api);
  paymentMethodRoutes(api);
  webhookEndpointRoutes(api);
  accountRoutes(api);
  r.use(gate, api.notFound);
  // A body the form parser refuses (too large, malformed) is answered in Stripe's shape, not the service's.
  r.use((err: { status?: number; statusCode?: number }, _req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(err);
    const status = err.status ?? err.statusCode ?? 500;
    res.status(status).json({
      error: status < 500 ? { type: 'invalid_request_error', message: 'The request body could not be parsed.' } : { type: 'api_error', message: 'An unknown error occurred.' },
    });
  });
  return r;
}

export const cardpaySandbox: SandboxModule = {
  path: '/sandbox/cardpay',
  router,
  defineJobs(deps, define) {
    define<SendEventJob>(SEND_EVENT_JOB, (job) => sendEvent(deps, job));
    define<{ refundId: string }>(SETTLE_REFUND_JOB, (job) => settleRefund(deps, job.refundId));
  },
};
