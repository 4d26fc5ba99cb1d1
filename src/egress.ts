/**
 * Where the service may send requests on a caller's behalf. An address is callable only
 * when ipaddr.js classifies it as plain unicast (so loopback, private, link-local, shared,
 * documentation, benchmarking, multicast, reserved and the other special ranges are not),
 * it is not one of this machine's own addresses, and, for IPv6, it carries no IPv4 address
 * that could be reached through it (IPv4-compatible ::/96, NAT64, 6to4, Teredo, translated);
 * an IPv4-mapped address is judged by the IPv4 address it maps. Local and cloud-metadata
 * names are refused too. ALLOW_PRIVATE_EGRESS=true lifts every rule.
 *
 * A URL is checked as written (the URL parser has already turned decimal, octal, hex or
 * short IPv4 into dotted form); a name that resolves to a refused address is refused where
 * the connection is made (connectors/http.ts, guardedLookup).
 */
import { isIPv4, isIPv6 } from 'node:net';
import os from 'node:os';
import ipaddr from 'ipaddr.js';

const BLOCKED_NAMES = new Set(['localhost', 'metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data']);

const REFUSED_RANGE = 'a loopback, private, link-local or reserved address';
const OWN_ADDRESS = "an address of this machine's own interfaces";

/**
 * The addresses of this machine's interfaces, whatever their range: a service listening on
 * one (bound to 0.0.0.0) is reachable there even when the address is public. Read at each
 * check, since interfaces come and go; getifaddrs is cheap next to a connection.
 */
export function ownAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) {
      const parsed = parseAddress(a.address);
      if (parsed) out.add(parsed.toNormalizedString());
    }
  }
  return out;
}

function parseAddress(text: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (!isIPv4(text) && !isIPv6(text)) return undefined;
  try {
    const a = ipaddr.parse(text);
    if (a.kind() === 'ipv6') delete (a as ipaddr.IPv6).zoneId;
    return a;
  } catch {
    return undefined;
  }
}

/** The first 96 bits zero: IPv4-compatible (deprecated), including :: and ::1. */
const ipv4Compatible = (a: ipaddr.IPv6) => a.parts.slice(0, 6).every((w) => w === 0);

/**
 * Why an IP address (as text, IPv4 dotted or IPv6 without brackets) may not be called, or
 * undefined when it may; `own` is this machine's addresses (read when not given).
 */
export function refusedAddressReason(address: string, own?: ReadonlySet<string>): string | undefined {
  const parsed = parseAddress(address);
  if (parsed === undefined) return undefined;
  let a: ipaddr.IPv4 | ipaddr.IPv6 = parsed;
  if (a.kind() === 'ipv6') {
    const v6 = a as ipaddr.IPv6;
    // Mapped addresses are how a dual-stack socket spells IPv4: judge the IPv4 address.
    if (v6.isIPv4MappedAddress()) a = v6.toIPv4Address();
    else if (ipv4Compatible(v6)) return REFUSED_RANGE;
  }
  if (a.range() !== 'unicast') return REFUSED_RANGE;
  if ((own ?? ownAddresses()).has(a.toNormalizedString())) return OWN_ADDRESS;
  return undefined;
}

/** Why the host may not be called, or undefined when it may. `host` is a URL's hostname or a resolved address. */
export function privateHostReason(host: string, own?: ReadonlySet<string>): string | undefined {
  const name = host.toLowerCase().replace(/\.+$/, '');
  const bare = name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name;
  if (isIPv4(bare) || isIPv6(bare)) return refusedAddressReason(bare, own);
  if (BLOCKED_NAMES.has(name) || name.endsWith('.localhost')) return 'a local or metadata host name';
  return undefined;
}

/**
 * Checks a base URL a caller gave: an absolute http(s) URL without credentials, whose host
 * is not private (unless allowed). Returns why it is refused, or undefined.
 */
export function baseUrlProblem(value: string, allowPrivate: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an absolute URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http or https URL';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials; give them as the connector secret';
  if (allowPrivate) return undefined;
  const reason = privateHostReason(url.hostname);
  return reason === undefined ? undefined : `must not point at ${reason} (set ALLOW_PRIVATE_EGRESS=true to allow it)`;
}
