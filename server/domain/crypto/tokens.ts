import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** `pk_` + 43 url-safe base64 characters (32 random bytes). */
export function generateApiKey(): string {
  return `pk_${randomBytes(32).toString('base64url')}`;
}

/**
 * `whsec_` + 32 random bytes in standard base64: the Standard Webhooks form, so `standardwebhooks` and
 * `svix` take the secret as it is (their HMAC key is the decoded bytes; X-Payments-Signature's is the
 * whole string).
 */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
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
