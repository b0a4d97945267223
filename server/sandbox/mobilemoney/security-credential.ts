import { createPrivateKey } from 'node:crypto';
import type { Router } from 'express';
import forge from 'node-forge';
import type { SandboxDeps } from '../module.js';
import { newKeyAndCertificate, parsedCertificate, selfSignedCertificate } from '../certificates.js';
import { dbOf } from '../db.js';
import { INITIATOR_WITHOUT_ROLE, SANDBOX_INITIATOR, SANDBOX_INITIATOR_PASSWORD } from './test-values.js';

/** The name on the operator's certificate. */
const CERT_SUBJECT = ['apicrypt.mobilemoney.sandbox', 'mobilemoney simulator'] as const;

interface OperatorKeys {
  privateKeyPem: string;
  certificatePem: string;
}

/**
 * The simulator's operator key pair and X.509 certificate (Daraja's SandboxCertificate.cer): made once
 * and kept in PostgreSQL so every process decrypts with the same key. Racing processes keep the winner.
 */
export async function operatorKeys(deps: Pick<SandboxDeps, 'em'>): Promise<OperatorKeys> {
  const db = dbOf(deps.em);
  const load = () => db.query<{ private_key_pem: string; certificate_pem: string }>('SELECT private_key_pem, certificate_pem FROM sandbox_mobilemoney_keys WHERE id = 1');
  let [row] = await load();
  if (!row) {
    const made = await newKeyAndCertificate(...CERT_SUBJECT);
    await db.query('INSERT INTO sandbox_mobilemoney_keys (id, private_key_pem, certificate_pem) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING', [
      made.privateKeyPem,
      made.certificatePem,
    ]);
    [row] = await load();
  }
  return { privateKeyPem: row!.private_key_pem, certificatePem: row!.certificate_pem };
}

/**
 * At boot (SandboxModule.prepare): the operator keys, with a stored certificate that OpenSSL refuses (one
 * issued before `positiveSerial`) issued again for the same key, unless another process did first.
 */
export async function prepareOperatorKeys(deps: Pick<SandboxDeps, 'em'>): Promise<void> {
  const keys = await operatorKeys(deps);
  if (parsedCertificate(keys.certificatePem)) return;
  await dbOf(deps.em).query('UPDATE sandbox_mobilemoney_keys SET certificate_pem = ? WHERE id = 1 AND certificate_pem = ?', [
    selfSignedCertificate(keys.privateKeyPem, ...CERT_SUBJECT),
    keys.certificatePem,
  ]);
}

/** The sandbox's API users: the published one, and the one without the reversal role (test-values.ts). */
const SANDBOX_API_USERS = new Set([SANDBOX_INITIATOR, INITIATOR_WITHOUT_ROLE]);

/**
 * Daraja's check of the initiator pair ("2001 | The initiator information is invalid | API user
 * credentials are invalid"): the Initiator must be one of the sandbox's API users (by exact name: the
 * operator's usernames are case sensitive), and the SecurityCredential the base64 of its password
 * RSA-encrypted (PKCS#1 v1.5) with the operator's certificate. Anything else is refused with 2001.
 */
export async function initiatorIsValid(deps: SandboxDeps, initiator: string, securityCredential: string): Promise<boolean> {
  if (!SANDBOX_API_USERS.has(initiator)) return false;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(securityCredential)) return false;
  const { privateKeyPem } = await operatorKeys(deps);
  // node:crypto no longer decrypts PKCS#1 v1.5 (CVE-2023-46809, a timing oracle that matters to a real
  // operator, not to a simulator); node-forge still does.
  const key = forge.pki.privateKeyFromPem(createPrivateKey(privateKeyPem).export({ type: 'pkcs1', format: 'pem' }).toString());
  try {
    const password = key.decrypt(Buffer.from(securityCredential, 'base64').toString('binary'), 'RSAES-PKCS1-V1_5');
    return Buffer.from(password, 'binary').toString('utf8') === SANDBOX_INITIATOR_PASSWORD;
  } catch {
    return false;
  }
}

/**
 * `GET /certificates/SandboxCertificate.cer`: the certificate to encrypt initiator passwords with, as
 * the operator's portal offers it for download (PEM). Public: it is a certificate.
 */
export function mountCertificate(router: Router, deps: SandboxDeps): void {
  router.get('/certificates/SandboxCertificate.cer', (_req, res, next) => {
    operatorKeys(deps)
      .then((keys) => res.type('application/x-x509-ca-cert').send(keys.certificatePem))
      .catch(next);
  });
}
