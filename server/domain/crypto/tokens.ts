import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** `pk_` + 43 url-safe base64 characters (32 random bytes). */
export function generateApiKey(): string {
  return `pk_${randomBytes(32).toString('base64url')}`;
}

/** `whsec_` + 32 random bytes, base64url. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Constant-time comparison of two strings of any length. */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** `****` + the last four characters, as the interface masks credentials. */
export function maskSecret(value: string): string {
  return `****${value.slice(-4)}`;
}
