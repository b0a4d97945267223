import { createPublicKey, sign, verify } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { newKeyAndCertificate, parsedCertificate, selfSignedCertificate } from '../certificates.js';
import type { Db } from './db.js';
import { paypalId } from './db.js';

export interface SigningKeys {
  certId: string;
  privateKeyPem: string;
  publicKeyPem: string;
  /** The X.509 certificate served at the certificate URL, as PayPal serves its own. */
  certificatePem: string;
}

/** PayPal's sandbox signs with a certificate of this common name (its live one: messageverificationcerts.paypal.com). */
const CERT_SUBJECT = ['messageverificationcerts.sandbox.paypal.com', 'walletpay simulator'] as const;

type KeyRow = { cert_id: string; private_key_pem: string; public_key_pem: string; certificate_pem: string | null };

/**
 * The simulator's RSA key pair and self-signed certificate: made once and kept in PostgreSQL, so every
 * process signs with the same key and the certificate URL serves the matching certificate. Two
 * processes racing to create it both end up with the row that won.
 */
export async function signingKeys(db: Db): Promise<SigningKeys> {
  const load = () => db.query<KeyRow>('SELECT cert_id, private_key_pem, public_key_pem, certificate_pem FROM sandbox_walletpay_keys WHERE id = 1');
  let [row] = await load();
  if (!row) {
    const made = await newKeyAndCertificate(...CERT_SUBJECT);
    const publicKey = createPublicKey(made.privateKeyPem).export({ type: 'spki', format: 'pem' }).toString();
    await db.query(
      'INSERT INTO sandbox_walletpay_keys (id, cert_id, private_key_pem, public_key_pem, certificate_pem) VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
      [`CERT-${paypalId(12)}`, made.privateKeyPem, publicKey, made.certificatePem],
    );
    [row] = await load();
  } else if (!row.certificate_pem) {
    // A key pair made before certificates were served: certify it once.
    await recertify(db, row.private_key_pem, null);
    [row] = await load();
  }
  return { certId: row!.cert_id, privateKeyPem: row!.private_key_pem, publicKeyPem: row!.public_key_pem, certificatePem: row!.certificate_pem! };
}

/**
 * At boot (SandboxModule.prepare): the signing keys, with a certificate that OpenSSL refuses (see
 * positiveSerial) or that was made under the simulator's earlier name (messageverificationcerts.walletpay.sandbox)
 * certified again, for the same key, under PayPal's sandbox name. Checked once per boot, not on every signature.
 */
export async function prepareSigningKeys(db: Db): Promise<void> {
  const keys = await signingKeys(db);
  const certificate = parsedCertificate(keys.certificatePem);
  if (!certificate?.subject.includes(`CN=${CERT_SUBJECT[0]}`)) await recertify(db, keys.privateKeyPem, keys.certificatePem);
}

/** Certifies the stored key under CERT_SUBJECT, unless another process changed its certificate (`current`) first. */
async function recertify(db: Db, privateKeyPem: string, current: string | null): Promise<void> {
  await db.query('UPDATE sandbox_walletpay_keys SET certificate_pem = ? WHERE id = 1 AND certificate_pem IS NOT DISTINCT FROM ?', [
    selfSignedCertificate(privateKeyPem, ...CERT_SUBJECT),
    current,
  ]);
}

/** Where the certificate of `certId` is served. */
export const certUrl = (base: string, certId: string) => `${base}/v1/notifications/certs/${certId}`;

/**
 * What PayPal signs (its "Verify webhook signatures" guide): `transmissionId|timeStamp|webhookId|crc32`,
 * the CRC-32 of the raw body as an unsigned decimal. Written here apart from the adapter's, with Node's own
 * CRC-32, so an adapter that builds the string wrongly fails against the simulator as against PayPal.
 */
export const signedMessage = (transmissionId: string, timeStamp: string, webhookId: string, rawBody: Buffer | string) =>
  `${transmissionId}|${timeStamp}|${webhookId}|${crc32(rawBody)}`;

/** Base64 RSA-SHA256 signature (SHA256withRSA). */
export function signTransmission(keys: SigningKeys, message: string): string {
  return sign('sha256', Buffer.from(message, 'utf8'), keys.privateKeyPem).toString('base64');
}

export function verifyTransmission(keys: SigningKeys, message: string, signatureBase64: string): boolean {
  try {
    return verify('sha256', Buffer.from(message, 'utf8'), keys.publicKeyPem, Buffer.from(signatureBase64, 'base64'));
  } catch {
    return false;
  }
}
