import type { LookupAddress } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { validationError } from '../errors.js';

const cidrs = (list: string[]) => list.map((c) => ipaddr.parseCIDR(c));

/**
 * IPv4 blocks that are not globally reachable (IANA special-purpose registry): this network, private,
 * shared (CGNAT), loopback, link-local, IETF protocol assignments, documentation, 6to4 relay anycast,
 * benchmarking, multicast, reserved and broadcast.
 */
const IPV4_NON_GLOBAL = cidrs([
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24',
  '192.0.2.0/24', '192.31.196.0/24', '192.52.193.0/24', '192.88.99.0/24', '192.168.0.0/16', '192.175.48.0/24',
  '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4',
]);

/** Only 2000::/3 is global unicast; inside it these are not (protocol assignments incl. Teredo, documentation). */
const IPV6_GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');
const IPV6_NON_GLOBAL = cidrs(['2001::/23', '2001:db8::/32', '3fff::/20']);
/** Prefixes that carry an IPv4 address in their low bits: the IPv4 address decides. */
const IPV4_MAPPED = ipaddr.parseCIDR('::ffff:0:0/96');
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');

const inAny = (address: ipaddr.IPv4 | ipaddr.IPv6, ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][]) =>
  ranges.some(([network, bits]) => address.kind() === network.kind() && address.match(network, bits));

function isGlobalIPv4(address: ipaddr.IPv4): boolean {
  return !inAny(address, IPV4_NON_GLOBAL);
}

function embeddedIPv4(bytes: number[], offset: number): ipaddr.IPv4 {
  return new ipaddr.IPv4(bytes.slice(offset, offset + 4));
}

function isGlobalIPv6(address: ipaddr.IPv6): boolean {
  const bytes = address.toByteArray();
  // An IPv4-mapped or NAT64 address reaches the embedded IPv4 address; a 6to4 one is routed to it.
  if (address.match(IPV4_MAPPED)) return isGlobalIPv4(embeddedIPv4(bytes, 12));
  if (address.match(NAT64_WELL_KNOWN)) return isGlobalIPv4(embeddedIPv4(bytes, 12));
  if (address.match(SIX_TO_FOUR)) return isGlobalIPv4(embeddedIPv4(bytes, 2));
  // Everything outside 2000::/3 — ::/96 (IPv4-compatible), ::1, ULA, link-local, multicast, local NAT64,
  // SIIT, discard, segment routing — is refused, as are the non-global blocks inside it.
  return address.match(IPV6_GLOBAL_UNICAST) && !inAny(address, IPV6_NON_GLOBAL);
}

/**
 * True only for a globally routable unicast address. An allowlist, not a denylist of ipaddr's named
 * ranges: any block the registry does not mark global (or that embeds a non-global IPv4 address) is refused.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  return parsed.kind() === 'ipv4' ? isGlobalIPv4(parsed as ipaddr.IPv4) : isGlobalIPv6(parsed as ipaddr.IPv6);
}

/**
 * The part of the policy that needs no lookup: an absolute URL without credentials, https (or http when
 * private addresses are allowed). Before each webhook attempt this is all that is checked ahead of the
 * request: the sender refuses a non-public address literal itself, and resolves every new connection's
 * host through a lookup that refuses non-public addresses, inside the attempt's timeout.
 */
export function assertUrlShape(raw: string, allowPrivate: boolean, field = 'webhook_url'): URL {
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
  return url;
}

/**
 * Resolves a merchant's host: MerchantHostResolver (merchant-host-resolver.ts), not `dns.lookup`, whose
 * threads a merchant's unanswered lookups would take from every other lookup of the process.
 */
export interface HostResolver {
  lookup(merchantId: string, host: string): Promise<LookupAddress[]>;
}

/** Whether private addresses are allowed, and, when not, how to resolve the host and for whom. */
export interface UrlPolicy {
  allowPrivate: boolean;
  hosts: HostResolver;
  merchantId: string;
}

/**
 * The one policy for every URL the service or a provider will call (merchant webhook URL, a payment's
 * mobile-money callback_url, register-pull's callback_url): https and only public addresses, unless
 * configuration allows private ones (development, tests, the sandbox). Before every delivery the URL's
 * shape is checked again (assertUrlShape) and the sender checks the address it connects to, so a DNS
 * change cannot turn the delivery worker against the internal network.
 */
export async function assertDeliverableUrl(raw: string, policy: UrlPolicy, field = 'webhook_url'): Promise<URL> {
  const url = assertUrlShape(raw, policy.allowPrivate, field);
  if (policy.allowPrivate) return url;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = ipaddr.isValid(host) ? [host] : (await policy.hosts.lookup(policy.merchantId, host)).map((a) => a.address);
  } catch {
    addresses = [];
  }
  // One answer for "no such host" and "a private host": otherwise a merchant could map which internal
  // names (postgres, *.svc.cluster.local) the service's resolver knows.
  if (addresses.length === 0 || !addresses.every(isPublicAddress)) {
    throw validationError(field, `host ${host} must resolve to a public address`);
  }
  return url;
}
