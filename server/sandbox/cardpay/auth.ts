import { createHash } from 'node:crypto';
import type { Request } from 'express';
import { unauthorized } from './errors.js';

/**
 * The secret key from `Authorization: Bearer sk_…` or Basic (key as the username). Each key is its own
 * tenant: objects belong to `sha256(key)`, so no key is ever stored. The simulator is test mode only:
 * it takes `sk_test_…`/`rk_test_…` keys; any other key, or a test key containing `invalid` or ending in
 * `_revoked`, is refused with 401 (a way to exercise bad credentials).
 */
const KEY_PATTERN = /^(sk|rk)_test_[A-Za-z0-9_]{4,247}$/;

export function accountOf(req: Request): string {
  const header = req.get('authorization');
  if (!header) {
    throw unauthorized(
      "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
    );
  }
  const [scheme, value = ''] = header.trim().split(/\s+/, 2);
  let key = '';
  if (scheme?.toLowerCase() === 'bearer') key = value;
  else if (scheme?.toLowerCase() === 'basic') key = Buffer.from(value, 'base64').toString('utf8').split(':')[0] ?? '';
  else throw unauthorized('Invalid API Key provided: use Bearer or Basic authentication.');
  if (!KEY_PATTERN.test(key) || key.includes('invalid') || key.endsWith('_revoked')) {
    throw unauthorized(`Invalid API Key provided: ${key.slice(0, 8)}****${key.slice(-4)}`);
  }
  return createHash('sha256').update(key).digest('hex');
}
