import { X509Certificate, createPublicKey, generateKeyPair, randomBytes, sign } from 'node:crypto';
import { promisify } from 'node:util';
import forge from 'node-forge';

const generate = promisify(generateKeyPair);

/** How long a simulator's self-signed certificate is valid. */
const VALIDITY_YEARS = 10;

export interface KeyAndCertificate {
  privateKeyPem: string;
  certificatePem: string;
}

/**
 * 16 random bytes as a DER-valid positive serial (hex): the first byte 0x01–0x7f, so it needs no 0x00 sign
 * byte and has none. The former `0` + 30 hex digits made forge write a 0x00 before a byte under 0x80
 * whenever the first random byte was 0x00 (1 certificate in ~500), which OpenSSL refuses ("asn1 encoding
 * routines::illegal padding"): the intermittent "not an X.509 certificate" of the simulators' downloads.
 */
export function positiveSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f || 0x01;
  return bytes.toString('hex');
}

/**
 * A self-signed X.509 certificate for `privateKeyPem`'s RSA key, as a provider publishes its signing or
 * encryption certificate. node:crypto can read and verify certificates but not issue them, hence
 * node-forge (pure JavaScript, no dependencies) for the ASN.1 encoding; the signature itself is
 * node:crypto's (native, milliseconds instead of forge's pure-JS RSA).
 */
export function selfSignedCertificate(privateKeyPem: string, commonName: string, organization: string): string {
  const publicKey = forge.pki.publicKeyFromPem(createPublicKey(privateKeyPem).export({ type: 'spki', format: 'pem' }).toString());
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = positiveSerial();
  const now = new Date();
  cert.validity.notBefore = new Date(now.getTime() - 60_000);
  cert.validity.notAfter = new Date(now.getTime());
  cert.validity.notAfter.setUTCFullYear(now.getUTCFullYear() + VALIDITY_YEARS);
  const name = [
    { name: 'commonName', value: commonName },
    { name: 'organizationName', value: organization },
  ];
  cert.setSubject(name);
  cert.setIssuer(name);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
  ]);
  cert.signatureOid = forge.pki.oids.sha256WithRSAEncryption!;
  cert.siginfo.algorithmOid = forge.pki.oids.sha256WithRSAEncryption!;
  // Not in @types/node-forge, but exported by forge (x509.js) and used by its own cert.sign.
  const tbs = (forge.pki as unknown as { getTBSCertificate(c: forge.pki.Certificate): forge.asn1.Asn1 }).getTBSCertificate(cert);
  cert.tbsCertificate = tbs;
  cert.signature = sign('sha256', Buffer.from(forge.asn1.toDer(tbs).getBytes(), 'binary'), privateKeyPem).toString('binary');
  return forge.pki.certificateToPem(cert);
}

/** A new 2048-bit RSA key pair (PKCS#8 PEM) with its self-signed certificate. */
export async function newKeyAndCertificate(commonName: string, organization: string): Promise<KeyAndCertificate> {
  const { privateKey } = await generate('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKeyPem: privateKey, certificatePem: selfSignedCertificate(privateKey, commonName, organization) };
}

/** The certificate `pem` holds, or null when OpenSSL refuses it (one issued before `positiveSerial` may be). */
export function parsedCertificate(pem: string): X509Certificate | null {
  try {
    return new X509Certificate(pem);
  } catch {
    return null;
  }
}
