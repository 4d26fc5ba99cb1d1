/**
 * Properties of the egress classifier: a refused IPv4 address is refused in every spelling
 * the URL parser accepts and inside every IPv6 form that carries it; the IPv6 forms that
 * carry an IPv4 address (other than IPv4-mapped) are refused whatever that address is;
 * an IPv4-mapped address is judged as the address it maps; the named IPv6 ranges are
 * refused whatever the host bits; ALLOW_PRIVATE_EGRESS lifts every address rule.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { baseUrlProblem, refusedAddressReason } from '../../src/egress.ts';
import { runs } from '../helpers/property.ts';

const NONE = new Set<string>();
const octets = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255));
const dotted = (o: number[]) => o.join('.');
const toInt = (o: number[]) => ((o[0]! << 24) >>> 0) + (o[1]! << 16) + (o[2]! << 8) + o[3]!;
const hex16 = (hi: number, lo: number) => ((hi << 8) | lo).toString(16);

/** The same IPv4 address written every way a URL may write it. */
function spellings(o: number[]): string[] {
  const n = toInt(o);
  return [
    dotted(o),
    String(n),
    `0x${n.toString(16)}`,
    `0${n.toString(8)}`,
    o.map((x) => `0x${x.toString(16)}`).join('.'),
    `${o[0]}.${(o[1]! << 16) + (o[2]! << 8) + o[3]!}`,
    `${o[0]}.${o[1]}.${(o[2]! << 8) + o[3]!}`,
    `${dotted(o)}.`,
    `[::ffff:${dotted(o)}]`,
    `[::ffff:${hex16(o[0]!, o[1]!)}:${hex16(o[2]!, o[3]!)}]`,
  ];
}

/** IPv6 forms that carry the address and are refused whatever it is. */
const carriers = (o: number[]) => [
  `[::${dotted(o)}]`,
  `[64:ff9b::${dotted(o)}]`,
  `[64:ff9b:1::${dotted(o)}]`,
  `[2002:${hex16(o[0]!, o[1]!)}:${hex16(o[2]!, o[3]!)}::1]`,
  `[::ffff:0:${dotted(o)}]`,
];

/** Addresses inside the refused IPv4 ranges issue 19 names, plus the classic private ones. */
const refusedV4 = fc.oneof(
  ...[
    [192, 0, 2],
    [198, 51, 100],
    [203, 0, 113],
  ].map((p) => fc.nat(255).map((x) => [...p, x])),
  fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255)).map(([a, b, c]) => [127, a, b, c]),
  fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255)).map(([a, b, c]) => [10, a, b, c]),
  fc.tuple(fc.nat(255), fc.nat(255)).map(([a, b]) => [169, 254, a, b]),
  fc.tuple(fc.nat(15), fc.nat(255), fc.nat(255)).map(([a, b, c]) => [172, 16 + a, b, c]),
  fc.tuple(fc.nat(63), fc.nat(255), fc.nat(255)).map(([a, b, c]) => [100, 64 + a, b, c]),
  fc.tuple(fc.nat(31), fc.nat(255), fc.nat(255), fc.nat(255)).map(([a, b, c, d]) => [224 + a, b, c, d]),
);

test('a refused IPv4 address is refused in every spelling and inside every IPv6 form', () => {
  fc.assert(
    fc.property(refusedV4, (o) => {
      assert.notEqual(refusedAddressReason(dotted(o), NONE), undefined);
      for (const host of [...spellings(o), ...carriers(o)]) assert.notEqual(baseUrlProblem(`http://${host}:8080/x`, false), undefined, host);
    }),
    { numRuns: runs(500) },
  );
});

test('every spelling of any IPv4 address, IPv4-mapped included, is judged as the address', () => {
  fc.assert(
    fc.property(octets, (o) => {
      const expected = refusedAddressReason(dotted(o), NONE) === undefined;
      for (const host of spellings(o)) assert.equal(baseUrlProblem(`http://${host}/`, false) === undefined, expected, host);
    }),
    { numRuns: runs(1000) },
  );
});

test('IPv4-compatible, NAT64, 6to4 and translated forms are refused whatever address they carry', () => {
  fc.assert(
    fc.property(octets, (o) => {
      for (const host of carriers(o)) assert.notEqual(baseUrlProblem(`https://${host}/`, false), undefined, host);
    }),
    { numRuns: runs(1000) },
  );
});

const word = fc.nat(0xffff).map((w) => w.toString(16));

test('the named IPv6 ranges are refused whatever the host bits', () => {
  const inRange = fc.oneof(
    fc.array(word, { minLength: 4, maxLength: 4 }).map((w) => `100::${w.join(':')}`), // discard 100::/64
    fc.array(word, { minLength: 6, maxLength: 6 }).map((w) => `2001:db8:${w.join(':')}`), // documentation
    fc.array(word, { minLength: 7, maxLength: 7 }).map((w) => `fd${w[0]!.padStart(4, '0').slice(2)}:${w.slice(1).join(':')}:0`), // unique local
    fc.array(word, { minLength: 4, maxLength: 4 }).map((w) => `fe80::${w.join(':')}`), // link-local
    fc.array(word, { minLength: 5, maxLength: 5 }).map((w) => `64:ff9b:1:${w.join(':')}`), // local-use NAT64
    fc.array(word, { minLength: 7, maxLength: 7 }).map((w) => `2002:${w.join(':')}`), // 6to4
    fc.array(word, { minLength: 7, maxLength: 7 }).map((w) => `ff${w[0]!.padStart(4, '0').slice(2)}:${w.slice(1).join(':')}:1`), // multicast
  );
  fc.assert(
    fc.property(inRange, (address) => {
      assert.notEqual(refusedAddressReason(address, NONE), undefined, address);
      assert.notEqual(baseUrlProblem(`http://[${address}]/`, false), undefined, address);
    }),
    { numRuns: runs(1000) },
  );
});

test('ALLOW_PRIVATE_EGRESS lets every address through', () => {
  fc.assert(
    fc.property(octets, (o) => {
      for (const host of [...spellings(o), ...carriers(o)]) assert.equal(baseUrlProblem(`http://${host}/`, true), undefined, host);
    }),
    { numRuns: runs(300) },
  );
});
