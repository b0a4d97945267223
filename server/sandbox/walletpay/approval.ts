import express, { type Request, type Response, type Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { dbOf, paypalId, route } from './db.js';
import { ORDER_LIVE } from './store.js';
import { money, type OrderRow } from './views.js';

/**
 * What the buyer can do on the approval page. Besides approving and cancelling, sandbox outcomes let
 * tests reach the capture's other states: the funding source declines at capture (capture DECLINED,
 * event PAYMENT.CAPTURE.DECLINED); the capture is held for review (PENDING, completed shortly after by a
 * job, event PAYMENT.CAPTURE.COMPLETED, or denied: DECLINED, event PAYMENT.CAPTURE.DENIED); the capture is refused 422 INSTRUMENT_DECLINED and the order
 * waits for the buyer to approve again with another funding source, or 422 TRANSACTION_REFUSED (the
 * order stays APPROVED and every capture is refused); or the payment is an eCheck whose
 * refunds go PENDING (event PAYMENT.REFUND.PENDING) and then fail (PAYMENT.REFUND.FAILED).
 */
const ACTIONS = {
  approve: { funding: 'ok', label: 'Approve' },
  cancel: { funding: null, label: 'Cancel and return to merchant' },
  'approve-decline': { funding: 'declined', label: 'Approve (sandbox: capture will be declined)' },
  'approve-pending': { funding: 'pending', label: 'Approve (sandbox: capture held for review)' },
  'approve-pending-denied': { funding: 'pending_denied', label: 'Approve (sandbox: capture held for review, then denied)' },
  'approve-instrument-declined': { funding: 'instrument_declined', label: 'Approve (sandbox: funding source declined at capture, INSTRUMENT_DECLINED)' },
  'approve-echeck': { funding: 'echeck', label: 'Approve (sandbox: eCheck; its refunds stay pending, then fail)' },
  'approve-refused': { funding: 'refused', label: 'Approve (sandbox: capture refused for good, TRANSACTION_REFUSED)' },
} as const;
type Action = keyof typeof ACTIONS;
const isAction = (v: unknown): v is Action => typeof v === 'string' && Object.hasOwn(ACTIONS, v);

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function page(res: Response, status: number, title: string, body: string): void {
  res
    .status(status)
    .type('html')
    .set('Cache-Control', 'no-store')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
        `<meta name="viewport" content="width=device-width, initial-scale=1">` +
        `<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}` +
        `button{display:block;width:100%;margin:.5rem 0;padding:.7rem;font-size:1rem;cursor:pointer}` +
        `.sandbox button{font-size:.85rem;opacity:.8}</style></head><body>` +
        `<p><strong>walletpay</strong> sandbox checkout</p><h1>${escapeHtml(title)}</h1>${body}</body></html>`,
    );
}

/** `url` with `params` added to its query string. */
function withQuery(url: string, params: Record<string, string>): string {
  const u = new URL(url);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

function approvalForm(order: OrderRow): string {
  const amount = money(order.amount_minor, order.currency);
  const description = order.purchase_unit.description ? `<p>${escapeHtml(order.purchase_unit.description)}</p>` : '';
  const button = (action: Action) =>
    `<form method="post"><input type="hidden" name="token" value="${escapeHtml(order.id)}">` +
    `<input type="hidden" name="action" value="${action}"><button type="submit">${escapeHtml(ACTIONS[action].label)}</button></form>`;
  return (
    `<p>Pay <strong>${escapeHtml(amount.value)} ${escapeHtml(amount.currency_code)}</strong>` +
    `${order.experience.brand_name ? ` to ${escapeHtml(order.experience.brand_name)}` : ''}.</p>${description}` +
    `<p>Order <code>${escapeHtml(order.id)}</code></p>${button('approve')}${button('cancel')}` +
    `<div class="sandbox">${button('approve-decline')}${button('approve-pending')}${button('approve-pending-denied')}${button('approve-instrument-declined')}${button('approve-refused')}${button('approve-echeck')}</div>`
  );
}

/**
 * The buyer-facing approval page `GET /checkoutnow?token=<orderId>` (the `approve` / `payer-action`
 * link), its form posts, and `?auto=<action>` (approve, cancel, approve-decline, approve-pending, approve-pending-denied,
 * approve-instrument-declined, approve-refused, approve-echeck) for tests without
 * a browser. Approving moves the order to APPROVED and redirects to `return_url?token=…&PayerID=…`;
 * cancelling redirects to `cancel_url?token=…` and changes nothing: PayPal keeps the order
 * PAYER_ACTION_REQUIRED (or CREATED) until the buyer approves it or it expires. The first opening of the
 * page is PayPal's redirect: the order then lives 3 h from it, approved or not (store.ts ORDER_LIVE).
 */
export function mountApproval(router: Router, deps: SandboxDeps): void {
  const db = () => dbOf(deps.em);

  /**
   * The live order `orderId` as the buyer opens its page: the first opening of an order awaiting the buyer
   * is PayPal's redirect, from which the order has 3 h more to be approved and captured (ORDER_LIVE).
   */
  async function opened(orderId: string): Promise<OrderRow | undefined> {
    const [order] = await db().query<OrderRow>(
      `UPDATE sandbox_walletpay_orders
       SET redirected_at = CASE WHEN redirected_at IS NULL AND status IN ('CREATED', 'PAYER_ACTION_REQUIRED') THEN now() ELSE redirected_at END
       WHERE id = ? AND ${ORDER_LIVE} RETURNING *`,
      [orderId],
    );
    return order;
  }

  async function act(res: Response, orderId: string, action: Action): Promise<void> {
    const order = await opened(orderId);
    if (!order) return page(res, 404, 'Order not found', '<p>This checkout link is not valid.</p>');
    const { return_url: returnUrl, cancel_url: cancelUrl } = order.experience;

    if (action === 'cancel') {
      // As PayPal: the buyer goes back to cancel_url and the order is left as it was, still awaiting the
      // buyer (the same link approves it later); an order nobody approves expires (ORDER_LIVE).
      if (order.status !== 'CREATED' && order.status !== 'PAYER_ACTION_REQUIRED') {
        return page(res, 422, 'Order cannot be cancelled', `<p>The order is ${escapeHtml(order.status)}.</p>`);
      }
      if (cancelUrl) return res.redirect(302, withQuery(cancelUrl, { token: orderId }));
      return page(res, 200, 'Payment cancelled', '<p>You can close this window.</p>');
    }

    const [approved] = await db().query<OrderRow>(
      `UPDATE sandbox_walletpay_orders SET status = 'APPROVED', payer_id = ?, funding = ?, updated_at = now()
       WHERE id = ? AND status IN ('CREATED', 'PAYER_ACTION_REQUIRED') RETURNING *`,
      [paypalId(13), ACTIONS[action].funding, orderId],
    );
    const payerId = approved?.payer_id ?? (order.status === 'APPROVED' ? order.payer_id : null);
    if (!payerId) return page(res, 422, 'Order cannot be approved', `<p>The order is ${escapeHtml(order.status)}.</p>`);
    if (returnUrl) return res.redirect(302, withQuery(returnUrl, { token: orderId, PayerID: payerId }));
    return page(res, 200, 'Payment approved', '<p>You can close this window and return to the merchant.</p>');
  }

  router.get(
    '/checkoutnow',
    route(async (req: Request, res: Response) => {
      const token = typeof req.query.token === 'string' ? req.query.token : '';
      const auto = req.query.auto;
      if (auto !== undefined) {
        if (!isAction(auto)) return page(res, 400, 'Unknown action', `<p>auto must be one of ${Object.keys(ACTIONS).join(', ')}.</p>`);
        return act(res, token, auto);
      }
      const order = await opened(token);
      if (!order) return page(res, 404, 'Order not found', '<p>This checkout link is not valid.</p>');
      if (order.status !== 'CREATED' && order.status !== 'PAYER_ACTION_REQUIRED') {
        return page(res, 200, `Order ${order.status.toLowerCase()}`, `<p>This order is ${escapeHtml(order.status)}; there is nothing to approve.</p>`);
      }
      return page(res, 200, 'Review your payment', approvalForm(order));
    }),
  );

  router.post(
    '/checkoutnow',
    express.urlencoded({ extended: false, limit: '10kb' }),
    route(async (req: Request, res: Response) => {
      const form = (req.body ?? {}) as Record<string, unknown>;
      const token = typeof form.token === 'string' ? form.token : typeof req.query.token === 'string' ? req.query.token : '';
      if (!isAction(form.action)) return page(res, 400, 'Unknown action', '<p>Choose approve or cancel.</p>');
      return act(res, token, form.action);
    }),
  );
}
