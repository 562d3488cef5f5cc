import { BlockList, isIP, isIPv6 } from 'node:net';
import { ArgumentError, ConfigError } from '@tiered-limiter/core';
import { DEFAULT_IPV6_SUBNET } from './defaults.js';

const MAPPED_V4 = /^::ffff:(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/i;

/**
 * An address as a key: IPv4 as it is; IPv6 cut to its first `ipv6Subnet` bits and written as a
 * network, `2001:db8:0:ab00::/56`, because one IPv6 client commonly holds a whole /64 or /56 and
 * can take a fresh address per request. An IPv4 address in IPv6 form (`::ffff:192.0.2.1`, or
 * `::ffff:c000:201`) is given as IPv4, so a client has one key whichever way it connected.
 * Anything that is not an IP address (`'unknown'`) comes back unchanged.
 *
 * @example
 * ipKey('2001:db8:0:abcd::1'); // '2001:db8:0:ab00::/56'
 * ipKey('2001:db8:0:abcd::1', 64); // '2001:db8:0:abcd::/64'
 * ipKey('::ffff:203.0.113.7'); // '203.0.113.7'
 */
export function ipKey(address: string, ipv6Subnet: number | false = DEFAULT_IPV6_SUBNET): string {
  // The middleware checks its own option; a caller's `ipKey(ip, 0)` or `-1` keyed every IPv6
  // client as `::/0` (one bucket for all of them), and 200 or NaN wrote a prefix no network has.
  if (ipv6Subnet !== false && !(Number.isInteger(ipv6Subnet) && ipv6Subnet >= 1 && ipv6Subnet <= 128)) {
    throw new ArgumentError('ipv6Subnet', ipv6Subnet, 'a whole number from 1 to 128, or false');
  }
  const mapped = MAPPED_V4.exec(address);
  if (mapped) return mapped[1]!;
  if (!isIPv6(address)) return address;
  const groups = ipv6Groups(address);
  if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0) {
    if (groups[5] === 0xffff)
      return `${groups[6]! >> 8}.${groups[6]! & 255}.${groups[7]! >> 8}.${groups[7]! & 255}`;
  }
  if (ipv6Subnet === false || ipv6Subnet === 128) return formatIPv6(groups);
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, ipv6Subnet - i * 16));
    groups[i] = keep === 0 ? 0 : groups[i]! & ((0xffff << (16 - keep)) & 0xffff);
  }
  return `${formatIPv6(groups)}/${ipv6Subnet}`;
}

/** The eight 16-bit groups of a valid IPv6 address (zone dropped, an IPv4 tail converted). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const zone = text.indexOf('%');
  if (zone !== -1) text = text.slice(0, zone);
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)));
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/** RFC 5952 text: lower case, no leading zeros, the longest run of two or more zero groups as `::`. */
function formatIPv6(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let end = i;
    while (end < 8 && groups[end] === 0) end++;
    if (end - i > bestLength) {
      bestStart = i;
      bestLength = end - i;
    }
    i = end;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart === -1) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}

/**
 * Addresses and networks that are never limited (`allowList`): IPv4 or IPv6 addresses and CIDR
 * ranges, checked with Node's `BlockList`. Throws a `ConfigError` naming the entry it cannot read.
 */
export class AllowList {
  readonly #list = new BlockList();

  constructor(entries: unknown) {
    if (!Array.isArray(entries)) {
      throw new ConfigError('allowList', entries, "an array of IP addresses or CIDR ranges ('10.0.0.0/8')");
    }
    entries.forEach((entry: unknown, i) => {
      const [address, bits, extra] = typeof entry === 'string' ? entry.split('/') : [];
      const family = address === undefined ? 0 : isIP(address);
      const prefix = bits === undefined ? undefined : Number(bits);
      const max = family === 6 ? 128 : 32;
      if (
        family === 0 ||
        extra !== undefined ||
        (prefix !== undefined && !(Number.isInteger(prefix) && prefix >= 0 && prefix <= max && bits !== ''))
      ) {
        throw new ConfigError(
          `allowList[${i}]`,
          entry,
          "an IP address or a CIDR range ('10.0.0.0/8', '2001:db8::/32')",
        );
      }
      const type = family === 6 ? 'ipv6' : 'ipv4';
      if (prefix === undefined) this.#list.addAddress(address!, type);
      else this.#list.addSubnet(address!, prefix, type);
    });
  }

  /** Whether `address` (as `clientIp` gives it) is on the list. */
  has(address: string): boolean {
    const family = isIP(address);
    if (family === 0) return false;
    return this.#list.check(address, family === 6 ? 'ipv6' : 'ipv4');
  }
}
