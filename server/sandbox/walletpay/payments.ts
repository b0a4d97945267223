import type { Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { clientIdOf } from './auth.js';
import { dbOf, inTransaction, paypalId, route, simulatorBase } from './db.js';
import { PaypalError, invalid, notFound, unprocessable } from './errors.js';
import { FAIL_REFUND_JOB, addRefunded, recordEvent, scheduleTransmissions, type FailRefundJob } from './events.js';
import { isObject, optionalString, parseMoney, requestIdOf, wantsRepresentation } from './params.js';
import { mockedRefusal } from './mock-response.js';
import { PAYMENTS_KEY_RETENTION, loadCapture, loadRefund } from './store.js';
import { captureView, money, refundView, type RefundRow } from './views.js';

interface RefundRequest {
  amount: { minor: bigint; currency: string } | null;
  invoiceId: string | null;
  customId: string | null;
  noteToPayer: string | null;
}

function parseRefundRequest(body: unknown): RefundRequest {
  if (body === undefined || body === null) return { amount: null, invoiceId: null, customId: null, noteToPayer: null };
  if (!isObject(body)) throw invalid('MALFORMED_REQUEST_JSON', '', 'The request JSON is not well formed.');
  return {
    amount: body.amount === undefined ? null : parseMoney(body.amount, '/amount'),
    invoiceId: optionalString(body, 'invoice_id', '/invoice_id', 127) ?? null,
    customId: optionalString(body, 'custom_id', '/custom_id', 127) ?? null,
    noteToPayer: optionalString(body, 'note_to_payer', '/note_to_payer', 255) ?? null,
  };
}

/** `GET /v2/payments/captures/:id`, `POST /v2/payments/captures/:id/refund`, `GET /v2/payments/refunds/:id`. */
export function mountPayments(router: Router, deps: SandboxDeps): void {
  const base = () => simulatorBase(deps.config.publicBaseUrl);

  router.get(
    '/v2/payments/captures/:id',
    route(async (req, res) => {
      const capture = await loadCapture(dbOf(deps.em), req.params.id!, clientIdOf(res));
      res.json(captureView(base(), capture, { withOrderId: true }));
    }),
  );

  router.get(
    '/v2/payments/refunds/:id',
    route(async (req, res) => {
      const db = dbOf(deps.em);
      const refund = await loadRefund(db, req.params.id!, clientIdOf(res));
      const capture = await loadCapture(db, refund.capture_id, refund.client_id);
      res.json(refundView(base(), refund, capture));
    }),
  );

  router.post(
    '/v2/payments/captures/:id/refund',
    route(async (req, res) => {
      const clientId = clientIdOf(res);
      const requestId = requestIdOf(req);
      const input = parseRefundRequest(req.body);
      // Negative testing: the mocked refusal, with nothing refunded or recorded.
      const mocked = mockedRefusal(req, 'refund');
      if (mocked) throw mocked;
      const result = await inTransaction(deps.em, async (db) => {
        // The capture's row lock serialises refunds of one capture, replays included: while one is in
        // progress, another request on the capture is answered 409 PREVIOUS_REQUEST_IN_PROGRESS, as PayPal does.
        const capture = await loadCapture(db, req.params.id!, clientId, 'nowait');
        if (requestId !== null) {
          // Within the 45 days PayPal keeps a refund's key; an older one is forgotten: a new refund.
          await db.query(
            `UPDATE sandbox_walletpay_refunds SET request_id = NULL WHERE client_id = ? AND request_id = ? AND created_at < now() - ${PAYMENTS_KEY_RETENTION}`,
            [clientId, requestId],
          );
          const [replay] = await db.query<RefundRow>(
            'SELECT * FROM sandbox_walletpay_refunds WHERE client_id = ? AND request_id = ?',
            [clientId, requestId],
          );
          if (replay) {
            // PayPal answers a repeated PayPal-Request-Id with the refund as it now stands, and documents only
            // 201 for a refund (200 is for a replayed capture or order).
            const of = replay.capture_id === capture.id ? capture : await loadCapture(db, replay.capture_id, clientId);
            return { status: 201, refund: replay, capture: of, transmissions: [] as string[], pendingRefund: null };
          }
        }
        // The issues and descriptions of PayPal's refund 422 (payments v2 spec, captures.refund-422).
        if (capture.status === 'REFUNDED') throw unprocessable('CAPTURE_FULLY_REFUNDED', 'The capture has already been fully refunded');
        if (capture.status === 'PENDING') {
          throw unprocessable('PENDING_CAPTURE', 'Cannot initiate a refund as the capture is pending. Capture is typically pending when the payer has funded the transaction using e-check/bank funded.');
        }
        if (capture.status !== 'COMPLETED' && capture.status !== 'PARTIALLY_REFUNDED') throw unprocessable('REFUND_NOT_ALLOWED', 'Capture cannot be refunded.');
        const remaining = BigInt(capture.amount_minor) - BigInt(capture.refunded_minor);
        if (input.amount && input.amount.currency !== capture.currency) {
          throw unprocessable('CURRENCY_MISMATCH', 'Refund must be in the same currency as the capture.', '/amount/currency_code');
        }
        const amount = input.amount?.minor ?? remaining;
        if (amount > remaining) {
          throw unprocessable('REFUND_AMOUNT_EXCEEDED', 'The refund amount must be less than or equal to the capture amount that has not yet been refunded.', '/amount/value');
        }
        // An eCheck's refund is not instant: PENDING (event PAYMENT.REFUND.PENDING), then it fails (a job).
        const [{ funding }] = (await db.query<{ funding: string }>('SELECT funding FROM sandbox_walletpay_orders WHERE id = ?', [capture.order_id])) as [{ funding: string }];
        const echeck = funding === 'echeck';
        const [refund] = await db.query<RefundRow>(
          `INSERT INTO sandbox_walletpay_refunds (id, capture_id, client_id, request_id, status, status_reason, amount_minor, currency, invoice_id, custom_id, note_to_payer)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
          [paypalId(), capture.id, clientId, requestId, echeck ? 'PENDING' : 'COMPLETED', echeck ? 'ECHECK' : null, amount.toString(), capture.currency, input.invoiceId, input.customId, input.noteToPayer],
        );
        const updated = await addRefunded(db, capture.id, amount);
        const value = money(amount, capture.currency);
        const transmissions = await recordEvent(db, base(), {
          clientId,
          eventType: echeck ? 'PAYMENT.REFUND.PENDING' : 'PAYMENT.CAPTURE.REFUNDED',
          resourceType: 'refund',
          resource: refundView(base(), refund!, updated),
          summary: echeck ? `A ${value.currency_code} ${value.value} refund is pending` : `A ${value.currency_code} ${value.value} capture payment was refunded`,
        });
        return { status: 201, refund: refund!, capture: updated, transmissions, pendingRefund: echeck ? refund!.id : null };
      });
      await scheduleTransmissions(deps, result.transmissions);
      if (result.pendingRefund) {
        const due = new Date(Date.now() + 2 * deps.config.sandboxCallbackDelayMs);
        await deps.agenda.schedule<FailRefundJob>(due, FAIL_REFUND_JOB, { refundId: result.pendingRefund });
      }
      const view = refundView(base(), result.refund, result.capture);
      res.status(result.status).json(wantsRepresentation(req) ? view : { id: view.id, status: view.status, links: view.links });
    }),
  );
}

/**
 * Test control `POST /_control/reverse-capture {"capture_id", "amount"?: "2.51"}` (no token: it stands
 * for PayPal's own decision, e.g. a chargeback the buyer won): PayPal takes `amount` (by default what
 * remains) of the capture back from the merchant. The reversal is a refund the merchant did not ask for
 * (no custom_id), and the event is PAYMENT.CAPTURE.REVERSED with that refund as its resource.
 */
export function mountReversalControl(router: Router, deps: SandboxDeps): void {
  const base = () => simulatorBase(deps.config.publicBaseUrl);
  router.post(
    '/_control/reverse-capture',
    route(async (req, res) => {
      const body = (req.body ?? {}) as { capture_id?: unknown; amount?: unknown };
      if (typeof body.capture_id !== 'string' || body.capture_id === '') throw new PaypalError(400, [{ issue: 'MISSING_REQUIRED_PARAMETER', description: 'capture_id is required.', field: 'capture_id' }]);
      if (body.amount !== undefined && typeof body.amount !== 'string') throw new PaypalError(400, [{ issue: 'INVALID_PARAMETER_SYNTAX', description: 'amount is a decimal string.', field: 'amount' }]);
      const result = await inTransaction(deps.em, async (db) => {
        const [owner] = await db.query<{ client_id: string }>('SELECT client_id FROM sandbox_walletpay_captures WHERE id = ?', [body.capture_id]);
        if (!owner) throw notFound('INVALID_RESOURCE_ID', 'Specified resource ID does not exist.', 'capture_id');
        const capture = await loadCapture(db, body.capture_id as string, owner.client_id, true);
        if (capture.status !== 'COMPLETED' && capture.status !== 'PARTIALLY_REFUNDED') {
          throw unprocessable('REVERSAL_NOT_ALLOWED', `A capture that is ${capture.status} cannot be reversed.`);
        }
        const remaining = BigInt(capture.amount_minor) - BigInt(capture.refunded_minor);
        const amount = body.amount === undefined ? remaining : parseMoney({ currency_code: capture.currency, value: body.amount }, '/amount').minor;
        if (amount > remaining) throw unprocessable('REFUND_AMOUNT_EXCEEDED', 'The reversal exceeds what remains of the capture.', '/amount/value');
        const [refund] = await db.query<RefundRow>(
          `INSERT INTO sandbox_walletpay_refunds (id, capture_id, client_id, status, amount_minor, currency, note_to_payer)
           VALUES (?, ?, ?, 'COMPLETED', ?, ?, 'Payment reversed') RETURNING *`,
          [paypalId(), capture.id, capture.client_id, amount.toString(), capture.currency],
        );
        const updated = await addRefunded(db, capture.id, amount);
        const value = money(amount, capture.currency);
        const transmissions = await recordEvent(db, base(), {
          clientId: capture.client_id,
          eventType: 'PAYMENT.CAPTURE.REVERSED',
          resourceType: 'refund',
          resource: refundView(base(), refund!, updated),
          summary: `A ${value.currency_code} ${value.value} capture payment was reversed`,
        });
        return { refund: refund!, capture: updated, transmissions };
      });
      await scheduleTransmissions(deps, result.transmissions);
      res.status(201).json(refundView(base(), result.refund, result.capture));
    }),
  );
}
