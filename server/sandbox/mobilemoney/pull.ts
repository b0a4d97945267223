import type { NextFunction, Response, Router } from 'express';
import { parsePullWindowTime } from './eat-clock.js';
import type { SandboxDeps } from '../module.js';
import { responseRefId } from './ids.js';
import { listedRowsAt } from './listed-rows.js';
import { requireToken, type AuthedRequest, type TokenRefusals } from './oauth.js';
import { completedInWindow, registerPull } from './store.js';
import { PULL_PAGE_SIZE } from './test-values.js';
import { body, decimalAmount, invalidField, isMpesaNumber, isShortcode, isUrl, operatorError, text } from './wire.js';

/** Pull Transactions answers with its own codes (providers.md): 401.001 for a token, 400.001 for a ShortCode. */
const PULL_TOKEN_REFUSALS: TokenRefusals = {
  missing: ['401.001', 'Invalid Access Token'],
  invalid: ['401.001', 'Invalid Access Token'],
  revoked: ['401.001', 'Invalid Access Token'],
};
const invalidShortCode = (res: Response) => operatorError(res, '400.001', 'Invalid ShortCode');

/**
 * Pull Transactions: one-time registration, then paged queries of the shortcode's C2B transactions (after
 * the rows a test had it list, listed-rows.ts).
 */
export function mountPull(router: Router, deps: SandboxDeps): void {
  router.post('/pulltransactions/v1/register', requireToken(deps, PULL_TOKEN_REFUSALS), async (req: AuthedRequest, res: Response, next: NextFunction) => {
    try {
      const b = body(req);
      const shortcode = text(b.ShortCode);
      if (!isShortcode(shortcode)) return invalidShortCode(res);
      if (text(b.RequestType) !== 'Pull') return invalidField(res, 'RequestType');
      const nominated = text(b.NominatedNumber);
      if (!isMpesaNumber(nominated)) return invalidField(res, 'NominatedNumber');
      const callbackUrl = text(b.CallBackURL);
      if (!isUrl(callbackUrl)) return invalidField(res, 'CallBackURL');
      const { created, refId } = await registerPull(deps.em, shortcode, nominated, callbackUrl);
      res.json({
        ResponseRefID: refId,
        ResponseStatus: created ? '1000' : '1001',
        ShortCode: shortcode,
        ResponseDescription: created ? 'Shortcode Registered Successfully' : 'Shortcode already registered',
      });
    } catch (err) {
      next(err);
    }
  });

  router.post('/pulltransactions/v1/query', requireToken(deps, PULL_TOKEN_REFUSALS), async (req: AuthedRequest, res: Response, next: NextFunction) => {
    try {
      const b = body(req);
      const shortcode = text(b.ShortCode);
      if (!isShortcode(shortcode)) return invalidShortCode(res);
      const start = parsePullWindowTime(text(b.StartDate) ?? '');
      if (!start) return invalidField(res, 'StartDate');
      const end = parsePullWindowTime(text(b.EndDate) ?? '');
      if (!end || end < start) return invalidField(res, 'EndDate');
      const offsetText = text(b.OffSetValue) ?? '0';
      if (!/^\d{1,9}$/.test(offsetText)) return invalidField(res, 'OffSetValue');

      const offset = Number(offsetText);
      const given = await listedRowsAt(deps.em, shortcode, offset);
      if (given.rows.length > 0) {
        res.json({ ResponseRefID: responseRefId(), ResponseCode: '1000', ResponseMessage: 'Success', Response: [given.rows] });
        return;
      }
      const rows = await completedInWindow(deps.em, shortcode, start, end, offset - given.total, PULL_PAGE_SIZE);
      if (rows.length === 0) {
        res.json({ ResponseRefID: responseRefId(), ResponseCode: '1001', ResponseMessage: 'No transactions found', Response: [[]] });
        return;
      }
      res.json({
        ResponseRefID: responseRefId(),
        ResponseCode: '1000',
        ResponseMessage: 'Success',
        Response: [
          rows.map((row) => ({
            transactionId: row.receipt_number,
            trxDate: new Date(row.completes_at).toISOString().replace(/\.\d{3}Z$/, 'Z'),
            msisdn: row.phone,
            sender: row.phone,
            transactiontype: row.transaction_type === 'CustomerBuyGoodsOnline' ? 'c2b-buy-goods-debit' : 'c2b-pay-bill-debit',
            billreference: row.account_reference,
            amount: decimalAmount(row.amount),
            organizationname: `Sandbox Merchant ${row.shortcode}`,
          })),
        ],
      });
    } catch (err) {
      next(err);
    }
  });
}
