import { generateKeyPairSync, sign } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import {
  MalformedCallbackError,
  callbackToken,
  isAllowedSource,
  parseResult,
  parseStkCallback,
  verifyCallbackToken,
  verifyLiveSignature,
} from '../../server/providers/mobilemoney/callback.js';
import { darajaTimestamp, parseDarajaTimestamp, parsePullDateTime, pullDateTime } from '../../server/providers/mobilemoney/eat-time.js';
import { isInvalidTokenError, toProviderError } from '../../server/providers/mobilemoney/errors.js';
import { mobilemoneyNotifications } from '../../server/providers/mobilemoney/notifications.js';
import { loadConfig } from '../../server/config/config.js';
import { normalisePhone } from '../../server/providers/mobilemoney/phone.js';
import {
  reversalResultStatus,
  stkPassword,
  stkQueryStatus,
  stkResultStatus,
  wholeShillings,
  wireAmountToMinor,
} from '../../server/providers/mobilemoney/transformers.js';
import { ProviderError } from '../../server/domain/ports.js';

describe('normalisePhone', () => {
  it.each([
    ['0712345678', '254712345678'],
    ['712345678', '254712345678'],
    ['+254712345678', '254712345678'],
    ['254712345678', '254712345678'],
    ['0112345678', '254112345678'],
    ['112345678', '254112345678'],
    ['+254 712 345 678', '254712345678'],
    ['0712-345-678', '254712345678'],
    ['254708374149', '254708374149'],
    // The contract's format is 254 + 9 digits, on M-Pesa or not (the operator answers the rest).
    ['254212345678', '254212345678'],
    ['+254 20 1234567', '254201234567'],
  ])('%s → %s', (input, expected) => {
    expect(normalisePhone(input)).toBe(expected);
  });

  it.each(['', '07123456', '07123456789', '0812345678', '+255712345678', '25471234567', 'abc', '254712345678x', '+1 202 555 0100', '0212345678'])(
    'rejects %p',
    (input) => {
      expect(normalisePhone(input)).toBeNull();
    },
  );
});

describe('status mapping', () => {
  it('STK ResultCode 0 → completed, anything else → failed (numbers in callbacks, strings in queries)', () => {
    expect(stkResultStatus(0)).toBe('completed');
    expect(stkResultStatus('0')).toBe('completed');
    for (const code of [1, '1', 1032, '1032', 1037, 2001, '17']) expect(stkResultStatus(code)).toBe('failed');
  });

  it('an STK query result that says the prompt is still open (4999, "under processing", "being processed") is pending, not failed', () => {
    expect(stkQueryStatus('4999', 'The transaction is still under processing')).toBe('pending');
    expect(stkQueryStatus('4999', '')).toBe('pending');
    expect(stkQueryStatus('500.001.1001', 'The transaction is being processed')).toBe('pending');
    expect(stkQueryStatus('0', 'The service request is processed successfully.')).toBe('completed');
    expect(stkQueryStatus('1032', 'Request cancelled by user')).toBe('failed');
    expect(stkQueryStatus('1037', 'DS timeout user cannot be reached')).toBe('failed');
  });

  it('reversal 0 and R000001 complete the refund; the other codes fail it', () => {
    expect(reversalResultStatus(0)).toBe('completed');
    expect(reversalResultStatus('R000001')).toBe('completed');
    for (const code of ['R000002', '1', '21', '2001', 11]) expect(reversalResultStatus(code)).toBe('failed');
  });
});

describe('amounts', () => {
  it('sends whole shillings and refuses cents or other currencies', () => {
    expect(wholeShillings({ minor: 16800n, currency: 'KES' })).toBe(168);
    expect(() => wholeShillings({ minor: 16850n, currency: 'KES' })).toThrow(ProviderError);
    expect(() => wholeShillings({ minor: 100n, currency: 'USD' })).toThrow(/KES/);
  });

  it('reads wire amounts as text, never through float arithmetic', () => {
    expect(wireAmountToMinor('168.00')).toBe(16800n);
    expect(wireAmountToMinor('168')).toBe(16800n);
    expect(wireAmountToMinor('0.10')).toBe(10n);
    expect(wireAmountToMinor(1)).toBe(100n);
    expect(wireAmountToMinor(1.5)).toBe(150n);
    expect(wireAmountToMinor('249999.99')).toBe(24999999n);
    expect(wireAmountToMinor('1.234')).toBeNull();
    expect(wireAmountToMinor('-1')).toBeNull();
    expect(wireAmountToMinor('abc')).toBeNull();
  });
});

describe('Kenyan time', () => {
  it('formats and parses EAT (UTC+3) timestamps', () => {
    const instant = new Date('2025-12-31T22:04:05Z');
    expect(darajaTimestamp(instant)).toBe('20260101010405');
    expect(pullDateTime(instant)).toBe('2026-01-01 01:04:05');
    expect(parseDarajaTimestamp('20260101010405')?.toISOString()).toBe('2025-12-31T22:04:05.000Z');
    expect(parsePullDateTime('2026-01-01 01:04:05')?.toISOString()).toBe('2025-12-31T22:04:05.000Z');
    expect(parseDarajaTimestamp('20260231010405')).toBeNull();
    expect(parsePullDateTime('2026-01-01T01:04:05')).toBeNull();
  });

  it('builds the STK password as base64(shortcode + passkey + timestamp)', () => {
    expect(Buffer.from(stkPassword('174379', 'pk', '20260101010405'), 'base64').toString()).toBe('174379pk20260101010405');
  });
});

describe('operator errors', () => {
  const res = (status: number, json: unknown) => ({ status, headers: new Headers(), text: JSON.stringify(json), json });
  const err = (status: number, errorCode: string, errorMessage = 'x') => toProviderError(res(status, { requestId: '1-2-1', errorCode, errorMessage }), 'STK push');

  it.each([
    ['500.003.03', 500, 'rate_limited'],
    ['500.003.02', 500, 'rate_limited'],
    ['400.008.01', 400, 'auth'],
    ['400.008.02', 400, 'auth'],
    ['404.001.03', 404, 'auth'],
    ['400.002.02', 400, 'invalid_request'],
    ['400.003.02', 400, 'invalid_request'],
    ['500.003.1001', 500, 'indeterminate'],
    ['500.001.1001', 500, 'auth'],
    ['999.999.99', 503, 'indeterminate'],
  ] as const)('%s (HTTP %d) → %s', (code, status, kind) => {
    const e = err(status, code);
    expect(e).toBeInstanceOf(ProviderError);
    expect(e.kind).toBe(kind);
    expect(e.providerCode).toBe(code);
    expect(e.message).toContain(code);
  });

  it('names the invalid field and explains the quota', () => {
    expect(err(400, '400.002.02', 'Bad Request - Invalid PhoneNumber').message).toMatch(/Invalid PhoneNumber/);
    expect(err(500, '500.003.03', 'Quota Violation').message).toMatch(/quota violation/);
    expect(toProviderError(res(502, null), 'STK push').kind).toBe('indeterminate');
    expect(err(500, '500.001.1001', 'Unable to lock subscriber, a transaction is already in process for the current subscriber').kind).toBe('unavailable');
  });

  it('500.001.1001 is the STK pages\' "wrong credentials" only on the calls sending the Password; on a reversal or status query (Reversal page: "Internal Server Error") it is indeterminate', () => {
    const internal = { requestId: '1-2-1', errorCode: '500.001.1001', errorMessage: 'Internal Server Error' };
    expect(toProviderError(res(500, internal), 'STK push').kind).toBe('auth');
    expect(toProviderError(res(500, internal), 'STK query').kind).toBe('auth');
    expect(toProviderError(res(500, internal), 'reversal')).toMatchObject({ kind: 'indeterminate', providerCode: '500.001.1001' });
    expect(toProviderError(res(500, internal), 'transaction status query').kind).toBe('indeterminate');
    expect(toProviderError(res(500, { ...internal, errorMessage: 'Wrong credentials' }), 'reversal').kind).toBe('indeterminate');
  });

  it('knows a stale access token (one new token and a retry) by its code, or by its words under a code not listed', () => {
    const stale = (errorCode: string, errorMessage: string) => isInvalidTokenError({ errorCode, errorMessage });
    expect(stale('401.002.01', 'Error Occurred - Invalid Access Token')).toBe(true);
    expect(stale('404.001.03', 'Invalid Access Token')).toBe(true);
    expect(stale('400.003.01', 'Invalid Access Token')).toBe(true);
    expect(stale('401.001', 'Invalid Access Token')).toBe(true);
    expect(stale('401.003.01', 'Error Occurred - Invalid Access Token')).toBe(true);
    expect(stale('404.001.04', 'Invalid Authentication Header')).toBe(false);
    expect(stale('400.002.02', 'Bad Request - Invalid PhoneNumber')).toBe(false);
    expect(err(401, '401.002.01', 'Error Occurred - Invalid Access Token').kind).toBe('auth');
  });
});

describe('parseStkCallback', () => {
  it('reads a success callback with its metadata', () => {
    const parsed = parseStkCallback({
      Body: {
        stkCallback: {
          MerchantRequestID: '29115-34620561-1',
          CheckoutRequestID: 'ws_CO_191220191020363925',
          ResultCode: 0,
          ResultDesc: 'The service request is processed successfully.',
          CallbackMetadata: {
            Item: [
              { Name: 'Amount', Value: 1.0 },
              { Name: 'MpesaReceiptNumber', Value: 'NLJ7RT61SV' },
              { Name: 'Balance' },
              { Name: 'TransactionDate', Value: 20191219102115 },
              { Name: 'PhoneNumber', Value: 254708374149 },
            ],
          },
        },
      },
    });
    expect(parsed).toEqual({
      checkoutRequestId: 'ws_CO_191220191020363925',
      merchantRequestId: '29115-34620561-1',
      resultCode: '0',
      resultDesc: 'The service request is processed successfully.',
      receiptNumber: 'NLJ7RT61SV',
      amountMinor: 100n,
      amount: { minor: 100n, currency: 'KES' },
      phone: '254708374149',
      transactionDate: '20191219102115',
    });
  });

  it('reads a failure without metadata and rejects malformed bodies', () => {
    const parsed = parseStkCallback({ Body: { stkCallback: { MerchantRequestID: 'm', CheckoutRequestID: 'c', ResultCode: 1032, ResultDesc: 'Request cancelled by user' } } });
    expect(parsed).toEqual({ checkoutRequestId: 'c', merchantRequestId: 'm', resultCode: '1032', resultDesc: 'Request cancelled by user' });
    // Not every ResultCode is a number: SFC_IC0003 (the operator does not exist) is a failure like any other.
    const named = parseStkCallback({ Body: { stkCallback: { MerchantRequestID: 'm', CheckoutRequestID: 'c', ResultCode: 'SFC_IC0003', ResultDesc: 'Operator does not exist' } } });
    expect(named.resultCode).toBe('SFC_IC0003');
    expect(stkResultStatus(named.resultCode)).toBe('failed');
    for (const bad of [null, {}, { Body: {} }, { Body: { stkCallback: { CheckoutRequestID: 'c', ResultCode: 'x', ResultDesc: '' } } }, { Body: { stkCallback: { MerchantRequestID: 'm', CheckoutRequestID: 'c', ResultCode: ' ', ResultDesc: '' } } }, 'text']) {
      expect(() => parseStkCallback(bad)).toThrow(MalformedCallbackError);
    }
  });
});

describe('parseResult', () => {
  it('reads transaction-status and reversal results, with ResultCode always a string', () => {
    const ok = parseResult({
      Result: {
        ResultType: 0,
        ResultCode: 0,
        ResultDesc: 'The service request is processed successfully.',
        OriginatorConversationID: '10571-7910404-1',
        ConversationID: 'AG_20191219_00004e48cf7e3533f581',
        TransactionID: 'NLJ41HAY6Q',
        ResultParameters: { ResultParameter: [{ Key: 'Amount', Value: 100 }, { Key: 'OriginalTransactionID', Value: 'NLJ7RT61SV' }, { Key: 'Charge' }] },
        ReferenceData: { ReferenceItem: { Key: 'Occasion', Value: '' } },
      },
    });
    expect(ok).toEqual({
      originatorConversationId: '10571-7910404-1',
      conversationId: 'AG_20191219_00004e48cf7e3533f581',
      transactionId: 'NLJ41HAY6Q',
      resultCode: '0',
      resultDesc: 'The service request is processed successfully.',
      parameters: { Amount: '100', OriginalTransactionID: 'NLJ7RT61SV', Charge: '' },
      amount: { minor: 10000n, currency: 'KES' },
    });
    const single = parseResult({ Result: { ResultCode: 'R000001', ResultDesc: 'already', OriginatorConversationID: 'o', ResultParameters: { ResultParameter: { Key: 'A', Value: 'b' } } } });
    expect(single.resultCode).toBe('R000001');
    expect(single.parameters).toEqual({ A: 'b' });
    expect(() => parseResult({ Result: { ResultCode: 0 } })).toThrow(MalformedCallbackError);
    expect(() => parseResult({ Body: {} })).toThrow(MalformedCallbackError);
  });
});

describe('transaction-status result as a status report', () => {
  const notifications = mobilemoneyNotifications(loadConfig({ NODE_ENV: 'test', SANDBOX: 'true' }));
  /** A real Transaction Status result's shape: Result.TransactionID is the query's own transaction, ReceiptNo the receipt. */
  const statusResult = (withReceiptNo: boolean) => {
    const parameters = [
      { Key: 'DebitPartyName', Value: '254708374149 - John Doe' },
      { Key: 'TransactionStatus', Value: 'Completed' },
      { Key: 'Amount', Value: 100 },
      ...(withReceiptNo ? [{ Key: 'ReceiptNo', Value: 'MBN31H462N' }] : []),
    ];
    const body = {
      Result: {
        ResultType: 0, ResultCode: 0, ResultDesc: 'The service request is processed successfully.',
        OriginatorConversationID: '1236-7134259-1', ConversationID: 'AG_20180223_0000493344ae97d86f75', TransactionID: 'MBN0000000',
        ResultParameters: { ResultParameter: parameters }, ReferenceData: { ReferenceItem: { Key: 'Occasion' } },
      },
    };
    return notifications.parse({ subpath: '/transactionstatus/result', headers: {}, rawBody: Buffer.from(JSON.stringify(body)), body, query: { ref: 'q1' }, sourceIp: '127.0.0.1' });
  };

  it('takes the receipt from ReceiptNo, never from Result.TransactionID', () => {
    expect(statusResult(true)).toMatchObject({ kind: 'status-report', completed: { receipt: 'MBN31H462N', amount: { minor: 10000n, currency: 'KES' } } });
  });

  it('a completed result without ReceiptNo names no receipt (Result.TransactionID MBN0000000 is not recorded)', () => {
    const report = statusResult(false);
    expect(report).toMatchObject({ kind: 'status-report', completed: { receipt: null, amount: { minor: 10000n, currency: 'KES' } } });
    expect(JSON.stringify((report as { completed: unknown }).completed, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toContain('MBN0000000');
  });
});

describe('callback token (sandbox)', () => {
  it('is a hex HMAC of the payment id keyed by the passkey, verified in constant time', () => {
    const token = callbackToken('passkey-1', 'pay-1');
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect(verifyCallbackToken('passkey-1', 'pay-1', token)).toBe(true);
    expect(verifyCallbackToken('passkey-1', 'pay-1', token.toUpperCase())).toBe(true);
    expect(verifyCallbackToken('passkey-2', 'pay-1', token)).toBe(false);
    expect(verifyCallbackToken('passkey-1', 'pay-2', token)).toBe(false);
    expect(verifyCallbackToken('passkey-1', 'pay-1', token.slice(0, 63))).toBe(false);
    expect(verifyCallbackToken('passkey-1', 'pay-1', undefined)).toBe(false);
    expect(verifyCallbackToken('passkey-1', 'pay-1', 'z'.repeat(64))).toBe(false);
  });
});

describe('verifyLiveSignature', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const body = Buffer.from('{"Body":{"stkCallback":{"ResultCode":0}}}');
  const signature = sign('sha256', body, privateKey).toString('base64');

  it('accepts an RSA-SHA256 signature of the exact raw body', () => {
    expect(verifyLiveSignature(body, signature, pem)).toBe(true);
  });

  it('rejects another body, another key, a missing or garbled signature and a bad certificate', () => {
    expect(verifyLiveSignature(Buffer.from(`${body.toString()} `), signature, pem)).toBe(false);
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(verifyLiveSignature(body, signature, other)).toBe(false);
    expect(verifyLiveSignature(body, undefined, pem)).toBe(false);
    expect(verifyLiveSignature(body, '', pem)).toBe(false);
    expect(verifyLiveSignature(body, 'not base64!!', pem)).toBe(false);
    expect(verifyLiveSignature(body, signature, 'not a pem')).toBe(false);
  });
});

describe('isAllowedSource', () => {
  const allowlist = ['196.201.214.200', '196.201.212.0/24', '2001:db8::/32', '::ffff:10.1.0.0/112'];

  it.each([
    ['196.201.214.200', true],
    ['::ffff:196.201.214.200', true],
    ['196.201.214.201', false],
    ['196.201.212.69', true],
    ['::ffff:196.201.212.138', true],
    ['196.201.213.1', false],
    ['2001:db8::1', true],
    ['2001:db9::1', false],
    ['10.1.2.3', true],
    ['8.8.8.8', false],
    ['not-an-ip', false],
    ['', false],
  ] as const)('%s → %s', (ip, allowed) => {
    expect(isAllowedSource(ip, allowlist, false)).toBe(allowed);
  });

  it('allows loopback only while the sandbox is on', () => {
    for (const ip of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '127.0.0.2']) {
      expect(isAllowedSource(ip, allowlist, true)).toBe(true);
      expect(isAllowedSource(ip, allowlist, false)).toBe(false);
      expect(isAllowedSource(ip, ['127.0.0.1'], false)).toBe(false);
    }
  });

  it('ignores malformed allowlist entries', () => {
    expect(isAllowedSource('196.201.214.200', ['nonsense', '1.2.3.4/99', '196.201.214.200'], false)).toBe(true);
    expect(isAllowedSource('1.2.3.4', ['nonsense', '1.2.3.4/99'], false)).toBe(false);
  });
});
