import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Where a secret was found, with the secret masked so the report itself leaks nothing. */
export interface SecretLeak {
  file: string;
  secret: string;
}

const mask = (secret: string) => `${secret.slice(0, 4)}…(${secret.length} chars)`;

/**
 * Greps `files` for every secret (exact substring). Secrets shorter than 8 characters are refused:
 * they would match by accident and prove nothing.
 */
export function findSecretsInFiles(files: readonly string[], secrets: Iterable<string>): SecretLeak[] {
  const list = [...new Set(secrets)];
  const short = list.filter((s) => s.length < 8);
  if (short.length > 0) throw new Error(`secrets must be at least 8 characters to audit: ${short.map(mask).join(', ')}`);
  const leaks: SecretLeak[] = [];
  for (const file of files) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    for (const secret of list) if (text.includes(secret)) leaks.push({ file, secret: mask(secret) });
  }
  return leaks;
}

/** The log file `startTestService()` writes for the service on `databaseUrl`. */
export function inProcessLogFile(databaseUrl: string): string {
  return path.resolve('test-results', 'logs', `${new URL(databaseUrl).pathname.slice(1)}.log`);
}
