import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Provider, StoreCredentialsBody } from '../../../contract/index.js';
import { ProviderCredentialSchema } from '../../persistence/entities/index.js';
import type { SecretBox } from '../crypto/secret-box.js';
import { DomainError, notFound, stillRunning, validationError } from '../errors.js';
import { PROVIDER_ACCOUNT_FIELD, ProviderError, type PreparedCredentials, type ProviderRegistry } from '../ports.js';
import { summarizeCredentials } from './credential-masking.js';
import type { NotifiedCache } from '../../persistence/notified-cache.js';
import type { Leases } from '../../persistence/leases.js';
import type { Logger } from '../../observability/logger.js';

type StoreBodyOf<P extends Provider> = Extract<StoreCredentialsBody, { provider: P }>;
/** Each provider's credentials, as the contract's credential schemas define them. */
export type CredentialsByProvider = { [P in Provider]: StoreBodyOf<P>[P & keyof StoreBodyOf<P>] };

/** Called after a provider's credentials were stored or removed (e.g. to (un)schedule its jobs). */
export interface CredentialHooks {
  stored?: (merchantId: string, provider: Provider) => Promise<void>;
  removed?: (merchantId: string, provider: Provider) => Promise<void>;
}

/** Decrypted credentials by `merchantId:provider`, kept only while changes to provider_credentials are notified. */
export type CredentialCache = Pick<NotifiedCache<unknown>, 'get' | 'dropMerchant'>;

export interface CredentialSummary {
  provider: Provider;
  config_summary: Record<string, string>;
}

export interface CredentialsServiceOptions {
  hooks?: CredentialHooks;
  cache?: CredentialCache;
  logger?: Pick<Logger, 'warn'>;
  /** Stores of one provider's credentials that call the provider run one at a time per merchant, under a lease. */
  leases: Leases;
  /** How long a store may call the provider before another may start (the lease, renewed at each step). */
  storeLeaseMs: number;
  /**
   * PUBLIC_BASE_URL, the only place a stored address of this service (ProviderPort.serviceAddressFields)
   * may point to. Read at each store: it is known only once the service listens.
   */
  publicBaseUrl: () => string;
}

/** Per-merchant provider credentials, encrypted at rest and only ever shown masked. */
export class CredentialsService {
  private readonly hooks: CredentialHooks;

  constructor(
    private readonly em: EntityManager,
    private readonly secrets: SecretBox,
    /** A provider may complete credentials before they are stored (ProviderPort.prepareCredentials). */
    private readonly providers: ProviderRegistry,
    private readonly options: CredentialsServiceOptions,
  ) {
    this.hooks = options.hooks ?? {};
  }

  async store(merchantId: string, body: StoreCredentialsBody): Promise<CredentialSummary> {
    const provider = body.provider;
    const credentials = (body as Record<string, unknown>)[provider] as CredentialsByProvider[typeof provider];
    this.checkServiceAddresses(provider, credentials as Record<string, unknown>);
    if (!this.providers.get(provider).prepareCredentials) return this.write(merchantId, provider, credentials);
    // A provider's preparation sets things up at the provider, and its afterStored step deletes what the
    // credentials it replaced used there: two at once could each delete the other's (leaving the stored
    // secret's endpoint deleted). So one at a time, under a lease — no connection is held while the
    // provider answers — and a second store meanwhile is refused, as a repeat of a running request is.
    const { leases, storeLeaseMs } = this.options;
    const lease = `credentials:${merchantId}:${provider}`;
    const holder = await leases.take(lease, storeLeaseMs);
    if (!holder) throw storeRunning(provider);
    try {
      const prepared = await this.prepare(merchantId, provider, credentials);
      // A lease that ran out while the provider answered may be another store's now: that one stands.
      if (!(await leases.renew(lease, holder, storeLeaseMs))) throw storeRunning(provider);
      const summary = await this.write(merchantId, provider, prepared.credentials);
      if (prepared.afterStored) {
        if (await leases.renew(lease, holder, storeLeaseMs)) await this.afterStored(merchantId, provider, prepared.credentials, prepared.afterStored);
        // Another store runs now, and its own clean-up removes what the previous credentials used.
        else this.options.logger?.warn({ merchantId, provider }, 'credentials stored; the clean-up at the provider is left to the store that started meanwhile');
      }
      return summary;
    } finally {
      await leases.release(lease, holder);
    }
  }

  /**
   * Each stored address of this service (ProviderPort.serviceAddressFields) is exactly one of its routes
   * under PUBLIC_BASE_URL (same scheme, host, port and path prefix; no query or fragment). The operator's
   * results carry the signed token that proves them, so they go to no other host. Else 422, nothing stored.
   */
  private checkServiceAddresses(provider: Provider, credentials: Record<string, unknown>): void {
    const base = new URL(this.options.publicBaseUrl());
    const prefix = base.pathname.replace(/\/$/, '');
    for (const [field, routes] of Object.entries(this.providers.get(provider).serviceAddressFields ?? {})) {
      const value = credentials[field];
      if (typeof value !== 'string') continue;
      const ours = routes.map((route) => `${base.origin}${prefix}/v1/webhooks/${provider}${route}`);
      const url = URL.canParse(value) ? new URL(value) : null;
      const isOurs = url && !url.username && !url.password && !url.search && !url.hash && ours.includes(`${url.origin}${url.pathname}`);
      if (!isOurs) {
        throw validationError(
          `${provider}.${field}`,
          `must be this service's own address: the operator's results must reach this service (at ${base.origin}), so one of ${ours.join(' or ')}`,
        );
      }
    }
  }

  private async prepare<P extends Provider>(merchantId: string, provider: P, credentials: CredentialsByProvider[P]): Promise<PreparedCredentials<CredentialsByProvider[P]>> {
    try {
      // What is stored now (it may name what the provider set up for it, which the provider's step then
      // cleans up); unreadable counts as none. Read from the database, not the cache: the lease orders this
      // store after one another process just finished, whose change this process may not have heard yet.
      const previous = (await this.storedNow(merchantId, provider).catch(() => null)) as CredentialsByProvider[P] | null;
      return (await this.providers.get(provider).prepareCredentials!(merchantId, credentials, previous)) as PreparedCredentials<CredentialsByProvider[P]>;
    } catch (err) {
      if (err instanceof ProviderError) {
        throw new DomainError('PROVIDER_ERROR', `${provider} rejected the credentials while registering the callback URL: ${err.message}`);
      }
      throw err;
    }
  }

  private async write(merchantId: string, provider: Provider, credentials: unknown): Promise<CredentialSummary> {
    // The provider account a preparation recorded is the service's, not one of the merchant's fields.
    const { [PROVIDER_ACCOUNT_FIELD]: _account, ...given } = credentials as Record<string, unknown>;
    const summary = summarizeCredentials(given, this.providers.get(provider).publicCredentialFields);
    const sealed = this.secrets.sealJson(credentials);
    // One statement, so two concurrent stores for one provider cannot both insert.
    await this.em.getConnection().execute(
      `INSERT INTO provider_credentials (id, merchant_id, provider, secrets_enc, config_summary)
       VALUES (?, ?, ?, ?, ?::jsonb)
       ON CONFLICT (merchant_id, provider)
       DO UPDATE SET secrets_enc = EXCLUDED.secrets_enc, config_summary = EXCLUDED.config_summary, updated_at = now()`,
      [randomUUID(), merchantId, provider, sealed, JSON.stringify(summary)],
    );
    this.options.cache?.dropMerchant(merchantId);
    // Committed: a failing follow-up (no connection for the job's lock) must not answer "nothing was
    // done". Logged; the worker puts a missing reconciliation job back every interval.
    try {
      await this.hooks.stored?.(merchantId, provider);
    } catch (err) {
      this.options.logger?.warn({ merchantId, provider, err: { message: (err as Error).message } }, 'credentials stored; scheduling their jobs failed (the worker schedules a missing one within an interval)');
    }
    return { provider, config_summary: summary };
  }

  /**
   * A provider's step after a store (PreparedCredentials.afterStored), run while `stored` is still the
   * merchant's (a removal meanwhile skips it). Best effort: logged, never thrown.
   */
  private async afterStored(merchantId: string, provider: Provider, stored: unknown, step: () => Promise<void>): Promise<void> {
    try {
      const current = await this.storedNow(merchantId, provider);
      if (current === null || JSON.stringify(current) !== JSON.stringify(stored)) return;
      await step();
    } catch (err) {
      this.options.logger?.warn({ merchantId, provider, err: { message: (err as Error).message } }, 'credentials stored; cleaning up what the previous ones used at the provider failed');
    }
  }

  /** The provider's credentials as stored at this moment (decrypted), or null: read from the database, never the cache. */
  private async storedNow(merchantId: string, provider: Provider): Promise<unknown> {
    const [row] = await this.em.getConnection().execute<{ secrets_enc: string }[]>(
      'SELECT secrets_enc FROM provider_credentials WHERE merchant_id = ? AND provider = ?',
      [merchantId, provider],
    );
    return row ? this.secrets.openJson(row.secrets_enc) : null;
  }

  async list(merchantId: string): Promise<CredentialSummary[]> {
    const rows = await this.em.find(ProviderCredentialSchema, { merchantId }, { orderBy: { provider: 'asc' } });
    return rows.map((r) => ({ provider: r.provider as Provider, config_summary: r.configSummary as Record<string, string> }));
  }

  /**
   * Deletes the row, then runs the `removed` hook, then the provider's clean-up (afterCredentialsRemoved:
   * cardpay deletes the merchant's webhook endpoint). The delete is committed by then, so a hook or a
   * clean-up that fails must not make the answer an error: a 503 says nothing was done, and a client's
   * retry would be told 404. Each is logged; what the hook undoes does not depend on it (the
   * reconciliation job cancels itself once it finds no credentials). The clean-up comes after the
   * commit, with no connection held while the provider answers: done first, a delete that then failed
   * would leave the stored credentials without their endpoint, and no events, behind a 503.
   *
   * A provider whose store runs under the lease (prepareCredentials) is deleted under it too: deleted
   * while a store talks to the provider, the store's write would put credentials back a moment after this
   * answered 200 — a merchant revoking compromised ones would find them configured again. So a deletion
   * meanwhile is refused as a second store is: 409 with Retry-After, nothing changed.
   */
  async remove(merchantId: string, provider: Provider): Promise<void> {
    const port = this.providers.get(provider);
    const cleanUp = port.afterCredentialsRemoved;
    if (!port.prepareCredentials && !cleanUp) {
      // Its store is one upsert: a deletion simply comes before or after it.
      await this.deleteStored(merchantId, provider);
      return;
    }
    const { leases, storeLeaseMs } = this.options;
    const lease = `credentials:${merchantId}:${provider}`;
    const holder = await leases.take(lease, storeLeaseMs);
    if (!holder) throw changeRunning(provider);
    try {
      const sealed = await this.deleteStored(merchantId, provider);
      if (!cleanUp) return;
      try {
        await cleanUp.call(port, merchantId, this.secrets.openJson(sealed));
      } catch (err) {
        this.options.logger?.warn({ merchantId, provider, err: { message: (err as Error).message } }, 'credentials deleted; cleaning up what they used at the provider failed');
      }
    } finally {
      await leases.release(lease, holder);
    }
  }

  /** Deletes the stored row (404 when there is none) and runs the `removed` hook; answers the sealed credentials. */
  private async deleteStored(merchantId: string, provider: Provider): Promise<string> {
    const [row] = await this.em.getConnection().execute<{ secrets_enc: string }[]>(
      'DELETE FROM provider_credentials WHERE merchant_id = ? AND provider = ? RETURNING secrets_enc',
      [merchantId, provider],
    );
    this.options.cache?.dropMerchant(merchantId);
    if (!row) throw notFound(`${provider} credentials`);
    try {
      await this.hooks.removed?.(merchantId, provider);
    } catch (err) {
      this.options.logger?.warn({ merchantId, provider, err: { message: (err as Error).message } }, 'credentials deleted; unscheduling their jobs failed (a job cancels itself once it finds no credentials)');
    }
    return row.secrets_enc;
  }

  /** Decrypted credentials for a provider call, or null when the merchant has none. */
  async find<P extends Provider>(merchantId: string, provider: P): Promise<CredentialsByProvider[P] | null> {
    const load = async () => {
      const row = await this.em.findOne(ProviderCredentialSchema, { merchantId, provider });
      // Frozen: one decrypted copy may serve many requests, so none may change it.
      return row ? deepFreeze(this.secrets.openJson<CredentialsByProvider[P]>(row.secretsEnc)) : null;
    };
    const found = this.options.cache ? await this.options.cache.get(`${merchantId}:${provider}`, load) : await load();
    return found as CredentialsByProvider[P] | null;
  }

  /** Like find, but a missing configuration is the merchant's validation error (interface: 422). */
  async require<P extends Provider>(merchantId: string, provider: P): Promise<CredentialsByProvider[P]> {
    const found = await this.find(merchantId, provider);
    if (!found) throw credentialsNotConfigured(provider);
    return found;
  }
}

/**
 * A store of credentials while another store of the same provider's runs: 409 with Retry-After, like a
 * repeat of a request still running (the one passing conflict; clients retry it). A client's retry of a
 * store whose answer it lost meets this while the first attempt still runs.
 */
function storeRunning(provider: Provider): DomainError {
  return stillRunning(`another store or deletion of this merchant's ${provider} credentials is still running; retry once it has finished`);
}

/** A deletion of credentials while a store (or another deletion) of the same provider's runs: the same passing 409, nothing deleted. */
function changeRunning(provider: Provider): DomainError {
  return stillRunning(`a store or deletion of this merchant's ${provider} credentials is still running; nothing was deleted, retry once it has finished`);
}

/** A payment or refund request for a provider the merchant has no credentials for (interface: 422). */
export function credentialsNotConfigured(provider: string): DomainError {
  return new DomainError('VALIDATION_ERROR', `${provider} credentials are not configured for this merchant`, [
    { field: 'provider', issue: `no ${provider} credentials configured; store them with PUT /v1/merchant/credentials` },
  ]);
}

/**
 * `credentialsNotConfigured` unless the merchant has credentials for `provider`, read in `tx` (a
 * transaction that already holds a connection: no second one, nothing decrypted).
 */
export async function assertCredentialsConfigured(tx: EntityManager, merchantId: string, provider: string): Promise<void> {
  if ((await tx.count(ProviderCredentialSchema, { merchantId, provider: provider as Provider })) === 0) throw credentialsNotConfigured(provider);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
