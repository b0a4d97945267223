import { createPrivateKey, createPublicKey, generateKeyPair, randomBytes } from 'node:crypto';
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
 * A self-signed X.509 certificate for `privateKeyPem`'s RSA key, as a provider publishes its signing or
 * encryption certificate. node:crypto can read and verify certificates but not issue them, hence
 * node-forge (pure JavaScript, no dependencies) for the encoding and the signature.
 */
export function selfSignedCertificate(privateKeyPem: string, commonName: string, organization: string): string {
  // forge reads PKCS#1 ("RSA PRIVATE KEY"); node:crypto converts whatever it was given.
  const pkcs1 = createPrivateKey(privateKeyPem).export({ type: 'pkcs1', format: 'pem' }).toString();
  const privateKey = forge.pki.privateKeyFromPem(pkcs1);
  const publicKey = forge.pki.publicKeyFromPem(createPublicKey(privateKeyPem).export({ type: 'spki', format: 'pem' }).toString());
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  // A positive serial: the top bit clear.
  cert.serialNumber = `0${randomBytes(15).toString('hex')}`;
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
  cert.sign(privateKey, forge.md.sha256.create());
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
