import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { SCOPES, type Scope } from '../../../contract/index.js';
import { ApiKeySchema, MerchantSchema } from '../../persistence/entities/index.js';
import { DomainError } from '../errors.js';
import { generateApiKey, sha256Hex } from '../crypto/tokens.js';
import type { NotifiedCache } from '../../persistence/notified-cache.js';

export interface Principal {
  keyId: string;
  merchantId: string;
  scopes: readonly Scope[];
}

export function parseScopes(list: string): Scope[] {
  const scopes = list.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (scopes.length === 0 || unknown.length > 0) {
    throw new DomainError('VALIDATION_ERROR', `unknown scope(s): ${unknown.join(', ') || '(none given)'}; known: ${SCOPES.join(', ')}`);
  }
  return [...new Set(scopes)] as Scope[];
}

/** Principals by key hash, kept only while changes to api_keys are notified to this process. */
export type PrincipalCache = Pick<NotifiedCache<Principal>, 'get' | 'dropMerchant'>;

/** API keys: issued by the admin CLI, stored as SHA-256 hashes, checked on every request. */
export class ApiKeyService {
  constructor(
    private readonly em: EntityManager,
    /** The api's cache (container.ts); the admin CLI reads the table itself. */
    private readonly cache?: PrincipalCache,
  ) {}

  /** The key (shown once) and what was stored: the operator sees the scopes the key has. */
  async issue(merchantId: string, scopes: Scope[]): Promise<{ id: string; key: string; merchant_id: string; scopes: Scope[] }> {
    const merchant = await this.em.findOne(MerchantSchema, { id: merchantId });
    if (!merchant) throw new DomainError('NOT_FOUND', `merchant ${merchantId} not found`);
    const key = generateApiKey();
    const row = this.em.create(ApiKeySchema, {
      id: randomUUID(),
      merchantId,
      keyHash: sha256Hex(key),
      keyPrefix: key.slice(0, 10),
      scopes,
      revokedAt: null,
    });
    await this.em.persistAndFlush(row);
    return { id: row.id, key, merchant_id: row.merchantId, scopes: [...row.scopes] as Scope[] };
  }

  async revoke(id: string): Promise<{ id: string; revoked_at: string }> {
    const row = await this.em.findOne(ApiKeySchema, { id });
    if (!row) throw new DomainError('NOT_FOUND', `key ${id} not found`);
    row.revokedAt ??= new Date();
    await this.em.flush();
    this.cache?.dropMerchant(row.merchantId);
    return { id, revoked_at: row.revokedAt.toISOString() };
  }

  /** A merchant's keys; NOT_FOUND for a merchant that does not exist (not an empty list, as for one with no keys). */
  async list(merchantId: string) {
    if (!(await this.em.findOne(MerchantSchema, { id: merchantId }))) throw new DomainError('NOT_FOUND', `merchant ${merchantId} not found`);
    const rows = await this.em.find(ApiKeySchema, { merchantId }, { orderBy: { createdAt: 'asc' } });
    return rows.map((r) => ({
      id: r.id,
      prefix: r.keyPrefix,
      scopes: r.scopes,
      revoked_at: r.revokedAt?.toISOString() ?? null,
      created_at: r.createdAt.toISOString(),
    }));
  }

  /** The principal for a presented key, or null for a missing, unknown or revoked key. */
  async authenticate(presented: string | undefined): Promise<Principal | null> {
    if (!presented || !presented.startsWith('pk_') || presented.length > 200) return null;
    const keyHash = sha256Hex(presented);
    return this.cache ? this.cache.get(keyHash, () => this.lookup(keyHash)) : this.lookup(keyHash);
  }

  private async lookup(keyHash: string): Promise<Principal | null> {
    const row = await this.em.findOne(ApiKeySchema, { keyHash, revokedAt: null });
    if (!row) return null;
    return Object.freeze({ keyId: row.id, merchantId: row.merchantId, scopes: Object.freeze([...row.scopes]) as readonly Scope[] });
  }
}
