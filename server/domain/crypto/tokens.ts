import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** `pk_` + 43 url-safe base64 characters (32 random bytes). */
export function generateApiKey(): string {
  return `pk_${randomBytes(32).toString('base64url')}`;
}

/**
 * `whsec_` + 32 random bytes, written in the characters standard base64 and base64url share.
 *
 * decisions.md says base64url; Standard Webhooks libraries (`standardwebhooks`, `svix`) decode the part
 * after `whsec_` as standard base64 and take the decoded bytes as their HMAC key (X-Payments-Signature's
 * key is the whole string). The two alphabets differ only in `+`/`/` versus `-`/`_`, so bytes whose
 * standard base64 has neither are written identically in both: we draw again until that holds. The
 * result, `=` padding included, is valid base64url (RFC 4648 §5 keeps the pad) and valid standard
 * base64, and both decode it to the same 32 bytes.
 *
 * The cost: the 43rd character carries 4 bits followed by two zero bits, so it can never be `+` or `/`;
 * the other 42 each avoid 2 of 64 symbols. (62/64)^42 ≈ 26 % of draws qualify (about 3.8 draws on
 * average, a few microseconds), and the secret has 42·log2(62) + 4 ≈ 254.1 bits of entropy instead of
 * 256: about 1.9 bits less, uniformly distributed over what remains (rejection sampling adds no bias).
 */
export function generateWebhookSecret(): string {
  for (;;) {
    const encoded = randomBytes(32).toString('base64');
    if (!/[+/]/.test(encoded)) return `whsec_${encoded}`;
  }
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

/**
 * `****` + the last four characters, as the interface masks credentials; `****` alone for a value of four
 * characters or fewer, whose last four would be all of it (decisions.md: secrets are never returned).
 */
export function maskSecret(value: string): string {
  return value.length > 4 ? `****${value.slice(-4)}` : '****';
}
