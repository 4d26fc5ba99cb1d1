/**
 * Where the service may send requests on a caller's behalf. A URL naming a loopback,
 * private, link-local, shared, multicast or cloud-metadata address, in any spelling the
 * URL standard accepts (decimal, octal, hex or short IPv4, IPv4-mapped or NAT64 IPv6,
 * trailing dots), is refused unless ALLOW_PRIVATE_EGRESS=true. This checks the URL as
 * written; a name that resolves to such an address is refused where the connection is made.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

const BLOCKED_NAMES = new Set(['localhost', 'metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data']);

/** The IPv4 address an IPv6 address carries (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96), if any. */
function embeddedIPv4(v6: string): string | undefined {
  const words = expandIPv6(v6);
  if (words === undefined) return undefined;
  const mapped = words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff;
  const nat64 = words[0] === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((w) => w === 0);
  if (!mapped && !nat64) return undefined;
  return [words[6]! >> 8, words[6]! & 0xff, words[7]! >> 8, words[7]! & 0xff].join('.');
}

function expandIPv6(v6: string): number[] | undefined {
  let text = v6;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number);
    text = `${text.slice(0, dotted.index)}${((a! << 8) | b!).toString(16)}:${((c! << 8) | d!).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const parse = (s: string | undefined) => (s ? s.split(':').map((w) => parseInt(w, 16)) : []);
  const h = parse(head);
  const t = parse(tail);
  const words = tail === undefined ? h : [...h, ...new Array(8 - h.length - t.length).fill(0), ...t];
  return words.length === 8 && words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : undefined;
}

/** Why the host may not be called, or undefined when it may. `host` is a URL's hostname. */
export function privateHostReason(host: string): string | undefined {
  const name = host.toLowerCase().replace(/\.+$/, '');
  const bare = name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name;
  if (isIPv4(bare)) return blocked.check(bare, 'ipv4') ? 'a loopback, private, link-local or reserved address' : undefined;
  if (isIPv6(bare)) {
    const v4 = embeddedIPv4(bare);
    if (v4 !== undefined) return blocked.check(v4, 'ipv4') ? 'a loopback, private, link-local or reserved address' : undefined;
    return blocked.check(bare, 'ipv6') ? 'a loopback, private, link-local or reserved address' : undefined;
  }
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
