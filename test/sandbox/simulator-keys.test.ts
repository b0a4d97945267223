import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { positiveSerial, selfSignedCertificate } from '../../server/sandbox/certificates.js';
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

/**
 * `pem` with its serial number made a DER INTEGER OpenSSL refuses: a 0x00 before a byte under 0x80, as
 * 1 certificate in ~500 had before positiveSerial (the signature no longer matches; parsing fails first).
 */
function withIllegalSerialPadding(pem: string): string {
  const der = Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
  // TBSCertificate: version [0] (a0 03 02 01 02), then the serial INTEGER (02 10 + 16 bytes).
  const at = der.indexOf(Buffer.from([0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x10])) + 7;
  der[at] = 0x00;
  der[at + 1] = 0x16;
  return `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----\n`;
}
const storedCertificates = async (): Promise<Keys> => {
  const [walletpay] = await t.sql<{ pem: string }>('SELECT certificate_pem AS pem FROM sandbox_walletpay_keys');
  const [mobilemoney] = await t.sql<{ pem: string }>('SELECT certificate_pem AS pem FROM sandbox_mobilemoney_keys');
  return { walletpay: walletpay?.pem ?? '', mobilemoney: mobilemoney?.pem ?? '' };
};

beforeAll(async () => {
  // A database without keys (the template every test database copies has them made once): this boot makes them.
  t = await startTestService({}, { withoutSimulatorKeys: true });
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

  it('certificates carry a serial OpenSSL reads: 16 bytes, positive, no padding byte', () => {
    for (let i = 0; i < 5000; i += 1) {
      const serial = positiveSerial();
      expect(serial).toMatch(/^[0-9a-f]{32}$/);
      const first = parseInt(serial.slice(0, 2), 16);
      expect(first >= 0x01 && first <= 0x7f).toBe(true);
    }
  });

  it('a stored certificate OpenSSL refuses is issued again for the same key when a process boots', async () => {
    const before = await storedCertificates();
    const refused = { walletpay: withIllegalSerialPadding(before.walletpay), mobilemoney: withIllegalSerialPadding(before.mobilemoney) };
    for (const pem of Object.values(refused)) expect(() => new X509Certificate(pem)).toThrow(/illegal padding/);
    await t.sql('UPDATE sandbox_walletpay_keys SET certificate_pem = $1', [refused.walletpay]);
    await t.sql('UPDATE sandbox_mobilemoney_keys SET certificate_pem = $1', [refused.mobilemoney]);

    const api = await startProcess('api', baseEnv(t.databaseUrl, t.baseUrl));
    const [{ cert_id: certId }] = (await t.sql<{ cert_id: string }>('SELECT cert_id FROM sandbox_walletpay_keys')) as [{ cert_id: string }];
    const walletpay = new X509Certificate(await fetch(`${api.url}/sandbox/walletpay/v1/notifications/certs/${certId}`).then((r) => r.text()));
    const mobilemoney = new X509Certificate(await fetch(`${api.url}/sandbox/mobilemoney/certificates/SandboxCertificate.cer`).then((r) => r.text()));
    expect(walletpay.publicKey.equals(new X509Certificate(before.walletpay).publicKey)).toBe(true);
    expect(mobilemoney.publicKey.equals(new X509Certificate(before.mobilemoney).publicKey)).toBe(true);
  });

  it('are kept by another process booting on the same database', async () => {
    const before = await storedCertificates();
    const api = await startProcess('api', baseEnv(t.databaseUrl, t.baseUrl));
    const served = await fetch(`${api.url}/sandbox/mobilemoney/certificates/SandboxCertificate.cer`).then((r) => r.text());
    expect(served).toBe(before.mobilemoney);
    expect(await storedCertificates()).toEqual(before);
  });
});
