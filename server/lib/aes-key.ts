/** The advice every message about a malformed encryption key gives. */
export const AES_KEY_FORMAT = 'the base64 encoding of exactly 32 bytes (openssl rand -base64 32)';

/**
 * An AES-256 key as configured (ENCRYPTION_KEY, DECRYPTION_KEYS): base64 or base64url of exactly 32
 * bytes, surrounding blanks ignored. null for anything else — Buffer would quietly skip foreign
 * characters, so they are refused first.
 */
export function decodeAesKey(text: string): Buffer | null {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) return null;
  const bytes = Buffer.from(trimmed, 'base64');
  return bytes.length === 32 ? bytes : null;
}
