import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { loadConfig } from '../../server/config/config.js';
import { MobilemoneyAdapter } from '../../server/providers/mobilemoney/adapter.js';
import { startTestService, type TestService } from '../support/service.js';
import { sandboxCreds } from './mobilemoney-helpers.js';

/**
 * Rows of Daraja's pull that settle nothing, served by a real HTTP server standing in for the operator (the
 * simulator lists only the payments it took): one such row must not fail the pull, or every run fails
 * until it ages out of the 48-hour window and missed callbacks are never recovered.
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

let t: TestService;
let stub: http.Server;
let offsets: string[] = [];

beforeAll(async () => {
  t = await startTestService();
  stub = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.setHeader('Content-Type', 'application/json');
      if (req.method === 'GET' && req.url?.startsWith('/oauth/v1/generate')) return res.end(JSON.stringify({ access_token: 'stub-token', expires_in: '3599' }));
      if (req.method === 'POST' && req.url === '/pulltransactions/v1/query') {
        const { OffSetValue } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { OffSetValue: string };
        offsets.push(OffSetValue);
        const rows = OffSetValue === '0' ? FIRST_PAGE : OffSetValue === String(FIRST_PAGE.length) ? SECOND_PAGE : [];
        return res.end(JSON.stringify(rows.length
          ? { ResponseRefID: 'ref', ResponseCode: '1000', ResponseMessage: 'Success', Response: [rows] }
          : { ResponseRefID: 'ref', ResponseCode: '1001', ResponseMessage: 'No transactions found', Response: [[]] }));
      }
      res.statusCode = 404;
      res.end(JSON.stringify({ requestId: 'r', errorCode: '404.001.01', errorMessage: 'Resource not found' }));
    });
  });
  await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  stub.closeAllConnections();
  await new Promise<void>((resolve) => stub.close(() => resolve()));
  await t.stop();
});

it('sets aside rows it cannot read or that are no customer payment, keeps the payments, and pages by every row listed', async () => {
  const base = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
  const adapter = new MobilemoneyAdapter(loadConfig({ NODE_ENV: 'test', SANDBOX: 'false', MOBILEMONEY_BASE_URL: base }), t.service.container.orm.em);
  offsets = [];
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
  expect(offsets).toEqual(['0', '7', '8']);
});
