import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { validationError } from '../errors.js';

/** True for an address on the public internet (not private, loopback, link-local, reserved, …). */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === 'unicast';
}

/**
 * Merchant webhook URLs must be https and resolve only to public addresses, unless configuration allows
 * private ones (development, tests). Checked when registered and again before every delivery, so a DNS
 * change cannot turn the delivery worker against the internal network.
 */
export async function assertDeliverableUrl(raw: string, allowPrivate: boolean, field = 'webhook_url'): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw validationError(field, 'must be an absolute URL');
  }
  if (url.username || url.password) throw validationError(field, 'must not contain credentials');
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    throw validationError(field, allowPrivate ? 'must use http or https' : 'must use https');
  }
  if (allowPrivate) return url;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = ipaddr.isValid(host) ? [host] : (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  } catch {
    throw validationError(field, `host ${host} does not resolve`);
  }
  if (addresses.length === 0 || !addresses.every(isPublicAddress)) {
    throw validationError(field, 'must resolve to a public address');
  }
  return url;
}
