import type { Request, Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { clientIdOf } from './auth.js';
import { dbOf, inTransaction, paypalId, route, simulatorBase } from './db.js';
import { PaypalError, invalid, unprocessable, type ErrorDetail } from './errors.js';
import { SETTLE_CAPTURE_JOB, captureEvent, recordEvent, scheduleTransmissions, type SettleCaptureJob } from './events.js';
import { isObject, missing, optionalString, optionalUrl, parseMoney, requestIdOf, wantsRepresentation } from './params.js';
import { mockedRefusal } from './mock-response.js';
import { ORDERS_KEY_RETENTION, loadOrder, previousRequestInProgress, renderCaptureAnswer, renderOrder } from './store.js';
import type { Db } from './db.js';
import { minimalOrderView, type CaptureRow, type Experience, type OrderRow, type PurchaseUnitInput } from './views.js';

interface OrderRequest {
  intent: string;
  unit: PurchaseUnitInput;
  amountMinor: bigint;
  currency: string;
  experience: Experience;
  usesPaymentSource: boolean;
}

/** Validates a create-order body the way PayPal does: 400 for shape and syntax, 422 for business rules. */
function parseOrderRequest(body: unknown): OrderRequest {
  if (!isObject(body)) throw invalid('MALFORMED_REQUEST_JSON', '', 'The request JSON is not well formed.');
  const intent = body.intent;
  if (intent === undefined) throw missing('/intent');
  if (intent !== 'CAPTURE' && intent !== 'AUTHORIZE') {
    throw invalid('INVALID_PARAMETER_VALUE', '/intent', 'The value of a field is invalid.', 'body', String(intent));
  }
  if (intent === 'AUTHORIZE') throw unprocessable('UNSUPPORTED_INTENT', 'The sandbox simulator supports intent CAPTURE only.', '/intent');
  const units = body.purchase_units;
  if (!Array.isArray(units) || units.length === 0) throw missing('/purchase_units');
  if (units.length > 1) throw unprocessable('MULTIPLE_PURCHASE_UNITS_NOT_SUPPORTED', 'The sandbox simulator supports one purchase unit per order.', '/purchase_units');
  const pu: unknown = units[0];
  if (!isObject(pu)) throw invalid('INVALID_PARAMETER_SYNTAX', '/purchase_units/0', 'The value of a field does not conform to the expected format.');
  const { minor, currency } = parseMoney(pu.amount, '/purchase_units/0/amount');
  const unit: PurchaseUnitInput = {
    reference_id: optionalString(pu, 'reference_id', '/purchase_units/0/reference_id', 256),
    custom_id: optionalString(pu, 'custom_id', '/purchase_units/0/custom_id', 127),
    invoice_id: optionalString(pu, 'invoice_id', '/purchase_units/0/invoice_id', 127),
    description: optionalString(pu, 'description', '/purchase_units/0/description', 127),
  };

  // Return and cancel URLs: the newer payment_source.paypal.experience_context, or the older application_context.
  const source = body.payment_source;
  const paypal = isObject(source) ? source.paypal : undefined;
  const usesPaymentSource = isObject(paypal);
  const ctx = usesPaymentSource ? (paypal as Record<string, unknown>).experience_context : body.application_context;
  const prefix = usesPaymentSource ? '/payment_source/paypal/experience_context' : '/application_context';
  const experience: Experience = {};
  if (isObject(ctx)) {
    experience.return_url = optionalUrl(ctx, 'return_url', `${prefix}/return_url`);
    experience.cancel_url = optionalUrl(ctx, 'cancel_url', `${prefix}/cancel_url`);
    experience.brand_name = optionalString(ctx, 'brand_name', `${prefix}/brand_name`, 127);
    experience.user_action = optionalString(ctx, 'user_action', `${prefix}/user_action`, 20);
    experience.shipping_preference = optionalString(ctx, 'shipping_preference', `${prefix}/shipping_preference`, 40);
    experience.landing_page = optionalString(ctx, 'landing_page', `${prefix}/landing_page`, 20);
    experience.locale = optionalString(ctx, 'locale', `${prefix}/locale`, 10);
  } else if (ctx !== undefined) {
    throw invalid('INVALID_PARAMETER_SYNTAX', prefix, 'The value of a field does not conform to the expected format.');
  }
  return { intent, unit, amountMinor: minor, currency, experience, usesPaymentSource };
}

type CaptureOutcome =
  | { status: number; body: Record<string, unknown>; transmissions: string[]; pendingCapture: string | null }
  /** A refusal (422), committed with what it changed and kept under its PayPal-Request-Id before it is answered. */
  | { refusal: PaypalError };

const instrumentDeclined = () =>
  unprocessable(
    'INSTRUMENT_DECLINED',
    'The instrument presented was either declined by the processor or bank, or it can\'t be used for this payment.',
  );

/** PayPal's refusal of an order with a payment_source but no PayPal-Request-Id (Orders v2 errors, create order). */
const PAYPAL_REQUEST_ID_REQUIRED = () =>
  invalid(
    'PAYPAL_REQUEST_ID_REQUIRED',
    'PayPal-Request-Id',
    'A PayPal-Request-Id is required if you are trying to process payment for an Order. Please specify a PayPal-Request-Id or Create the Order without a payment_source specified.',
    'header',
  );

/** Whether PayPal still keeps the key of the order's capture (made less than 6 h ago). */
async function captureKeyKept(db: Db, orderId: string): Promise<boolean> {
  const rows = await db.query<{ id: string }>(
    `SELECT id FROM sandbox_walletpay_captures WHERE order_id = ? AND created_at >= now() - ${ORDERS_KEY_RETENTION} LIMIT 1`,
    [orderId],
  );
  return rows.length > 0;
}

/** An order's capture (`POST /v2/checkout/orders/:id/capture`, as express matches it): what the capture-only outage fails (controls.ts). */
export const isCaptureRequest = (req: Request): boolean => req.method === 'POST' && /^\/v2\/checkout\/orders\/[^/]+\/capture\/?$/i.test(req.path);

/** `POST /v2/checkout/orders`, `GET /v2/checkout/orders/:id`, `POST /v2/checkout/orders/:id/capture`. */
export function mountOrders(router: Router, deps: SandboxDeps): void {
  const base = () => simulatorBase(deps.config.publicBaseUrl);

  router.post(
    '/v2/checkout/orders',
    route(async (req, res) => {
      const clientId = clientIdOf(res);
      const requestId = requestIdOf(req);
      const input = parseOrderRequest(req.body);
      if (requestId === null && isObject(req.body) && req.body.payment_source !== undefined) throw PAYPAL_REQUEST_ID_REQUIRED();
      const db = dbOf(deps.em);
      // A key PayPal no longer keeps (older than 6 h) is forgotten: the request is a new order.
      if (requestId !== null) {
        await db.query(
          `UPDATE sandbox_walletpay_orders SET request_id = NULL
           WHERE client_id = ? AND request_id = ? AND created_at < now() - ${ORDERS_KEY_RETENTION}`,
          [clientId, requestId],
        );
      }
      const [created] = await db.query<OrderRow>(
        `INSERT INTO sandbox_walletpay_orders
           (id, client_id, request_id, intent, status, purchase_unit, amount_minor, currency, experience, uses_payment_source)
         VALUES (?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?::jsonb, ?)
         ON CONFLICT (client_id, request_id) WHERE request_id IS NOT NULL DO NOTHING
         RETURNING *`,
        [
          paypalId(), clientId, requestId, input.intent, input.usesPaymentSource ? 'PAYER_ACTION_REQUIRED' : 'CREATED',
          JSON.stringify(input.unit), input.amountMinor.toString(), input.currency, JSON.stringify(input.experience), input.usesPaymentSource,
        ],
      );
      // The same PayPal-Request-Id again within 6 h: the original order, 200 instead of 201.
      const order = created ?? (await db.query<OrderRow>('SELECT * FROM sandbox_walletpay_orders WHERE client_id = ? AND request_id = ?', [clientId, requestId]))[0];
      if (!order) throw previousRequestInProgress();
      const body = wantsRepresentation(req) ? await renderOrder(db, base(), order) : minimalOrderView(base(), order);
      res.status(created ? 201 : 200).json(body);
    }),
  );

  router.get(
    '/v2/checkout/orders/:id',
    route(async (req, res) => {
      const db = dbOf(deps.em);
      const order = await loadOrder(db, req.params.id!, clientIdOf(res));
      res.json(await renderOrder(db, base(), order));
    }),
  );

  router.post(
    '/v2/checkout/orders/:id/capture',
    route(async (req, res) => {
      const clientId = clientIdOf(res);
      const requestId = requestIdOf(req);
      const representation = wantsRepresentation(req);
      // Negative testing: the mocked refusal, with nothing captured or recorded.
      const mocked = mockedRefusal(req, 'capture');
      if (mocked) throw mocked;
      const result = await inTransaction(deps.em, async (db): Promise<CaptureOutcome> => {
        // Another account's order: PayPal's capture 403 PERMISSION_DENIED.
        const order = await loadOrder(db, req.params.id!, clientId, true, 'denied');
        // PayPal answers a repeated PayPal-Request-Id with "the latest status of the previous request"
        // (its idempotency guide) while it keeps the id: a refusal too.
        if (requestId !== null) {
          const [earlier] = await db.query<{ status: number; details: ErrorDetail[] }>(
            `SELECT status, details FROM sandbox_walletpay_capture_refusals
             WHERE order_id = ? AND request_id = ? AND created_at >= now() - ${ORDERS_KEY_RETENTION}`,
            [order.id, requestId],
          );
          if (earlier) return { refusal: new PaypalError(earlier.status, earlier.details) };
        }
        try {
          return await attempt(db, order);
        } catch (err) {
          if (!(err instanceof PaypalError) || err.status !== 422) throw err;
          // A refusal is committed (with what it changed, e.g. INSTRUMENT_DECLINED's order back to the buyer)
          // and kept under its PayPal-Request-Id.
          if (requestId !== null) {
            await db.query(
              `INSERT INTO sandbox_walletpay_capture_refusals (order_id, request_id, status, details) VALUES (?, ?, ?, ?::jsonb)
               ON CONFLICT (order_id, request_id) DO UPDATE SET status = EXCLUDED.status, details = EXCLUDED.details, created_at = now()`,
              [order.id, requestId, err.status, JSON.stringify(err.details)],
            );
          }
          return { refusal: err };
        }
      });
      if ('refusal' in result) throw result.refusal;
      await scheduleTransmissions(deps, result.transmissions);
      if (result.pendingCapture) {
        // A capture under review completes (or is denied) a little later, with its own event.
        const due = new Date(Date.now() + 2 * deps.config.sandboxCallbackDelayMs);
        await deps.agenda.schedule<SettleCaptureJob>(due, SETTLE_CAPTURE_JOB, { captureId: result.pendingCapture });
      }
      res.status(result.status).json(result.body);

      /** The capture of the locked, live `order`; a refusal is thrown (422). */
      async function attempt(db: Db, order: OrderRow): Promise<CaptureOutcome> {
        if (order.status === 'COMPLETED') {
          // The capture's own PayPal-Request-Id within 6 h of it: its answer again; after that, a new request.
          if (requestId !== null && order.capture_request_id === requestId && (await captureKeyKept(db, order.id))) {
            return { status: 200, body: await renderCaptureAnswer(db, base(), order, representation), transmissions: [], pendingCapture: null };
          }
          throw unprocessable('ORDER_ALREADY_CAPTURED', "Order already captured. If 'intent=CAPTURE' only one capture per order is allowed.");
        }
        if (order.status !== 'APPROVED') {
          throw unprocessable(
            'ORDER_NOT_APPROVED',
            "Payer has not yet approved the Order for payment. Please redirect the payer to the 'rel':'approve' url returned as part of the HATEOAS links within the Create Order call.",
          );
        }
        if (order.funding === 'instrument_declined') {
          // The buyer must choose another funding source: the order waits for their approval again.
          await db.query(
            `UPDATE sandbox_walletpay_orders
             SET status = CASE WHEN uses_payment_source THEN 'PAYER_ACTION_REQUIRED' ELSE 'CREATED' END,
                 payer_id = NULL, funding = 'ok', updated_at = now()
             WHERE id = ?`,
            [order.id],
          );
          throw instrumentDeclined();
        }
        if (order.funding === 'refused') {
          throw unprocessable('TRANSACTION_REFUSED', 'The request was refused.');
        }
        const [status, reason] = order.funding === 'declined' ? ['DECLINED', null] : order.funding === 'pending' || order.funding === 'pending_denied' ? ['PENDING', 'PENDING_REVIEW'] : ['COMPLETED', null];
        const [capture] = await db.query<CaptureRow>(
          `INSERT INTO sandbox_walletpay_captures (id, order_id, client_id, status, status_reason, amount_minor, currency, custom_id, invoice_id)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
          [paypalId(), order.id, clientId, status, reason, order.amount_minor, order.currency, order.purchase_unit.custom_id ?? null, order.purchase_unit.invoice_id ?? null],
        );
        const [completed] = await db.query<OrderRow>(
          `UPDATE sandbox_walletpay_orders SET status = 'COMPLETED', capture_request_id = ?, updated_at = now() WHERE id = ? RETURNING *`,
          [requestId, order.id],
        );
        const transmissions = await recordEvent(db, base(), captureEvent(base(), capture!));
        return { status: 201, body: await renderCaptureAnswer(db, base(), completed!, representation), transmissions, pendingCapture: status === 'PENDING' ? capture!.id : null };
      }
    }),
  );
}
