import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { MobilemoneyCredentials } from '../../../contract/index.js';
import { Leases } from '../../persistence/leases.js';
import { httpRequest } from '../http-client.js';
import { ProviderError } from '../../domain/ports.js';
import { toProviderError } from './errors.js';
import { TokenResponseSchema, tokenCacheKey, tokenLifetimeSeconds } from './transformers.js';

/** Refresh this long before the operator's expiry, so a call never starts with a dying token. */
const REFRESH_MARGIN_SECONDS = 60;

type Knex = ReturnType<EntityManager['getKnex']>;

/** How often a caller waiting for another's token fetch looks again (at most). */
const MAX_POLL_MS = 200;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The operator: where this process calls it, and who it is (the token cache's key; base-url.ts providerIdentity). */
export interface Operator {
  baseUrl: string;
  identity: string;
}

/**
 * The OAuth token, shared by every process through PostgreSQL. The operator invalidates a consumer
 * key's previous token whenever it issues a new one, so a per-process cache would make processes
 * knock each other's tokens out. A new token is fetched by one caller at a time, the holder of a
 * lease (persistence/leases.ts), not of a lock: no connection is held while the operator answers, and
 * concurrent callers poll the cache (giving their connection back between polls) instead of stampeding.
 */
export class MobilemoneyTokenStore {
  constructor(
    private readonly em: EntityManager,
    private readonly timeoutMs: number,
  ) {}

  /**
   * A valid token for these credentials. `stale` is a token the operator just refused: a cached
   * token equal to it is not returned, a new one is fetched (unless another caller already did).
   */
  async token(creds: MobilemoneyCredentials, operator: Operator, stale?: string): Promise<string> {
    const { baseUrl, identity } = operator;
    const key = tokenCacheKey(identity, creds.consumer_key);
    const lease = `mobilemoney-token:${key}`;
    const knex = this.em.getKnex();
    const leases = new Leases(knex);
    // The holder's lease outlives its fetch (bounded by the timeout); waiters give up after the same.
    const leaseMs = this.timeoutMs * 2;
    const deadline = Date.now() + this.timeoutMs * 2;
    let delay = 10;
    for (;;) {
      const cached = await this.read(knex, key, creds);
      if (cached && cached !== stale) return cached;
      const holder = await leases.take(lease, leaseMs);
      if (holder) {
        try {
          const again = await this.read(knex, key, creds);
          if (again && again !== stale) return again;
          const fresh = await this.fetch(creds, baseUrl);
          await knex.raw(
            `INSERT INTO mobilemoney_tokens (cache_key, token_enc, expires_at, updated_at)
             VALUES (?, ?, now() + make_interval(secs => ?), now())
             ON CONFLICT (cache_key) DO UPDATE SET token_enc = EXCLUDED.token_enc, expires_at = EXCLUDED.expires_at, updated_at = now()`,
            [key, seal(fresh.token, creds), fresh.lifetimeSeconds],
          );
          return fresh.token;
        } finally {
          await leases.release(lease, holder);
        }
      }
      if (Date.now() >= deadline) throw new ProviderError('mobilemoney', 'unavailable', 'mobilemoney token request: another request is still fetching the token');
      await sleep(delay * (0.5 + Math.random()));
      delay = Math.min(delay * 2, MAX_POLL_MS);
    }
  }

  private async read(knex: Knex, key: string, creds: MobilemoneyCredentials): Promise<string | null> {
    const result = (await knex.raw(
      `SELECT token_enc FROM mobilemoney_tokens WHERE cache_key = ? AND expires_at > now() + make_interval(secs => ?)`,
      [key, REFRESH_MARGIN_SECONDS],
    )) as { rows: { token_enc: string }[] };
    const row = result.rows[0];
    return row ? open(row.token_enc, creds) : null;
  }

  private async fetch(creds: MobilemoneyCredentials, baseUrl: string): Promise<{ token: string; lifetimeSeconds: number }> {
    const basic = Buffer.from(`${creds.consumer_key}:${creds.consumer_secret}`).toString('base64');
    let res;
    try {
      res = await httpRequest('mobilemoney', `${baseUrl}/oauth/v1/generate?grant_type=client_credentials`, {
        method: 'GET',
        headers: { Authorization: `Basic ${basic}`, Accept: 'application/json' },
        timeoutMs: this.timeoutMs,
      });
    } catch (err) {
      // A token request has no side effects: a timeout here means "unavailable", never "unknown outcome".
      if (err instanceof ProviderError) throw new ProviderError('mobilemoney', 'unavailable', err.message.replace('mobilemoney', 'mobilemoney token request:'));
      throw err;
    }
    if (res.status < 200 || res.status >= 300) {
      const error = toProviderError(res, 'token request');
      if (error.kind === 'indeterminate') throw new ProviderError('mobilemoney', 'unavailable', error.message, error.providerCode);
      if (res.status === 400 || res.status === 401 || res.status === 403) {
        throw new ProviderError('mobilemoney', 'auth', error.message, error.providerCode);
      }
      throw error;
    }
    const parsed = TokenResponseSchema.safeParse(res.json);
    // Unlike a push's, a token answer we cannot read leaves nothing unknown: the push was not sent.
    if (!parsed.success) throw new ProviderError('mobilemoney', 'unavailable', 'mobilemoney token request returned an unexpected response');
    return { token: parsed.data.access_token, lifetimeSeconds: tokenLifetimeSeconds(parsed.data.expires_in) };
  }
}

/** The cache is sealed with a key derived from the consumer secret: only the credential holder can read it. */
function sealKey(creds: MobilemoneyCredentials): Buffer {
  return createHash('sha256').update(`mobilemoney-token\0${creds.consumer_key}\0${creds.consumer_secret}`).digest();
}

function seal(token: string, creds: MobilemoneyCredentials): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealKey(creds), iv);
  const body = Buffer.concat([cipher.update(token, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

/** null when the secret changed since the token was stored (then a new token is fetched). */
function open(sealed: string, creds: MobilemoneyCredentials): string | null {
  try {
    const raw = Buffer.from(sealed, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', sealKey(creds), raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}
