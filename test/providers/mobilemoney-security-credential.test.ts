import { X509Certificate, constants, generateKeyPairSync, publicEncrypt } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MobilemoneyCredentials } from '../../contract/index.js';
import { loadConfig } from '../../server/config/config.js';
import { MobilemoneyAdapter } from '../../server/providers/mobilemoney/adapter.js';
import { parseResult, parseStkCallback } from '../../server/providers/mobilemoney/callback.js';
import { selfSignedCertificate } from '../../server/sandbox/certificates.js';
import { SANDBOX_INITIATOR_PASSWORD, TEST_PHONES } from '../../server/sandbox/mobilemoney/test-values.js';
import { startTestService, type TestService } from '../support/service.js';
import { CallbackReceiver, eventually, paymentInput, sandboxCreds } from './mobilemoney-helpers.js';

/**
 * Daraja's SecurityCredential, as its documentation describes it: the initiator password encrypted with
 * the operator's X.509 certificate (RSA, PKCS#1 v1.5), base64. The simulator holds its own key pair and
 * certificate and refuses any other credential with ResultCode 2001, as the operator does; the adapter
 * encrypts the stored initiator password with the configured certificate.
 */
let t: TestService;
let receiver: CallbackReceiver;
let adapter: MobilemoneyAdapter;
let sim: string;
let certificatePem: string;

beforeAll(async () => {
  t = await startTestService();
  receiver = await new CallbackReceiver().start();
  adapter = new MobilemoneyAdapter(t.service.container.config, t.service.container.orm.em);
  sim = `${t.baseUrl}/sandbox/mobilemoney`;
  certificatePem = await (await fetch(`${sim}/certificates/SandboxCertificate.cer`)).text();
});
afterAll(async () => {
  await receiver.stop();
  await t.stop();
});

/** The documented encryption, written from the documentation rather than taken from the adapter. */
const securityCredential = (certPem: string, password: string) =>
  publicEncrypt({ key: new X509Certificate(certPem).publicKey, padding: constants.RSA_PKCS1_PADDING }, Buffer.from(password)).toString('base64');

async function paidReceipt(creds: MobilemoneyCredentials): Promise<string> {
  const { providerRef } = await adapter.createPayment(creds, paymentInput(TEST_PHONES.success, `${receiver.url}/stk`, 100n));
  const callback = await eventually(() => receiver.at('/stk').find((r) => r.json?.Body?.stkCallback?.CheckoutRequestID === providerRef), 'STK callback');
  return parseStkCallback(callback.json).receiptNumber!;
}

/** POSTs Daraja's documented Transaction Status request and returns the Result sent to its ResultURL. */
async function statusQuery(creds: MobilemoneyCredentials, credential: string, receipt: string, name: string, initiator = 'testapi') {
  const token = await adapter.accessToken(creds);
  const res = await fetch(`${sim}/mpesa/transactionstatus/v1/query`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({
      Initiator: initiator,
      SecurityCredential: credential,
      CommandID: 'TransactionStatusQuery',
      TransactionID: receipt,
      PartyA: creds.shortcode,
      IdentifierType: '4',
      ResultURL: `${receiver.url}/${name}/result`,
      QueueTimeOutURL: `${receiver.url}/${name}/timeout`,
      Remarks: 'fidelity',
      Occasion: '',
    }),
  });
  expect(res.status).toBe(200);
  const ack = (await res.json()) as { OriginatorConversationID: string; ResponseCode: string };
  expect(ack.ResponseCode).toBe('0');
  const posted = await eventually(() => receiver.at(`/${name}/result`).find((r) => r.json?.Result?.OriginatorConversationID === ack.OriginatorConversationID), 'result');
  return parseResult(posted.json);
}

describe('the simulator checks the SecurityCredential', () => {
  it('serves its certificate as X.509 (the portal download)', () => {
    const cert = new X509Certificate(certificatePem);
    expect(cert.publicKey.asymmetricKeyType).toBe('rsa');
    expect(Date.parse(cert.validTo)).toBeGreaterThan(Date.now());
  });

  it('accepts the initiator password encrypted with its certificate; refuses a wrong password, another certificate and a placeholder with 2001', async () => {
    const creds = sandboxCreds();
    const receipt = await paidReceipt(creds);
    expect((await statusQuery(creds, securityCredential(certificatePem, SANDBOX_INITIATOR_PASSWORD), receipt, 'good')).resultCode).toBe('0');

    const wrongPassword = await statusQuery(creds, securityCredential(certificatePem, 'not-the-password'), receipt, 'wrong');
    expect(wrongPassword).toMatchObject({ resultCode: '2001', resultDesc: 'The initiator information is invalid.' });

    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const otherCert = selfSignedCertificate(privateKey, 'other.example', 'Other');
    expect((await statusQuery(creds, securityCredential(otherCert, SANDBOX_INITIATOR_PASSWORD), receipt, 'other')).resultCode).toBe('2001');
    expect((await statusQuery(creds, 'sandbox-security-credential', receipt, 'placeholder')).resultCode).toBe('2001');
  });
});

describe('the simulator checks the Initiator name (the sandbox API user testapi)', () => {
  it('a reversal by any other initiator, with the right password, is refused with 2001 and reverses nothing', async () => {
    const creds = sandboxCreds({ initiator: 'not-an-operator', initiator_password: SANDBOX_INITIATOR_PASSWORD });
    const receipt = await paidReceipt(creds);
    const ack = await adapter.reverse(creds, { transactionId: receipt, amountMinor: 10000n, remarks: 'refund', resultUrl: `${receiver.url}/rev-name/result`, timeoutUrl: `${receiver.url}/rev-name/timeout` });
    const posted = await eventually(() => receiver.at('/rev-name/result').find((r) => r.json?.Result?.OriginatorConversationID === ack.OriginatorConversationID), 'reversal result');
    expect(parseResult(posted.json)).toMatchObject({ resultCode: '2001', resultDesc: 'The initiator information is invalid.' });

    // The receipt is still there to reverse, by the sandbox's API user.
    const right = await adapter.reverse({ ...creds, initiator: 'testapi' }, { transactionId: receipt, amountMinor: 10000n, remarks: 'refund', resultUrl: `${receiver.url}/rev-name/result`, timeoutUrl: `${receiver.url}/rev-name/timeout` });
    const done = await eventually(() => receiver.at('/rev-name/result').find((r) => r.json?.Result?.OriginatorConversationID === right.OriginatorConversationID), 'reversal result');
    expect(parseResult(done.json).resultCode).toBe('0');
  });

  it('a transaction-status query by any other initiator, with the right credential, is refused with 2001', async () => {
    const creds = sandboxCreds();
    const receipt = await paidReceipt(creds);
    const credential = securityCredential(certificatePem, SANDBOX_INITIATOR_PASSWORD);
    expect(await statusQuery(creds, credential, receipt, 'nobody', 'nobody')).toMatchObject({ resultCode: '2001', resultDesc: 'The initiator information is invalid.' });
    // A name differing only in case is another name (Daraja's usernames are case sensitive).
    expect((await statusQuery(creds, credential, receipt, 'upper', 'TESTAPI')).resultCode).toBe('2001');
  });
});

describe('the adapter encrypts the stored initiator password', () => {
  it("with the built-in simulator's certificate by default, and with a configured certificate file (MOBILEMONEY_SANDBOX_CERT_PATH)", async () => {
    const creds = sandboxCreds({ initiator: 'testapi', initiator_password: SANDBOX_INITIATOR_PASSWORD });
    const receipt = await paidReceipt(creds);
    const ack = await adapter.reverse(creds, { transactionId: receipt, amountMinor: 10000n, remarks: 'refund', resultUrl: `${receiver.url}/rev/result`, timeoutUrl: `${receiver.url}/rev/timeout` });
    const posted = await eventually(() => receiver.at('/rev/result').find((r) => r.json?.Result?.OriginatorConversationID === ack.OriginatorConversationID), 'reversal result');
    expect(parseResult(posted.json).resultCode).toBe('0');

    const dir = await mkdtemp(path.join(os.tmpdir(), 'mm-cert-'));
    const certPath = path.join(dir, 'SandboxCertificate.cer');
    await writeFile(certPath, certificatePem);
    const configured = new MobilemoneyAdapter({ ...t.service.container.config, mobilemoneySecurityCertPaths: { sandbox: certPath } }, t.service.container.orm.em);
    const second = await paidReceipt(creds);
    const statusAck = await configured.transactionStatus(creds, { transactionId: second, resultUrl: `${receiver.url}/cfg/result`, timeoutUrl: `${receiver.url}/cfg/timeout` });
    const result = await eventually(() => receiver.at('/cfg/result').find((r) => r.json?.Result?.OriginatorConversationID === statusAck.OriginatorConversationID), 'status');
    expect(parseResult(result.json).resultCode).toBe('0');
  });

  it('a wrong stored password is refused by the simulator (2001), not hidden', async () => {
    const creds = sandboxCreds({ initiator: 'testapi', initiator_password: 'Expired-Password-1' });
    const receipt = await paidReceipt(creds);
    const ack = await adapter.transactionStatus(creds, { transactionId: receipt, resultUrl: `${receiver.url}/bad/result`, timeoutUrl: `${receiver.url}/bad/timeout` });
    const result = await eventually(() => receiver.at('/bad/result').find((r) => r.json?.Result?.OriginatorConversationID === ack.OriginatorConversationID), 'status');
    expect(parseResult(result.json).resultCode).toBe('2001');
  });

  it('live needs a configured production certificate and says which setting is missing', async () => {
    const live = new MobilemoneyAdapter(loadConfig({ NODE_ENV: 'test', SANDBOX: 'false', MOBILEMONEY_BASE_URL: sim }), t.service.container.orm.em);
    const creds = sandboxCreds({ env: 'live', initiator: 'apiop', initiator_password: 'secret' });
    const err = await live.transactionStatus(creds, { transactionId: 'X1', resultUrl: `${receiver.url}/l`, timeoutUrl: `${receiver.url}/l` }).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'invalid_request', message: expect.stringContaining('MOBILEMONEY_LIVE_CERT_PATH') });
  });
});
