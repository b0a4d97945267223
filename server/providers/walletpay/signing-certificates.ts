import { X509Certificate, verify } from 'node:crypto';
import { walletpaySignedMessage } from './signed-message.js';
import { setBounded } from '../../lib/bounded-map.js';
import { httpRequest } from '../http-client.js';

/** How long a downloaded certificate is trusted before it is fetched again (never past its own expiry). */
const CACHE_TTL_MS = 24 * 60 * 60 * 1000;
const MAX_CACHED = 100;

/** The provider's own domain (a base URL on it is the real provider). */
const PROVIDER_DOMAIN = 'paypal.com';
/**
 * The hosts PayPal names its signing certificates on, live and sandbox (an event's cert_url is e.g.
 * https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-…), and their one path: any other
 * page of paypal.com (a search page echoing its query, a support article) is not a certificate.
 */
const CERT_HOSTS = new Set(['api.paypal.com', 'api-m.paypal.com', 'api.sandbox.paypal.com', 'api-m.sandbox.paypal.com']);
const CERT_PATH = /^\/v1\/notifications\/certs\/[A-Za-z0-9._-]+$/;
/**
 * A certificate body: PEM certificates and nothing else (whitespace around them). PayPal's certificate URL
 * answers the signing certificate followed by its issuers — its SDKs read a collection and check the chain —
 * so one or more; the first, the signing certificate, is the one read.
 */
const PEM_CERTIFICATES_ONLY = /^\s*(?:-----BEGIN CERTIFICATE-----\r?\n(?:[A-Za-z0-9+/=]+\r?\n)+-----END CERTIFICATE-----\s*)+$/;

/**
 * PayPal's own rule for its message-signing certificates (its Java SDK's certificate check): a subject
 * common name `messageverificationcerts…paypal.com` (`messageverificationcerts.paypal.com` live,
 * `messageverificationcerts.sandbox.paypal.com` in the sandbox). Any other certificate, even one served
 * from the provider's host, verifies nothing.
 */
export function isSigningCertificate(cert: X509Certificate): boolean {
  return cert.subject.split('\n').some((rdn) => /^CN=messageverificationcerts(\.[a-z0-9-]+)*\.paypal\.com$/i.test(rdn));
}

export type OfflineVerdict = 'verified' | 'invalid' | 'unverifiable';

export interface Transmission {
  transmissionId: string;
  transmissionTime: string;
  transmissionSig: string;
  certUrl: string;
  authAlgo: string;
  webhookId: string;
  rawBody: Buffer;
}

/** paypal.com or a subdomain of it. */
function onPaypalDomain(url: URL): boolean {
  const host = url.hostname.toLowerCase();
  return host === PROVIDER_DOMAIN || host.endsWith(`.${PROVIDER_DOMAIN}`);
}

/** Whether the adapter calls the real provider (paypal.com or a subdomain), not the simulator or an override. */
function isRealProvider(providerBaseUrl: string): boolean {
  return URL.canParse(providerBaseUrl) && onPaypalDomain(new URL(providerBaseUrl));
}

/** https, default port, one of PayPal's API hosts, its certificates path, no query: where PayPal names its certificates. */
function isPaypalCertUrl(url: URL): boolean {
  return url.protocol === 'https:' && url.port === '' && CERT_HOSTS.has(url.hostname.toLowerCase()) && CERT_PATH.test(url.pathname) && !url.search && !url.hash;
}

/**
 * Whether `certUrl` is on the provider's own host: https on PayPal's API hosts (api[-m][.sandbox].paypal.com)
 * under /v1/notifications/certs/, whatever the base URL (PayPal's events name its certificates there also when the adapter reaches PayPal through
 * an egress proxy); for a base URL that is not PayPal (the built-in simulator, an override), also the
 * same origin and the certificates path under that base. A certificate anywhere else could be the
 * forger's own: it is never downloaded.
 */
export function isProviderCertUrl(certUrl: string, providerBaseUrl: string): boolean {
  let cert: URL;
  let base: URL;
  try {
    cert = new URL(certUrl);
    base = new URL(providerBaseUrl);
  } catch {
    return false;
  }
  if (cert.username || cert.password) return false;
  if (isPaypalCertUrl(cert)) return true;
  if (isRealProvider(providerBaseUrl)) return false;
  const basePath = base.pathname.replace(/\/+$/, '');
  return cert.origin === base.origin && cert.pathname.startsWith(`${basePath}/v1/notifications/certs/`);
}

/**
 * The provider's signing certificates, downloaded on first use and kept per process until they expire
 * (a cache: a restarted process downloads again). Only successful downloads are kept.
 */
export class WalletpaySigningCertificates {
  private readonly cache = new Map<string, { cert: X509Certificate; until: number }>();

  constructor(private readonly timeoutMs: number) {}

  /**
   * The certificate at `url` (on the provider's host: isProviderCertUrl); `refused` when the host answers
   * but gives no current signing certificate there (a 4xx, something else, out of date); `unreachable`
   * when it could not be asked (no connection, a timeout, a 5xx).
   */
  async get(url: string): Promise<X509Certificate | 'refused' | 'unreachable'> {
    const now = Date.now();
    const cached = this.cache.get(url);
    if (cached && cached.until > now) return cached.cert;
    this.cache.delete(url);
    let res;
    try {
      res = await httpRequest('walletpay', url, { method: 'GET', timeoutMs: this.timeoutMs, redirect: 'error' });
    } catch {
      return 'unreachable';
    }
    if (res.status >= 500) return 'unreachable';
    if (res.status !== 200) return 'refused';
    // X509Certificate finds a PEM block anywhere in its input (inside an HTML page too): only a body that is
    // certificates and nothing else is read (X509Certificate reads its first).
    if (!PEM_CERTIFICATES_ONLY.test(res.text)) return 'refused';
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(res.text);
    } catch {
      return 'refused';
    }
    const validTo = Date.parse(cert.validTo);
    if (!(Date.parse(cert.validFrom) <= now && now < validTo)) return 'refused';
    if (!isSigningCertificate(cert)) return 'refused';
    setBounded(this.cache, url, { cert, until: Math.min(now + CACHE_TTL_MS, validTo) }, MAX_CACHED);
    return cert;
  }
}

/**
 * PayPal's offline check: RSA-SHA256 over `transmissionId|transmissionTime|webhookId|crc32(rawBody)`
 * with the certificate from the provider's own host. `unverifiable` (an algorithm other than
 * SHA256withRSA, or a provider host that could not be asked for the certificate) leaves the verdict to
 * the postback. A certificate the provider's host has no current message-signing certificate at (every
 * genuine transmission names one), or a signature that does not match is `invalid` without a postback:
 * otherwise each forged callback naming a made-up certificate made the service ask the provider with
 * the merchant's credentials, using up their rate limit.
 *
 * A certificate URL off the provider's host is `invalid` against the real provider (PayPal names only
 * its own paypal.com certificates) and for live credentials whatever the base URL (behind an egress
 * proxy each forged event would otherwise cost a postback with the merchant's live credentials). For
 * sandbox credentials on another base URL (the simulator reached through a proxy or at another address
 * than its public one, which names its certificate under its public address) the adapter cannot tell
 * its provider's host from a forger's, so it downloads nothing and the verify-webhook-signature
 * postback decides, as decisions.md has walletpay events verified.
 */
export async function verifyOffline(
  t: Transmission,
  providerBaseUrl: string,
  certificates: WalletpaySigningCertificates,
  env: 'sandbox' | 'live',
): Promise<OfflineVerdict> {
  if (!isProviderCertUrl(t.certUrl, providerBaseUrl)) return isRealProvider(providerBaseUrl) || env === 'live' ? 'invalid' : 'unverifiable';
  if (t.authAlgo.toUpperCase() !== 'SHA256WITHRSA') return 'unverifiable';
  const cert = await certificates.get(t.certUrl);
  if (cert === 'unreachable') return 'unverifiable';
  if (cert === 'refused') return 'invalid';
  const message = walletpaySignedMessage(t.transmissionId, t.transmissionTime, t.webhookId, t.rawBody);
  try {
    return verify('sha256', Buffer.from(message, 'utf8'), cert.publicKey, Buffer.from(t.transmissionSig, 'base64')) ? 'verified' : 'invalid';
  } catch {
    return 'invalid';
  }
}
