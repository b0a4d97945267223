import type { MobilemoneyCredentials } from '../../../contract/index.js';
import type { AppConfig } from '../../config/config.js';
import { callbackUrl } from '../../providers/base-url.js';
import { callbackToken } from '../../providers/mobilemoney/index.js';

/**
 * The addresses we give the operator. The operator does not sign its callbacks; in the sandbox env each
 * URL carries the id it is about and an HMAC of that id keyed by the merchant's passkey (decisions.md),
 * checked on arrival. In the live env the operator's RSA signature is checked instead.
 */
export function signedCallbackUrl(config: AppConfig, creds: MobilemoneyCredentials, subpath: string, ref: string): string {
  const url = new URL(callbackUrl(config, 'mobilemoney', subpath));
  url.searchParams.set('ref', ref);
  if (creds.env === 'sandbox') url.searchParams.set('token', callbackToken(creds.passkey, ref));
  return url.toString();
}
