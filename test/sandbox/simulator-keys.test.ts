import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { selfSignedCertificate } from '../../server/sandbox/certificates.js';
import { baseEnv, startProcess, stopAllProcesses } from '../support/processes.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * A provider has its certificates before anyone downloads them. The simulators make their key pairs when
 * the service boots, not on a merchant's first request (a 2048-bit key can take seconds on a busy host,
 * longer than an adapter waits), and a later boot keeps them: a certificate an adapter already holds
 * stays the one the simulator signs and decrypts with.
 */
let t: TestService;
type Keys = { walletpay: string; mobilemoney: string };
const storedCertificates = async (): Promise<Keys> => {
  const [walletpay] = await t.sql<{ pem: string }>('SELECT certificate_pem AS pem FROM sandbox_walletpay_keys');
  const [mobilemoney] = await t.sql<{ pem: string }>('SELECT certificate_pem AS pem FROM sandbox_mobilemoney_keys');
  return { walletpay: walletpay?.pem ?? '', mobilemoney: mobilemoney?.pem ?? '' };
};

beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => {
  await stopAllProcesses();
  await t.stop();
});

describe('simulator keys', () => {
  it('exist as soon as the service is up, before any request, and are what the certificate URLs serve', async () => {
    const stored = await storedCertificates();
    for (const pem of Object.values(stored)) expect(new X509Certificate(pem).publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);

    const [{ cert_id: certId }] = (await t.sql<{ cert_id: string }>('SELECT cert_id FROM sandbox_walletpay_keys')) as [{ cert_id: string }];
    const walletpay = await t.http.get(`/sandbox/walletpay/v1/notifications/certs/${certId}`);
    expect(walletpay.status).toBe(200);
    expect(walletpay.text).toBe(stored.walletpay);
    const mobilemoney = await t.http.get('/sandbox/mobilemoney/certificates/SandboxCertificate.cer');
    expect(mobilemoney.status).toBe(200);
    expect(mobilemoney.text).toBe(stored.mobilemoney);
  });

  it("walletpay's certificate is re-issued for the same key under PayPal's sandbox name when stored under the simulator's earlier one", async () => {
    const [{ private_key_pem: key, certificate_pem: current }] = (await t.sql<{ private_key_pem: string; certificate_pem: string }>(
      'SELECT private_key_pem, certificate_pem FROM sandbox_walletpay_keys',
    )) as [{ private_key_pem: string; certificate_pem: string }];
    await t.sql('UPDATE sandbox_walletpay_keys SET certificate_pem = $1', [selfSignedCertificate(key, 'messageverificationcerts.walletpay.sandbox', 'walletpay simulator')]);
    const api = await startProcess('api', baseEnv(t.databaseUrl, t.baseUrl));
    const [{ cert_id: certId }] = (await t.sql<{ cert_id: string }>('SELECT cert_id FROM sandbox_walletpay_keys')) as [{ cert_id: string }];
    const served = new X509Certificate(await fetch(`${api.url}/sandbox/walletpay/v1/notifications/certs/${certId}`).then((r) => r.text()));
    expect(served.subject).toContain('CN=messageverificationcerts.sandbox.paypal.com');
    expect(served.publicKey.equals(new X509Certificate(current).publicKey)).toBe(true);
  });

  it('are kept by another process booting on the same database', async () => {
    const before = await storedCertificates();
    const api = await startProcess('api', baseEnv(t.databaseUrl, t.baseUrl));
    const served = await fetch(`${api.url}/sandbox/mobilemoney/certificates/SandboxCertificate.cer`).then((r) => r.text());
    expect(served).toBe(before.mobilemoney);
    expect(await storedCertificates()).toEqual(before);
  });
});
