import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { AppConfig } from './config.js';

/**
 * The AES key for secrets at rest: ENCRYPTION_KEY when set (required in production); otherwise one
 * generated on first start and kept in the data folder, so development needs no set-up.
 */
export async function resolveEncryptionKey(config: AppConfig): Promise<string> {
  if (config.encryptionKey) return config.encryptionKey;
  const file = path.resolve(config.dataDir, 'encryption.key');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(path.dirname(file), { recursive: true });
  const key = randomBytes(32).toString('base64');
  await writeFile(file, `${key}\n`, { mode: 0o600, flag: 'wx' }).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
  });
  return (await readFile(file, 'utf8')).trim();
}
