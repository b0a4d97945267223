import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { loadConfig } from '../../server/config/config.js';
import { MobilemoneyAdapter } from '../../server/providers/mobilemoney/adapter.js';
import { ForwardingStub, type Forward, type StubAnswer, type StubRequest } from '../support/forwarding-stub.js';
import { startTestService, type TestService } from '../support/service.js';
import { sandboxCreds } from './mobilemoney-helpers.js';

/**
 * Rows of Daraja's pull that settle nothing, listed by the simulator (its pull-rows control: its own
 * payments make none such): one such row must not fail the pull, or every run fails until it ages out of
 * the 48-hour window and missed callbacks are never recovered.
 */

const row = (transactionId: string, fields: Record<string, unknown> = {}) => ({
  transactionId, trxDate: '2026-11-28T10:13:00Z', msisdn: 254708374149, sender: 'JANE WANJIKU', transactiontype: 'c2b-pay-bill-debit',
  billreference: `REF${transactionId}`, amount: '168.00', organizationname: 'Duka', ...fields,
});

/** Page one: two payments (paybill; till, with Daraja's "2697.0" and an offset date) among rows that settle nothing. */
const FIRST_PAGE = [
  row('PAYBILL001'),
  row('', { billreference: 'NO-RECEIPT' }),
  row('BADDATE001', { trxDate: 'yesterday' }),
  row('NEGATIVE01', { amount: '-168.00' }),
  row('THOUSANDS1', { amount: '1,000.00' }),
  row('OTHERTYPE1', { transactiontype: 'business-payment-credit' }),
  row('TILL000001', { transactiontype: 'c2b-buy-goods-debit', amount: '2697.0', trxDate: '2026-11-28T13:13:00+03:00' }),
];
const SECOND_PAGE = [row('PAYBILL002', { amount: 50 })];

/** In front of the simulator: records the OffSetValue of each pull query. */
class PullOffsets extends ForwardingStub {
  offsets: string[] = [];
  protected override intercept(req: StubRequest, forward: Forward): Promise<StubAnswer> {
    if (req.url.endsWith('/pulltransactions/v1/query')) this.offsets.push((JSON.parse(req.body.toString('utf8')) as { OffSetValue: string }).OffSetValue);
    return forward();
  }
}

let t: TestService;
let stub: PullOffsets;
let stubUrl: string;

beforeAll(async () => {
  t = await startTestService();
  stub = new PullOffsets();
  stub.target = t.baseUrl;
  stubUrl = await stub.start();
  await t.http.post('/sandbox/mobilemoney/_control/pull-rows').send({ shortcode: '600400', pages: [FIRST_PAGE, SECOND_PAGE] }).expect(200);
});
afterAll(async () => {
  await t.http.post('/sandbox/mobilemoney/_control/pull-rows').send({ shortcode: '600400', pages: [] });
  await stub.stop();
  await t.stop();
});

it('sets aside rows it cannot read or that are no customer payment, keeps the payments, and pages by every row listed', async () => {
  const base = `${stubUrl}/sandbox/mobilemoney`;
  const adapter = new MobilemoneyAdapter(loadConfig({ NODE_ENV: 'test', SANDBOX: 'false', MOBILEMONEY_BASE_URL: base }), t.service.container.orm.em);
  stub.offsets = [];
  const pulled = await adapter.pullTransactions(sandboxCreds({ shortcode: '600400' }), { since: new Date(Date.now() - 3_600_000), until: new Date() });

  expect(pulled.transactions.map((r) => [r.transactionId, r.transactionType, r.amountMinor, r.trxDate.toISOString()])).toEqual([
    ['PAYBILL001', 'c2b-pay-bill-debit', 16800n, '2026-11-28T10:13:00.000Z'],
    ['TILL000001', 'c2b-buy-goods-debit', 269700n, '2026-11-28T10:13:00.000Z'],
    ['PAYBILL002', 'c2b-pay-bill-debit', 5000n, '2026-11-28T10:13:00.000Z'],
  ]);
  expect(pulled.skipped).toEqual([
    { transactionId: null, reason: 'unreadable' },
    { transactionId: 'BADDATE001', reason: 'unreadable' },
    { transactionId: 'NEGATIVE01', reason: 'unreadable' },
    { transactionId: 'THOUSANDS1', reason: 'unreadable' },
    { transactionId: 'OTHERTYPE1', reason: 'not_a_payment', transactionType: 'business-payment-credit' },
  ]);
  // OffSetValue is a row offset: the second page starts after all seven rows of the first, skipped ones included.
  expect(stub.offsets).toEqual(['0', '7', '8']);
});
