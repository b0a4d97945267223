import { createHash } from 'node:crypto';
import type { WalletpayCredentials } from '../../../contract/index.js';
import { httpRequest } from '../http-client.js';
import { ProviderError } from '../../domain/ports.js';
import { errorCode, type WireToken } from './transformers.js';

/** Refresh this long before the provider's expiry (at most a tenth of the lifetime), so a token never expires in flight. */
const EXPIRY_MARGIN_MS = 60_000;

interface CachedToken {
  accessToken: string;
  refreshAt: number;
}

/**
 * OAuth2 client-credentials tokens (`POST /v1/oauth2/token`), cached per (base URL, client id,
 * secret) until shortly before they expire. The cache is an optimisation only: a missing or stale
 * token costs one more token call (the adapter refreshes once on a 401), so each process may keep
 * its own. Concurrent callers share one in-flight token request.
 */
export class WalletpayTokens {
  private readonly cache = new Map<string, Promise<CachedToken>>();

  constructor(private readonly timeoutMs: () => number) {}

  private key(baseUrl: string, creds: WalletpayCredentials): string {
    const secret = createHash('sha256').update(creds.client_secret).digest('hex');
    return `${baseUrl}|${creds.client_id}|${secret}`;
  }

  async token(baseUrl: string, creds: WalletpayCredentials): Promise<string> {
    const key = this.key(baseUrl, creds);
    const cached = this.cache.get(key);
    if (cached) {
      const token = await cached.catch(() => null);
      if (token && token.refreshAt > Date.now()) return token.accessToken;
      if (this.cache.get(key) === cached) this.cache.delete(key);
    }
    let pending = this.cache.get(key);
    if (!pending) {
      pending = this.fetchToken(baseUrl, creds);
      this.cache.set(key, pending);
      // A failed request is not cached.
      pending.catch(() => {
        if (this.cache.get(key) === pending) this.cache.delete(key);
      });
    }
    return (await pending).accessToken;
  }

  /**
   * Forgets `refused` after the provider answered 401 with it — only if it is still the cached token:
   * concurrent calls refused with the same token would otherwise each drop the one the first of them
   * just fetched (or is fetching), and each fetch another.
   */
  async invalidate(baseUrl: string, creds: WalletpayCredentials, refused: string): Promise<void> {
    const key = this.key(baseUrl, creds);
    const cached = this.cache.get(key);
    if (!cached) return;
    const token = await cached.catch(() => null);
    if (this.cache.get(key) === cached && (!token || token.accessToken === refused)) this.cache.delete(key);
  }

  private async fetchToken(baseUrl: string, creds: WalletpayCredentials): Promise<CachedToken> {
    const basic = Buffer.from(`${creds.client_id}:${creds.client_secret}`, 'utf8').toString('base64');
    let res;
    try {
      res = await httpRequest('walletpay', `${baseUrl}/v1/oauth2/token`, {
        method: 'POST',
        headers: {
          Authorization: `Basic ${basic}`,
          'Content-Type': 'application/x-www-form-urlencoded',
          Accept: 'application/json',
        },
        body: 'grant_type=client_credentials',
        timeoutMs: this.timeoutMs(),
      });
    } catch (err) {
      // Asking for a token changes nothing at the provider: a timeout here is plain unavailability.
      if (err instanceof ProviderError) throw new ProviderError('walletpay', 'unavailable', `${err.message} (access token)`);
      throw err;
    }
    if (res.status === 401 || res.status === 403) {
      throw new ProviderError('walletpay', 'auth', `walletpay refused the client credentials (${errorCode(res.json) ?? res.status})`, errorCode(res.json));
    }
    const body = res.json as Partial<WireToken> | null;
    if (res.status !== 200 || !body || typeof body.access_token !== 'string') {
      const kind = res.status >= 500 || res.status === 429 ? 'unavailable' : 'invalid_request';
      throw new ProviderError('walletpay', kind, `walletpay token request failed with ${res.status}${errorCode(res.json) ? ` ${errorCode(res.json)}` : ''}`, errorCode(res.json));
    }
    const lifetimeMs = Math.max(0, Number(body.expires_in ?? 0) || 0) * 1000;
    return { accessToken: body.access_token, refreshAt: Date.now() + lifetimeMs - Math.min(EXPIRY_MARGIN_MS, lifetimeMs / 10) };
  }
}
