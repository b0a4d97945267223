import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { AES_KEY_FORMAT, decodeAesKey } from '../../lib/aes-key.js';

/** Sealed before keys had ids: `v1.<iv>.<tag>.<ciphertext>`. Still opened (by trying each key), never written. */
const V1 = 'v1';
/** `v2.<key id>.<iv>.<tag>.<ciphertext>`: the key id says which key opens it. */
const V2 = 'v2';

/**
 * A stored secret none of this process's keys opens (a key left out of ENCRYPTION_KEY/DECRYPTION_KEYS,
 * or a process of a rolling deploy that lacks the new key): the operator's to mend, never the merchant's
 * doing. The message names the key id, never the secret.
 */
export class SecretUnreadableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretUnreadableError';
  }
}

/** Which of a process's keys opens a stored secret: ENCRYPTION_KEY, one of DECRYPTION_KEYS, or none of them. */
export type SealingKey = 'current' | 'decryption' | 'unknown';

interface Key {
  id: string;
  bytes: Buffer;
}

function parseKey(base64: string, variable: string): Key {
  const bytes = decodeAesKey(base64);
  if (!bytes) throw new Error(`${variable} must be ${AES_KEY_FORMAT}`);
  // A key's id is a digest of the key, not of a secret it seals: it names the key without revealing it.
  const id = createHash('sha256').update('payments secret-box key id\0').update(bytes).digest().subarray(0, 8).toString('base64url');
  return { id, bytes };
}

/**
 * Encrypts secrets at rest with AES-256-GCM, under ENCRYPTION_KEY. DECRYPTION_KEYS are more keys that
 * open what was sealed with them — the old key during a rotation, or the next key while a rolling
 * deploy brings it in — and never seal. A database row holds only the sealed form; the keys live in
 * configuration, never in the database.
 */
export class SecretBox {
  private readonly current: Key;
  private readonly byId = new Map<string, Key>();

  constructor(keyBase64: string, decryptionKeysBase64: readonly string[] = []) {
    this.current = parseKey(keyBase64, 'ENCRYPTION_KEY');
    for (const key of [this.current, ...decryptionKeysBase64.map((k) => parseKey(k, 'each of DECRYPTION_KEYS'))]) {
      if (!this.byId.has(key.id)) this.byId.set(key.id, key);
    }
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.current.bytes, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return [V2, this.current.id, iv.toString('base64url'), tag.toString('base64url'), ciphertext.toString('base64url')].join('.');
  }

  open(sealed: string): string {
    const parts = sealed.split('.');
    if (parts[0] === V2 && parts.length === 5) {
      const key = this.byId.get(parts[1]!);
      if (!key) throw new SecretUnreadableError(`a secret sealed with key ${parts[1]} cannot be opened: that key is neither ENCRYPTION_KEY nor one of DECRYPTION_KEYS`);
      return decrypt(key, parts[2]!, parts[3]!, parts[4]!);
    }
    if (parts[0] === V1 && parts.length === 4) {
      const opened = this.openV1(parts);
      if (!opened) throw new SecretUnreadableError('a secret sealed before key ids cannot be opened with ENCRYPTION_KEY or any of DECRYPTION_KEYS');
      return opened.plaintext;
    }
    throw new SecretUnreadableError('unrecognised sealed secret');
  }

  /**
   * Which of this process's keys opens `sealed`. A v2 secret names its key: it is read no further than
   * its key id (`v2.<key id>` is enough), nothing is decrypted. One sealed before key ids names none, so
   * the keys are tried on it (GCM's tag authenticates it or not), ENCRYPTION_KEY first. Anything else
   * no key opens.
   */
  keyOf(sealed: string): SealingKey {
    const parts = sealed.split('.');
    if (parts[0] === V2) return this.kindOf(this.byId.get(parts[1] ?? ''));
    if (parts[0] === V1 && parts.length === 4) return this.kindOf(this.openV1(parts)?.key);
    return 'unknown';
  }

  /**
   * Whether `sealed` is in the current form (v2) under ENCRYPTION_KEY: a rotation's reseal leaves it as it
   * is. One sealed before key ids is resealed whichever key opens it, ENCRYPTION_KEY too: rewritten as v2,
   * it names its key, and the census counts it without decrypting it.
   */
  sealedWithCurrentKey(sealed: string): boolean {
    return sealed.startsWith(`${V2}.`) && this.keyOf(sealed) === 'current';
  }

  sealJson(value: unknown): string {
    return this.seal(JSON.stringify(value));
  }

  openJson<T>(sealed: string): T {
    return JSON.parse(this.open(sealed)) as T;
  }

  /** A v1 secret's `parts` opened with the first key that authenticates them (the current key first, as byId holds it), or null. */
  private openV1(parts: string[]): { key: Key; plaintext: string } | null {
    for (const key of this.byId.values()) {
      try {
        return { key, plaintext: decrypt(key, parts[1]!, parts[2]!, parts[3]!) };
      } catch {
        // GCM's tag did not authenticate: not this key.
      }
    }
    return null;
  }

  private kindOf(key: Key | undefined): SealingKey {
    if (!key) return 'unknown';
    return key === this.current ? 'current' : 'decryption';
  }
}

function decrypt(key: Key, iv: string, tag: string, ciphertext: string): string {
  // A full 16-byte tag only: GCM would accept a truncated one, and a shorter tag is easier to forge.
  const decipher = createDecipheriv('aes-256-gcm', key.bytes, Buffer.from(iv, 'base64url'), { authTagLength: 16 });
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
}
