import { X509Certificate, constants, publicEncrypt } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { httpRequest } from '../http-client.js';
import { ProviderError } from '../../domain/ports.js';

/**
 * Daraja's SecurityCredential: the initiator password encrypted with the public key of the operator's
 * X.509 certificate, RSA PKCS#1 v1.5, base64 (developer.safaricom.co.ke, "Getting started": security
 * credentials; the sandbox and production certificates differ).
 */
export function encryptInitiatorPassword(certificate: X509Certificate, password: string): string {
  return publicEncrypt({ key: certificate.publicKey, padding: constants.RSA_PKCS1_PADDING }, Buffer.from(password, 'utf8')).toString('base64');
}

/** Where an environment's operator certificate comes from: a configured file, or the built-in simulator's download. */
export type CertificateSource = { kind: 'file'; path: string } | { kind: 'simulator'; url: string };

/** Certificates read so far, by source (a certificate file changes only with a restart; so does the simulator's key). */
const cache = new Map<string, Promise<X509Certificate>>();

/** `what` describes a download that did not parse (a certificate is public: its first characters may be shown). */
function parse(bytes: Buffer, where: string, what = ''): X509Certificate {
  try {
    return new X509Certificate(bytes);
  } catch {
    throw new ProviderError('mobilemoney', 'invalid_request', `the mobilemoney operator certificate at ${where} is not an X.509 certificate (PEM or DER)${what}`);
  }
}

async function load(source: CertificateSource, timeoutMs: number): Promise<X509Certificate> {
  if (source.kind === 'file') {
    const bytes = await readFile(source.path).catch(() => {
      throw new ProviderError('mobilemoney', 'invalid_request', `the mobilemoney operator certificate file ${source.path} cannot be read`);
    });
    return parse(bytes, source.path);
  }
  const res = await httpRequest('mobilemoney', source.url, { method: 'GET', timeoutMs });
  if (res.status !== 200) throw new ProviderError('mobilemoney', 'unavailable', `the mobilemoney simulator certificate answered HTTP ${res.status}`);
  const received = `: received ${res.text.length} characters of ${res.headers.get('content-type') ?? 'no content type'}, starting ${JSON.stringify(res.text.slice(0, 40))}`;
  return parse(Buffer.from(res.text, 'utf8'), source.url, received);
}

/** The certificate, read once per process per source; a failed read is not kept (the next call tries again). */
export function operatorCertificate(source: CertificateSource, timeoutMs: number): Promise<X509Certificate> {
  const key = `${source.kind}:${source.kind === 'file' ? source.path : source.url}`;
  let pending = cache.get(key);
  if (!pending) {
    pending = load(source, timeoutMs);
    cache.set(key, pending);
    pending.catch(() => cache.delete(key));
  }
  return pending;
}
