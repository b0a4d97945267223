import ipaddr from 'ipaddr.js';

/** One allowlist entry: a range (a single address is a full-length prefix), IPv4-mapped IPv6 forms taken as IPv4. */
export interface AllowlistRange {
  base: ipaddr.IPv4 | ipaddr.IPv6;
  prefix: number;
}

/**
 * Parses an allowlist entry, an address or a CIDR ("196.201.214.200", "196.201.212.0/24",
 * "2001:db8::/32"), or throws. IPv4 must be written as four decimal parts: ipaddr.js would also
 * read "196.201.214" (a typo) as 196.201.0.214. Shared by the configuration, which refuses a bad
 * entry at boot, and the callback check, which matches sources against the parsed ranges.
 */
export function parseAllowlistEntry(entry: string): AllowlistRange {
  const text = entry.trim();
  const [address = '', bits, ...rest] = text.split('/');
  if (rest.length > 0 || (address.includes('.') && !address.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(address))) {
    throw new Error(`not an IP address or CIDR: "${entry}"`);
  }
  if (bits === undefined) {
    let base: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      base = ipaddr.process(address);
    } catch {
      throw new Error(`not an IP address or CIDR: "${entry}"`);
    }
    return { base, prefix: base.kind() === 'ipv4' ? 32 : 128 };
  }
  let range: [ipaddr.IPv4 | ipaddr.IPv6, number];
  try {
    range = ipaddr.parseCIDR(text);
  } catch {
    throw new Error(`not an IP address or CIDR: "${entry}"`);
  }
  const [base, prefix] = range;
  if (base.kind() === 'ipv6' && (base as ipaddr.IPv6).isIPv4MappedAddress() && prefix >= 96) {
    return { base: (base as ipaddr.IPv6).toIPv4Address(), prefix: prefix - 96 };
  }
  return { base, prefix };
}

/** Whether `address` (as ipaddr.process gives it) lies in `range`. */
export function inAllowlistRange(address: ipaddr.IPv4 | ipaddr.IPv6, range: AllowlistRange): boolean {
  return address.kind() === range.base.kind() && address.match(range.base, range.prefix);
}
