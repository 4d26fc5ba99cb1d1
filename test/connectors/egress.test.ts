/**
 * The egress classifier (src/egress.ts) on examples of every range issue 19 names, the
 * addresses that stay callable, this machine's own addresses, the Snowflake account rule,
 * and the connection-time lookup given a name that resolves into a refused range.
 */
import assert from 'node:assert/strict';
import dns from 'node:dns';
import os from 'node:os';
import { describe, it, mock } from 'node:test';
import { baseUrlProblem, ownAddresses, privateHostReason, refusedAddressReason } from '../../src/egress.ts';
import { guardedLookup } from '../../src/connectors/http.ts';
import { EgressRefused } from '../../src/connectors/errors.ts';
import { accountProblem } from '../../src/connectors/snowflake-sql.ts';

const NONE = new Set<string>();
const refusedUrl = (url: string) => baseUrlProblem(url, false) !== undefined;

describe('the egress classifier', () => {
  it('refuses the documentation ranges, in any spelling the URL parser accepts', () => {
    for (const url of [
      'http://192.0.2.2:8080/',
      'http://192.0.2.255/',
      'http://198.51.100.7/',
      'http://203.0.113.9/x',
      'http://3221225986/', // 192.0.2.2 as one number
      'http://0xc0.0.2.2/',
      'http://0300.0.2.2/',
      'http://192.0.514/',
      'http://[::ffff:192.0.2.2]/',
      'http://[2001:db8::1]/',
      'http://[3fff::1]/',
    ]) {
      assert.ok(refusedUrl(url), url);
      assert.match(baseUrlProblem(url, false)!, /must not point at a loopback, private, link-local or reserved address/);
    }
  });

  it('refuses IPv6 forms that carry or reach an IPv4 or local address', () => {
    for (const url of [
      'http://[::127.0.0.1]/', // IPv4-compatible ::/96
      'http://[::8.8.8.8]/',
      'http://[::a00:1]/',
      'http://[64:ff9b::127.0.0.1]/', // NAT64 64:ff9b::/96
      'http://[64:ff9b::8.8.8.8]/',
      'http://[64:ff9b:1::a00:1]/', // local-use NAT64 64:ff9b:1::/48
      'http://[64:ff9b:1:ffff::1]/',
      'http://[2002:c0a8:101::1]/', // 6to4 of 192.168.1.1
      'http://[2002:7f00:1::]/', // 6to4 of 127.0.0.1
      'http://[2002:808:808::1]/', // 6to4 of 8.8.8.8: all 6to4
      'http://[::ffff:0:7f00:1]/', // ::ffff:0:0:0/96 translated
      'http://[::ffff:0:808:808]/',
      'http://[100::1]/', // 100::/64 discard
      'http://[100::ffff:ffff:ffff:ffff]/',
      'http://[::ffff:127.0.0.1]/', // IPv4-mapped of refused addresses
      'http://[::ffff:10.1.2.3]/',
      'http://[::ffff:169.254.169.254]/',
      'http://[2001::1]/', // Teredo
    ]) {
      assert.ok(refusedUrl(url), url);
    }
  });

  it('refuses every range ipaddr.js does not call unicast', () => {
    for (const address of [
      '0.0.0.0',
      '0.1.2.3',
      '10.0.0.1',
      '100.64.0.1',
      '127.0.0.1',
      '169.254.169.254',
      '172.16.0.1',
      '192.0.0.8',
      '192.88.99.1',
      '192.168.1.1',
      '198.18.0.1',
      '224.0.0.1',
      '240.0.0.1',
      '255.255.255.255',
      '192.175.48.1',
      '192.31.196.1',
      '192.52.193.1',
      '::',
      '::1',
      'fc00::1',
      'fd00::2',
      'fe80::1',
      'fec0::1',
      'ff02::1',
      '2001:2::1',
      '2001:3::1',
      '2001:4:112::1',
      '2620:4f:8000::1',
      '2001:10::1',
      '2001:20::1',
      '2001:30::1',
      '5f00::1',
    ]) {
      assert.equal(refusedAddressReason(address, NONE), 'a loopback, private, link-local or reserved address', address);
    }
  });

  it('lets public unicast addresses and names through, and an IPv4-mapped public address', () => {
    for (const url of [
      'https://api.example.com/v1',
      'http://8.8.8.8/',
      'http://1.1.1.1:8443/',
      'http://[2606:4700:4700::1111]/',
      'http://[::ffff:8.8.8.8]/',
      'http://93.184.216.34/',
    ]) {
      assert.equal(baseUrlProblem(url, false), undefined, url);
    }
  });

  it("refuses this machine's own interface addresses, whatever their range", () => {
    assert.equal(refusedAddressReason('8.8.8.8', new Set(['8.8.8.8'])), "an address of this machine's own interfaces");
    assert.equal(refusedAddressReason('::ffff:8.8.8.8', new Set(['8.8.8.8'])), "an address of this machine's own interfaces");
    assert.equal(refusedAddressReason('2606:4700::0:1', new Set(['2606:4700:0:0:0:0:0:1'])), "an address of this machine's own interfaces");
    assert.equal(privateHostReason('8.8.8.8', new Set(['8.8.8.8'])), "an address of this machine's own interfaces");
    // This machine's real interfaces, loopback at least: each is refused, as an address given in a URL or resolved.
    const interfaces = Object.values(os.networkInterfaces()).flatMap((list) => list ?? []);
    assert.ok(interfaces.length > 0 && ownAddresses().size > 0);
    for (const a of interfaces) {
      assert.notEqual(privateHostReason(a.family === 'IPv6' ? `[${a.address}]` : a.address), undefined, a.address);
      assert.notEqual(refusedAddressReason(a.address), undefined, a.address);
    }
  });

  it('keeps the local and metadata names refused', () => {
    for (const host of ['localhost', 'LOCALHOST.', 'a.localhost', 'metadata.google.internal', 'metadata', 'instance-data'])
      assert.notEqual(privateHostReason(host), undefined, host);
  });

  it('ALLOW_PRIVATE_EGRESS lets every address through, and still refuses what is not an http URL', () => {
    for (const url of ['http://127.0.0.1:9/', 'http://192.0.2.2/', 'http://[::127.0.0.1]/', 'http://localhost/'])
      assert.equal(baseUrlProblem(url, true), undefined, url);
    assert.match(baseUrlProblem('ftp://example.com/', true)!, /http or https/);
    assert.match(baseUrlProblem('http://u:p@example.com/', true)!, /credentials/);
  });
});

describe('a Snowflake account', () => {
  it('is an account identifier: never an address, a path, a port or a user', () => {
    assert.equal(accountProblem('xy12345.eu-central-1'), undefined);
    assert.equal(accountProblem('myorg-account_1'), undefined);
    for (const account of ['192.0.2.2', '10.0.0.1', '0x7f.1', '2130706433', '127.1', 'evil.com/x', 'evil.com:443', 'user@evil.com', '::1', '', '.x']) {
      assert.notEqual(accountProblem(account), undefined, account);
    }
    assert.match(accountProblem('192.0.2.2')!, /not an IP address/);
  });
});

describe('the connection-time lookup', () => {
  const fakeDns = (answers: Record<string, Array<{ address: string; family: number }>>) =>
    mock.method(dns, 'lookup', (hostname: string, _options: unknown, callback: (err: Error | null, addresses: unknown) => void) => {
      const list = answers[hostname];
      if (!list) return callback(Object.assign(new Error(`${hostname} unknown`), { code: 'ENOTFOUND' }), []);
      callback(null, list);
    });

  it('refuses a name when any address it resolves to is refused, with no address handed on', async () => {
    const m = fakeDns({
      'doc.example.test': [{ address: '192.0.2.2', family: 4 }],
      'mixed.example.test': [
        { address: '8.8.8.8', family: 4 },
        { address: '64:ff9b:1::a00:1', family: 6 },
      ],
      'compat.example.test': [{ address: '::7f00:1', family: 6 }],
      'public.example.test': [{ address: '8.8.4.4', family: 4 }],
    });
    try {
      const lookup = (name: string, all = false) =>
        new Promise<unknown>((resolve, reject) => guardedLookup(name, { all }, (err, address) => (err ? reject(err) : resolve(address))));
      for (const name of ['doc.example.test', 'mixed.example.test', 'compat.example.test']) {
        await assert.rejects(
          lookup(name),
          (err: unknown) => err instanceof EgressRefused && new RegExp(`${name} resolves to a loopback, private`).test(err.message),
          name,
        );
        await assert.rejects(lookup(name, true), EgressRefused, name);
      }
      assert.equal(await lookup('public.example.test'), '8.8.4.4');
    } finally {
      m.mock.restore();
    }
  });
});
