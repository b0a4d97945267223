import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { AppConfig } from './config.js';

const keyFile = (config: AppConfig): string => path.resolve(config.dataDir, 'encryption.key');

/**
 * The key there already is: ENCRYPTION_KEY, else the one a service generated in the data folder; null
 * when neither. For the admin CLI, which must never generate one (a key made up in the operator's
 * working folder would seal secrets no service can open).
 */
export async function existingEncryptionKey(config: AppConfig): Promise<string | null> {
  if (config.encryptionKey) return config.encryptionKey;
  const file = keyFile(config);
  return existsSync(file) ? (await readFile(file, 'utf8')).trim() : null;
}

/**
 * The AES key for secrets at rest: ENCRYPTION_KEY when set (required in production); otherwise one
 * generated on first start and kept in the data folder, so development needs no set-up.
 */
export async function resolveEncryptionKey(config: AppConfig): Promise<string> {
  const existing = await existingEncryptionKey(config);
  if (existing) return existing;
  const file = keyFile(config);
  await mkdir(path.dirname(file), { recursive: true });
  const key = randomBytes(32).toString('base64');
  await writeFile(file, `${key}\n`, { mode: 0o600, flag: 'wx' }).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
  });
  return (await readFile(file, 'utf8')).trim();
}
