import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MobilemoneyCredentials } from '../../contract/index.js';
import { MobilemoneyAdapter } from '../../server/providers/mobilemoney/adapter.js';
import { parseResult, parseStkCallback } from '../../server/providers/mobilemoney/callback.js';
import { pullDateTime } from '../../server/providers/mobilemoney/eat-time.js';
import { reversalResultStatus } from '../../server/providers/mobilemoney/transformers.js';
import { ProviderError } from '../../server/domain/ports.js';
import {
  INITIATOR_WITHOUT_ROLE,
  INSUFFICIENT_BALANCE_AMOUNT,
  INVALID_SECURITY_CREDENTIAL,
  PULL_PAGE_SIZE,
  TEST_PHONES,
  TIMEOUT_TRANSACTION_ID,
} from '../../server/sandbox/mobilemoney/test-values.js';
import { startTestService, type TestService } from '../support/service.js';
import { CallbackReceiver, eventually, paymentInput, sandboxCreds } from './mobilemoney-helpers.js';

let t: TestService;
let receiver: CallbackReceiver;
let adapter: MobilemoneyAdapter;
let sim: string;

beforeAll(async () => {
  t = await startTestService();
  receiver = await new CallbackReceiver().start();
  adapter = new MobilemoneyAdapter(t.service.container.config, t.service.container.orm.em);
  sim = `${t.baseUrl}/sandbox/mobilemoney`;
});
afterAll(async () => {
  await receiver.stop();
  await t.stop();
});

/** A completed payment's receipt: push, wait for the success callback. */
async function paidReceipt(creds: MobilemoneyCredentials, shillings = 100n): Promise<string> {
  const { providerRef } = await adapter.createPayment(creds, paymentInput(TEST_PHONES.success, `${receiver.url}/stk`, shillings));
  const callback = await eventually(() => receiver.at('/stk').find((r) => r.json?.Body?.stkCallback?.CheckoutRequestID === providerRef), 'STK callback');
  return parseStkCallback(callback.json).receiptNumber!;
}

/** The Result POSTed to `path` for one OriginatorConversationID. */
const resultAt = (path: string, originatorConversationId: string) =>
  eventually(() => receiver.at(path).find((r) => r.json?.Result?.OriginatorConversationID === originatorConversationId), `result at ${path}`).then((r) =>
    parseResult(r.json),
  );

const urls = (name: string) => ({ resultUrl: `${receiver.url}/${name}/result`, timeoutUrl: `${receiver.url}/${name}/timeout` });

describe('transaction status', () => {
  const creds = sandboxCreds();

  it('acknowledges, then POSTs the transaction\'s details to the ResultURL', async () => {
    const receipt = await paidReceipt(creds, 250n);
    const ack = await adapter.transactionStatus(creds, { transactionId: receipt, ...urls('status'), occasion: 'check-1' });
    expect(ack).toEqual({
      OriginatorConversationID: expect.stringMatching(/^\d+-\d+-1$/),
      ConversationID: expect.stringMatching(/^AG_\d{8}_[0-9a-f]+$/),
      ResponseCode: '0',
      ResponseDescription: 'Accept the service request successfully.',
    });
    const result = await resultAt('/status/result', ack.OriginatorConversationID);
    expect(result).toMatchObject({ conversationId: ack.ConversationID, resultCode: '0' });
    expect(result.parameters).toMatchObject({ ReceiptNo: receipt, TransactionStatus: 'Completed', Amount: '250', DebitPartyName: expect.stringContaining('254708374149') });
    const raw = receiver.at('/status/result').find((r) => r.json.Result.OriginatorConversationID === ack.OriginatorConversationID)!.json;
    expect(raw.Result.ReferenceData).toEqual({ ReferenceItem: { Key: 'Occasion', Value: 'check-1' } });
  });

  it('reports an unknown receipt as R000002', async () => {
    const ack = await adapter.transactionStatus(creds, { transactionId: 'ZZZ0000000', ...urls('status') });
    const result = await resultAt('/status/result', ack.OriginatorConversationID);
    expect(result.resultCode).toBe('R000002');
    expect(result.resultDesc).toMatch(/does not exist/);
  });

  it(`sends ${TIMEOUT_TRANSACTION_ID} to the QueueTimeOutURL instead`, async () => {
    const ack = await adapter.transactionStatus(creds, { transactionId: TIMEOUT_TRANSACTION_ID, ...urls('status') });
    const timeout = await resultAt('/status/timeout', ack.OriginatorConversationID);
    expect(timeout.resultCode).not.toBe('0');
    expect(receiver.at('/status/result').some((r) => r.json?.Result?.OriginatorConversationID === ack.OriginatorConversationID)).toBe(false);
  });

  it('accepts the documentation\'s spaced keys and checks the command', async () => {
    const token = await adapter.accessToken(creds);
    const post = (body: unknown) =>
      fetch(`${sim}/mpesa/transactionstatus/v1/query`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const body = {
      Initiator: 'testapi',
      SecurityCredential: 'cred',
      'Command ID': 'TransactionStatusQuery',
      'Transaction ID': 'NEF61H8J60',
      PartyA: '174379',
      IdentifierType: 4,
      ResultURL: `${receiver.url}/spaced/result`,
      QueueTimeOutURL: `${receiver.url}/spaced/timeout`,
      Remarks: 'OK',
      Occasion: 'OK',
    };
    const ok = await post(body);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ ResponseCode: '0' });
    const bad = await post({ ...body, 'Command ID': 'AccountBalance' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ errorCode: '400.002.02', errorMessage: 'Bad Request - Invalid CommandID' });
  });

  it('needs the merchant\'s initiator in live env, and names the missing field', async () => {
    const live = sandboxCreds({ env: 'live' });
    const err = await adapter.transactionStatus(live, { transactionId: 'X', ...urls('status') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ kind: 'invalid_request', message: expect.stringContaining('initiator') });
    const noCredential = await adapter.reverse({ ...live, initiator: 'ops' }, { transactionId: 'X', amountMinor: 100n, remarks: 'r', ...urls('x') }).catch((e: unknown) => e);
    expect(noCredential).toMatchObject({ kind: 'invalid_request', message: expect.stringContaining('initiator_password') });
  });
});

describe('reversal', () => {
  const creds = sandboxCreds();
  const reverse = (c: MobilemoneyCredentials, transactionId: string, amountMinor = 10000n, remarks = 'Customer refund', occasion?: string) =>
    adapter.reverse(c, { transactionId, amountMinor, remarks, occasion, ...urls('reversal') });

  it('0: reverses a receipt, with the original transaction in the result', async () => {
    const receipt = await paidReceipt(creds);
    const ack = await reverse(creds, receipt);
    expect(ack).toMatchObject({ ResponseCode: '0', ConversationID: expect.stringMatching(/^AG_/) });
    const result = await resultAt('/reversal/result', ack.OriginatorConversationID);
    expect(result.resultCode).toBe('0');
    expect(result.transactionId).toMatch(/^[A-Z][A-Z0-9]{9}$/);
    expect(result.parameters).toMatchObject({ OriginalTransactionID: receipt, Amount: '100', Charge: '0' });
    expect(reversalResultStatus(result.resultCode)).toBe('completed');

    // R000001: the same receipt again is "already reversed".
    const again = await reverse(creds, receipt);
    const second = await resultAt('/reversal/result', again.OriginatorConversationID);
    expect(second.resultCode).toBe('R000001');
    expect(reversalResultStatus(second.resultCode)).toBe('completed');
  });

  it('R000002: an unknown receipt', async () => {
    const ack = await reverse(creds, 'QQQ1234567');
    expect((await resultAt('/reversal/result', ack.OriginatorConversationID)).resultCode).toBe('R000002');
  });

  it(`1: insufficient balance (original amount ${INSUFFICIENT_BALANCE_AMOUNT} KES)`, async () => {
    const receipt = await paidReceipt(creds, BigInt(INSUFFICIENT_BALANCE_AMOUNT));
    const ack = await reverse(creds, receipt, BigInt(INSUFFICIENT_BALANCE_AMOUNT) * 100n);
    const result = await resultAt('/reversal/result', ack.OriginatorConversationID);
    expect(result).toMatchObject({ resultCode: '1', resultDesc: expect.stringMatching(/insufficient/) });
    expect(reversalResultStatus(result.resultCode)).toBe('failed');
  });

  it('21: an initiator without the reversal role', async () => {
    const receipt = await paidReceipt(creds);
    const ack = await reverse({ ...creds, initiator: INITIATOR_WITHOUT_ROLE }, receipt);
    expect((await resultAt('/reversal/result', ack.OriginatorConversationID)).resultCode).toBe('21');
  });

  it('2001: invalid initiator credentials', async () => {
    const receipt = await paidReceipt(creds);
    const ack = await reverse({ ...creds, security_credential: INVALID_SECURITY_CREDENTIAL }, receipt);
    expect((await resultAt('/reversal/result', ack.OriginatorConversationID)).resultCode).toBe('2001');
  });

  it('SIM:<code> in Remarks or Occasion forces any code', async () => {
    const receipt = await paidReceipt(creds);
    for (const code of ['1', '21', '2001', 'R000001', 'R000002']) {
      const ack = await reverse(creds, receipt, 10000n, `Refund SIM:${code}`);
      expect((await resultAt('/reversal/result', ack.OriginatorConversationID)).resultCode).toBe(code);
    }
    const viaOccasion = await reverse(creds, receipt, 10000n, 'Refund', 'SIM:21');
    expect((await resultAt('/reversal/result', viaOccasion.OriginatorConversationID)).resultCode).toBe('21');
    // None of those reversed it: a plain request still succeeds.
    const plain = await reverse(creds, receipt);
    expect((await resultAt('/reversal/result', plain.OriginatorConversationID)).resultCode).toBe('0');
  });

  it('refundPayment reverses the payment\'s receipt and is pending under the OriginatorConversationID', async () => {
    const receipt = await paidReceipt(creds);
    const refund = await adapter.refundPayment(creds, {
      refundId: 'ref-1',
      payment: { paymentId: 'p-1', providerRef: 'ws_CO_1', reference: 'REF000000001', providerData: {}, amount: { minor: 10000n, currency: 'KES' }, receiptNumber: receipt },
      amount: { minor: 10000n, currency: 'KES' },
      idempotencyKey: 'k',
      ...urls('refund'),
    });
    expect(refund).toMatchObject({ status: 'pending', providerRef: expect.stringMatching(/^\d+-\d+-1$/) });
    expect((await resultAt('/refund/result', refund.providerRef!)).resultCode).toBe('0');
  });

  it(`${TIMEOUT_TRANSACTION_ID} goes to the QueueTimeOutURL`, async () => {
    const ack = await reverse(creds, TIMEOUT_TRANSACTION_ID);
    await resultAt('/reversal/timeout', ack.OriginatorConversationID);
  });

  it('validates Remarks length on the wire', async () => {
    const token = await adapter.accessToken(creds);
    const res = await fetch(`${sim}/mpesa/reversal/v1/request`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        Initiator: 'testapi', SecurityCredential: 'c', CommandID: 'TransactionReversal', TransactionID: 'NLJ7RT61SV', Amount: 1, ReceiverParty: '174379',
        RecieverIdentifierType: '11', ResultURL: `${receiver.url}/r`, QueueTimeOutURL: `${receiver.url}/t`, Remarks: 'x',
      }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ errorCode: '400.002.02', errorMessage: 'Bad Request - Invalid Remarks' });
  });
});

describe('pull transactions', () => {
  it('registers once (1000), then says already registered (1001)', async () => {
    const creds = sandboxCreds({ shortcode: '600100' });
    const input = { nominatedNumber: '254708374149', callbackUrl: `${receiver.url}/pull` };
    expect(await adapter.registerPull(creds, input)).toEqual({ registered: true, responseCode: '1000', responseDescription: 'Shortcode Registered Successfully' });
    expect(await adapter.registerPull(creds, input)).toMatchObject({ registered: true, responseCode: '1001' });
  });

  it('returns the completed transactions of the window, the silent one included', async () => {
    const creds = sandboxCreds({ shortcode: '600200' });
    const since = new Date(Date.now() - 60_000);
    const called = paymentInput(TEST_PHONES.success, `${receiver.url}/pull-stk`, 168n);
    const silent = paymentInput(TEST_PHONES.silent, `${receiver.url}/pull-stk`, 42n);
    const cancelled = paymentInput(TEST_PHONES.cancelled, `${receiver.url}/pull-stk`);
    await adapter.createPayment(creds, called);
    await adapter.createPayment(creds, silent);
    await adapter.createPayment(creds, cancelled);
    const rows = await eventually(async () => {
      const pulled = (await adapter.pullTransactions(creds, { since, until: new Date(Date.now() + 60_000) })).transactions;
      return pulled.length === 2 ? pulled : null;
    }, 'two completed transactions');
    const byRef = new Map(rows.map((r) => [r.billReference, r]));
    expect(byRef.get(called.reference)).toMatchObject({ amountMinor: 16800n, msisdn: '254708374149', transactionType: 'c2b-pay-bill-debit', transactionId: expect.stringMatching(/^[A-Z][A-Z0-9]{9}$/) });
    expect(byRef.get(silent.reference)).toMatchObject({ amountMinor: 4200n, msisdn: TEST_PHONES.silent });
    expect(byRef.has(cancelled.reference)).toBe(false);
    for (const r of rows) expect(r.trxDate.getTime()).toBeGreaterThanOrEqual(Math.floor(since.getTime() / 1000) * 1000);

    // Outside the window, and another shortcode: nothing (ResponseCode 1001).
    const nothing = { transactions: [], skipped: [] };
    expect(await adapter.pullTransactions(creds, { since: new Date(Date.now() - 7_200_000), until: new Date(Date.now() - 3_600_000) })).toEqual(nothing);
    expect(await adapter.pullTransactions(sandboxCreds({ shortcode: '600299' }), { since, until: new Date(Date.now() + 60_000) })).toEqual(nothing);
  });

  it("lists a till's (CustomerBuyGoodsOnline) payment as c2b-buy-goods-debit, a paybill's as c2b-pay-bill-debit, as Daraja does", async () => {
    const creds = sandboxCreds({ shortcode: '600250' });
    const since = new Date(Date.now() - 60_000);
    const token = await adapter.accessToken(creds);
    const ts = '20261128120000';
    const push = await fetch(`${sim}/mpesa/stkpush/v1/processrequest`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        BusinessShortCode: '600250', Password: Buffer.from(`600250${creds.passkey}${ts}`).toString('base64'), Timestamp: ts, TransactionType: 'CustomerBuyGoodsOnline',
        Amount: 70, PartyA: '254722000251', PartyB: '600250', PhoneNumber: '254722000251', CallBackURL: `${receiver.url}/unused`, AccountReference: 'TILL', TransactionDesc: 'till',
      }),
    });
    expect(push.status).toBe(200);
    await adapter.createPayment(creds, paymentInput('254722000252', `${receiver.url}/unused`, 80n));
    const rows = await eventually(async () => {
      const pulled = (await adapter.pullTransactions(creds, { since, until: new Date(Date.now() + 60_000) })).transactions;
      return pulled.length === 2 ? pulled : null;
    }, 'two completed transactions');
    expect(rows.map((r) => [r.amountMinor, r.transactionType]).sort((a, b) => (a[0]! < b[0]! ? -1 : 1))).toEqual([[7000n, 'c2b-buy-goods-debit'], [8000n, 'c2b-pay-bill-debit']]);
  });

  it('pages by row offset, and the adapter reads every page', async () => {
    const creds = sandboxCreds({ shortcode: '600300' });
    const since = new Date(Date.now() - 60_000);
    const count = PULL_PAGE_SIZE + 5;
    for (let i = 0; i < count; i++) {
      // The customer answers each prompt before the next push: the operator locks a phone while its prompt is open.
      await t.sql('UPDATE sandbox_mobilemoney_stk_requests SET completes_at = now() WHERE phone = $1 AND completes_at > now()', [TEST_PHONES.silent]);
      await adapter.createPayment(creds, paymentInput(TEST_PHONES.silent, `${receiver.url}/unused`, BigInt(i + 1)));
    }
    const all = await eventually(async () => {
      const pulled = (await adapter.pullTransactions(creds, { since, until: new Date(Date.now() + 60_000) })).transactions;
      return pulled.length === count ? pulled : null;
    }, `${count} transactions`);
    expect(new Set(all.map((r) => r.transactionId)).size).toBe(count);
    expect(all.map((r) => r.amountMinor).sort((a, b) => (a < b ? -1 : 1))).toEqual(Array.from({ length: count }, (_, i) => BigInt(i + 1) * 100n));

    const token = await adapter.accessToken(creds);
    const page = async (offset: string) => {
      const res = await fetch(`${sim}/pulltransactions/v1/query`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ ShortCode: '600300', StartDate: pullDateTime(since), EndDate: pullDateTime(new Date(Date.now() + 60_000)), OffSetValue: offset }),
      });
      return (await res.json()) as { ResponseCode: string; Response: unknown[][] };
    };
    const first = await page('0');
    expect(first.ResponseCode).toBe('1000');
    expect(first.Response).toHaveLength(1);
    expect(first.Response[0]).toHaveLength(PULL_PAGE_SIZE);
    expect(first.Response[0]![0]).toEqual({
      transactionId: expect.any(String),
      trxDate: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/),
      msisdn: TEST_PHONES.silent,
      sender: TEST_PHONES.silent,
      transactiontype: 'c2b-pay-bill-debit',
      billreference: expect.any(String),
      amount: expect.stringMatching(/^\d+\.00$/),
      organizationname: expect.any(String),
    });
    expect((await page(String(PULL_PAGE_SIZE))).Response[0]).toHaveLength(5);
    expect(await page(String(count))).toMatchObject({ ResponseCode: '1001', Response: [[]] });
  });
});
