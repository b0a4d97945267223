import { generateKeyPair, sign, verify } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { Db } from './db.js';
import { paypalId } from './db.js';

export interface SigningKeys {
  certId: string;
  privateKeyPem: string;
  publicKeyPem: string;
}

const generate = promisify(generateKeyPair);

/**
 * The simulator's RSA key pair: generated once and kept in PostgreSQL, so every process signs with
 * the same key and the certificate URL serves the matching public key. Two processes racing to
 * create it both end up with the row that won.
 */
export async function signingKeys(db: Db): Promise<SigningKeys> {
  const load = () => db.query<{ cert_id: string; private_key_pem: string; public_key_pem: string }>('SELECT cert_id, private_key_pem, public_key_pem FROM sandbox_walletpay_keys WHERE id = 1');
  let [row] = await load();
  if (!row) {
    const { privateKey, publicKey } = await generate('rsa', {
      modulusLength: 2048,
      publicKeyEncoding: { type: 'spki', format: 'pem' },
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    });
    await db.query(
      'INSERT INTO sandbox_walletpay_keys (id, cert_id, private_key_pem, public_key_pem) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
      [`CERT-${paypalId(12)}`, privateKey, publicKey],
    );
    [row] = await load();
  }
  return { certId: row!.cert_id, privateKeyPem: row!.private_key_pem, publicKeyPem: row!.public_key_pem };
}

/** Where the certificate (here: the PEM public key) of `certId` is served. */
export const certUrl = (base: string, certId: string) => `${base}/v1/notifications/certs/${certId}`;

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

/** Unsigned CRC-32 (IEEE) of the bytes: zlib's when the runtime has it (Node ≥ 20.15), else a table. */
export function crc32(data: Buffer | string): number {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  if (typeof zlib.crc32 === 'function') return zlib.crc32(bytes) >>> 0;
  let crc = 0xffffffff;
  for (const b of bytes) crc = CRC_TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** PayPal's signed string: `transmissionId|transmissionTime|webhookId|crc32(rawBody)` (decimal). */
export const signedMessage = (transmissionId: string, transmissionTime: string, webhookId: string, rawBody: Buffer | string) =>
  `${transmissionId}|${transmissionTime}|${webhookId}|${crc32(rawBody)}`;

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
