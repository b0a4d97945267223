import type { Router } from 'express';
import type { SandboxDeps } from '../module.js';
import { clientIdOf } from './auth.js';
import { inTransaction, route } from './db.js';
import { invalid, unprocessable } from './errors.js';
import { isObject, parseMoney } from './params.js';
import { loadOrder } from './store.js';

/** `/purchase_units/@reference_id=='<id>'/amount`, PayPal's path for one purchase unit's amount. */
const AMOUNT_PATH = /^\/purchase_units\/@reference_id=='([^']*)'\/amount$/;

const ORDER_ALREADY_COMPLETED = () => unprocessable('ORDER_ALREADY_COMPLETED', 'The order cannot be patched after it is completed.');

/**
 * `PATCH /v2/checkout/orders/:id` (Orders v2 "Update order"): a JSON Patch array, answered 204. PayPal
 * patches an order while it is CREATED or APPROVED (PAYER_ACTION_REQUIRED too, awaiting the buyer); the
 * simulator takes `replace` of `/purchase_units/@reference_id=='<reference id>'/amount` (the reference
 * id is `default` when the order was created without one), the patch a merchant — or anyone holding its
 * credentials — sends to change what the buyer pays. Refusals are PayPal's: 400 for a body, op or path
 * that is not well formed, 422 for the business rules (a completed order, an op the field does not take,
 * no such purchase unit, the amount's own rules).
 */
export function mountOrderPatch(router: Router, deps: SandboxDeps): void {
  router.patch(
    '/v2/checkout/orders/:id',
    route(async (req, res) => {
      const clientId = clientIdOf(res);
      const ops = req.body as unknown;
      if (!Array.isArray(ops) || ops.length === 0) throw invalid('MALFORMED_REQUEST_JSON', '', 'The request JSON is not well formed.');
      await inTransaction(deps.em, async (db) => {
        const order = await loadOrder(db, req.params.id!, clientId, true);
        if (order.status === 'COMPLETED' || order.status === 'VOIDED') throw ORDER_ALREADY_COMPLETED();
        let amount: { minor: bigint; currency: string } | null = null;
        ops.forEach((op: unknown, i) => {
          if (!isObject(op)) throw invalid('INVALID_PARAMETER_SYNTAX', `/${i}`, 'The value of a field does not conform to the expected format.');
          if (typeof op.op !== 'string' || !['add', 'remove', 'replace', 'move', 'copy', 'test'].includes(op.op)) {
            throw invalid('INVALID_PARAMETER_VALUE', `/${i}/op`, 'The value of a field is invalid.', 'body', String(op.op));
          }
          if (typeof op.path !== 'string' || op.path === '') throw invalid('PATCH_PATH_REQUIRED', `/${i}/path`, 'Specify a value for the field being patched.');
          if (!op.path.startsWith('/')) {
            throw invalid('INVALID_JSON_POINTER_FORMAT', `/${i}/path`, 'Path should be a valid JSON Pointer https://tools.ietf.org/html/rfc6901 that references a location within the request where the field value is invalid.');
          }
          const match = AMOUNT_PATH.exec(op.path);
          if (!match) throw unprocessable('UNSUPPORTED_PATCH_PATH', 'The sandbox simulator patches purchase_units[].amount only.', `/${i}/path`);
          if (match[1] !== (order.purchase_unit.reference_id ?? 'default')) {
            throw unprocessable('REFERENCE_ID_NOT_FOUND', 'Filter expression value is incorrect. Please check the value of the reference_id in the path.', `/${i}/path`);
          }
          if (op.op !== 'replace') {
            throw unprocessable('INVALID_PATCH_OPERATION', "The operation cannot be honored. Cannot add a property that's already present, use replace. Cannot remove a property thats not present, use add. Cannot replace a property thats not present, use add.", `/${i}/op`);
          }
          if (op.value === undefined) throw invalid('PATCH_VALUE_REQUIRED', `/${i}/value`, 'Please specify a value to for the field that is being patched.');
          amount = parseMoney(op.value, `/${i}/value`);
        });
        if (!amount) return;
        const { minor, currency } = amount as { minor: bigint; currency: string };
        await db.query(
          `UPDATE sandbox_walletpay_orders SET amount_minor = ?, currency = ?, updated_at = now() WHERE id = ?`,
          [minor.toString(), currency, order.id],
        );
      });
      res.status(204).end();
    }),
  );
}
