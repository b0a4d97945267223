import type { Db } from './db.js';
import { PaypalError, notFound } from './errors.js';
import { minimalCaptureView, orderView, type CaptureRow, type OrderRow, type RefundRow } from './views.js';

/**
 * PayPal's default order lifetime (Orders v2, order links): the caller has 3 hours from the order's
 * creation to send the buyer to approve it; once they are sent (the approval page opened: `redirected_at`),
 * 3 hours from then for the buyer to approve it and the caller to capture it. An order awaiting approval
 * or approved but not captured past that expires, and from then on does not exist (GET and capture answer
 * 404 INVALID_RESOURCE_ID; the approval link no longer works). SQL condition on a `sandbox_walletpay_orders` row.
 */
export const ORDER_LIVE =
  `NOT (status IN ('CREATED', 'PAYER_ACTION_REQUIRED', 'APPROVED') AND COALESCE(redirected_at, created_at) < now() - interval '3 hours')`;

/**
 * How long PayPal keeps a PayPal-Request-Id: Orders v2 (create, capture) "The server stores keys for 6
 * hours"; Payments v2 (refund) "The server stores keys for 45 days" (each API's paypal_request_id
 * parameter). A request repeating an older key is a new request. SQL intervals.
 */
export const ORDERS_KEY_RETENTION = `interval '6 hours'`;
export const PAYMENTS_KEY_RETENTION = `interval '45 days'`;

/**
 * PayPal's answer to a request on another account's resource: 403 NOT_AUTHORIZED, PERMISSION_DENIED (the
 * 403 its specs document for GET /v2/payments/captures/{id}, its refund, GET /v2/payments/refunds/{id} and
 * POST /v2/checkout/orders/{id}/capture).
 */
export const permissionDenied = () =>
  new PaypalError(403, [{ issue: 'PERMISSION_DENIED', description: 'You do not have permission to access or perform operations on this resource.' }]);

/** Whether a row `id` of `table` exists for another client than `clientId`. */
async function anotherClients(db: Db, table: 'orders' | 'captures' | 'refunds', id: string, clientId: string, live = 'true'): Promise<boolean> {
  const rows = await db.query<{ id: string }>(`SELECT id FROM sandbox_walletpay_${table} WHERE id = ? AND client_id <> ? AND ${live}`, [id, clientId]);
  return rows.length > 0;
}

/**
 * An order of this client (an expired one does not exist), optionally row-locked. Another client's order:
 * `others` says how PayPal answers — 404 as an unknown id (GET, PATCH: PayPal documents no 403 for them)
 * or 403 PERMISSION_DENIED (a capture).
 */
export async function loadOrder(db: Db, id: string, clientId: string, lock = false, others: 'not-found' | 'denied' = 'not-found'): Promise<OrderRow> {
  const rows = await db.query<OrderRow>(
    `SELECT * FROM sandbox_walletpay_orders WHERE id = ? AND client_id = ? AND ${ORDER_LIVE}${lock ? ' FOR UPDATE' : ''}`,
    [id, clientId],
  );
  if (rows[0]) return rows[0];
  if (others === 'denied' && (await anotherClients(db, 'orders', id, clientId, ORDER_LIVE))) throw permissionDenied();
  throw notFound('INVALID_RESOURCE_ID', 'Specified resource ID does not exist. Please check the resource ID and try again.', 'order_id');
}

/** A refund of this client; another client's is 403 PERMISSION_DENIED, an unknown id 404 INVALID_RESOURCE_ID. */
export async function loadRefund(db: Db, id: string, clientId: string): Promise<RefundRow> {
  const [refund] = await db.query<RefundRow>('SELECT * FROM sandbox_walletpay_refunds WHERE id = ? AND client_id = ?', [id, clientId]);
  if (refund) return refund;
  if (await anotherClients(db, 'refunds', id, clientId)) throw permissionDenied();
  throw notFound('INVALID_RESOURCE_ID', 'Specified resource ID does not exist. Please check the resource ID and try again.', 'refund_id');
}

/**
 * A capture of this client (another client's: 403 PERMISSION_DENIED), optionally row-locked: `true` waits for the lock, `'nowait'` does not — a
 * capture another request holds (a refund of it in progress) is PayPal's 409 PREVIOUS_REQUEST_IN_PROGRESS.
 */
export async function loadCapture(db: Db, id: string, clientId: string, lock: boolean | 'nowait' = false): Promise<CaptureRow> {
  let rows: CaptureRow[];
  try {
    rows = await db.query<CaptureRow>(
      `SELECT * FROM sandbox_walletpay_captures WHERE id = ? AND client_id = ?${lock === 'nowait' ? ' FOR UPDATE NOWAIT' : lock ? ' FOR UPDATE' : ''}`,
      [id, clientId],
    );
  } catch (err) {
    // lock_not_available: another request on this capture has not finished.
    if ((err as { code?: unknown }).code === '55P03') throw previousRequestInProgress();
    throw err;
  }
  if (rows[0]) return rows[0];
  // Another client's capture (GET, refund): PayPal's 403.
  if (await anotherClients(db, 'captures', id, clientId)) throw permissionDenied();
  throw notFound('INVALID_RESOURCE_ID', 'Specified resource ID does not exist. Please check the resource ID and try again.', 'capture_id');
}

const capturesOf = (db: Db, orderId: string) =>
  db.query<CaptureRow>('SELECT * FROM sandbox_walletpay_captures WHERE order_id = ? ORDER BY created_at, id', [orderId]);

/** The full representation of an order, with its captures and refunds. */
export async function renderOrder(db: Db, base: string, order: OrderRow): Promise<Record<string, unknown>> {
  const captures = await capturesOf(db, order.id);
  const refunds = captures.length === 0
    ? []
    : await db.query<RefundRow>(
      `SELECT r.* FROM sandbox_walletpay_refunds r JOIN sandbox_walletpay_captures c ON c.id = r.capture_id
       WHERE c.order_id = ? ORDER BY r.created_at, r.id`,
      [order.id],
    );
  return orderView(base, order, captures, refunds);
}

/** PayPal's answer to a request on a resource while an earlier request on it is still being processed. */
export const previousRequestInProgress = () =>
  new PaypalError(409, [{
    issue: 'PREVIOUS_REQUEST_IN_PROGRESS',
    description: 'A previous request on this resource is currently in progress. Please wait for some time and try again. It is best to space out the initial and the subsequent request(s) to avoid receiving this error.',
  }]);

/** A capture's answer: the full order for `Prefer: return=representation`, else PayPal's minimal capture answer. */
export async function renderCaptureAnswer(db: Db, base: string, order: OrderRow, representation: boolean): Promise<Record<string, unknown>> {
  return representation ? renderOrder(db, base, order) : minimalCaptureView(base, order, await capturesOf(db, order.id));
}
