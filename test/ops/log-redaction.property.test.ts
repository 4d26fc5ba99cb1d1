/**
 * Properties of log redaction (src/log.ts): any text holding a secret-shaped substring comes
 * out without it, whatever surrounds it; a redacted JSON line is still JSON; redaction reaches
 * messages, child bindings and serialized errors of any logger; the readable format says the
 * same as the JSON line.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { createLogger, prettyLine, redactSecrets } from '../../src/log.ts';
import { looksLikeSecret, randomSecret, SECRET_PREFIX } from '../../src/secrets.ts';
import { signToken } from '../../src/auth/tokens.ts';

const PREFIXES = Object.values(SECRET_PREFIX);
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** A secret as we mint them: a prefix, then base64url, with an optional dotted part (access tokens). */
const secretArb = fc
  .tuple(
    fc.constantFrom(...PREFIXES),
    fc.string({ unit: fc.constantFrom(...B64URL), minLength: 1, maxLength: 200 }),
    fc.option(fc.string({ unit: fc.constantFrom(...B64URL), minLength: 0, maxLength: 60 }), { nil: undefined }),
  )
  .map(([prefix, body, mac]) => (mac === undefined ? `${prefix}${body}` : `${prefix}${body}.${mac}`));

const textArb = fc.string({
  unit: fc.oneof(
    fc.constantFrom(...'/?&=[]"\\ .%_-tbacdms'),
    fc.string({ minLength: 1, maxLength: 1, unit: 'binary' }),
    fc.constantFrom('\u00e9', '\n', '\u2028'),
  ),
  maxLength: 40,
});

test('any text holding a secret comes out without it, still holding the rest', () => {
  fc.assert(
    fc.property(textArb, secretArb, textArb, (before, secret, after) => {
      const out = redactSecrets(before + secret + after);
      assert.ok(!out.includes(secret), out);
      assert.ok(out.includes('[redacted]'), out);
      assert.equal(redactSecrets(out), out, 'redaction is stable');
      assert.ok(looksLikeSecret(before + secret + after));
    }),
    { numRuns: 3000 },
  );
});

test('a redacted JSON line is still JSON, with the secret gone from every value', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(textArb, secretArb, textArb), { minLength: 1, maxLength: 4 }), (parts) => {
      const value = parts.map(([a, s, b]) => a + s + b);
      const line = JSON.stringify({ msg: value[0], url: value.join('&'), nested: { list: value } });
      const out = JSON.parse(redactSecrets(line)) as { msg: string; url: string; nested: { list: string[] } };
      for (const [, s] of parts) assert.ok(![out.msg, out.url, ...out.nested.list].some((v) => v.includes(s)));
    }),
    { numRuns: 1000 },
  );
});

test('text without a secret prefix is left as it is', () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 200 }), (text) => {
      fc.pre(!PREFIXES.some((p) => text.includes(p)));
      assert.equal(redactSecrets(text), text);
    }),
  );
  for (const ok of ['tbci_abc', 'tbat_', 'tbat_[redacted]', '0190a4f2-7c1e-7e3a-9c1d-2b3c4d5e6f70', 'trace-0190a4f2.7']) assert.equal(redactSecrets(ok), ok);
});

test('what counts as looking like a secret', () => {
  assert.ok(looksLikeSecret(randomSecret()), 'a random secret without its prefix');
  assert.ok(looksLikeSecret(`id-${signToken(Buffer.alloc(32, 1), { sub: 's', org: 'o', ws: 'w', scp: [], exp: 1, iat: 1 })}`));
  // Keys of other systems in hex: after a prefix, or long.
  const hex = '0c264f1e9a7b3d5c8e2f4a6b1d3c5e7f9a0b2c4d6e8f0a1b3c5d7e9f1a2b3c4d';
  for (const key of [`ak_${hex.slice(0, 32)}`, `sk_live_${hex.slice(0, 24)}`, `x-${hex.slice(0, 40)}`, hex, hex.toUpperCase()])
    assert.ok(looksLikeSecret(key), key);
  for (const id of [
    '0190a4f2-7c1e-7e3a-9c1d-2b3c4d5e6f70',
    '0190A4F2-7C1E-7E3A-9C1D-2B3C4D5E6F70',
    '4bf92f3577b34da6a3ce929d0e0e4736',
    'req-42',
    'a'.repeat(64),
    'order_1234567890123456789',
    'run_deadbeef',
  ]) {
    assert.ok(!looksLikeSecret(id), id);
  }
});

function capture(format: 'json' | 'pretty') {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  return { log: createLogger({ logLevel: 'info', logFormat: format }, stream), lines };
}

test('messages, bindings of child loggers and serialized errors are redacted, in both formats', () => {
  for (const format of ['json', 'pretty'] as const) {
    const secret = randomSecret(SECRET_PREFIX.clientSecret);
    const { log, lines } = capture(format);
    const child = log.child({ reqId: secret }).child({}, { serializers: { extra: (v: string) => ({ v }) } });
    child.info(`message ${secret}`);
    child.info({ extra: `x/${secret}`, deep: { a: [secret] } }, 'fields');
    const err = new Error(`bad filter value ${secret}`);
    (err as Error & { detail?: string }).detail = secret;
    child.error({ err }, 'failed');
    assert.equal(lines.length, 3);
    for (const line of lines) {
      assert.ok(!line.includes(secret.slice(5)), line);
      assert.match(line, /tbcs_\[redacted\]/);
    }
  }
});

test('the readable format: ISO time, level, message, fields, an error stack below', () => {
  const { log, lines } = capture('pretty');
  log.child({ reqId: 'r1' }).info({ req: { method: 'GET', url: '/x?a=[redacted]' }, n: 3, s: 'two words' }, 'request completed');
  assert.match(
    lines[0]!,
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z INFO {2}request completed reqId=r1 req\.method=GET req\.url=\/x\?a=\[redacted\] n=3 s="two words"\n$/,
  );
  log.error({ err: new Error('boom') }, 'failed');
  assert.match(lines[1]!, /ERROR failed\n {4}Error: boom\n {8}at /);
  assert.equal(prettyLine('not json\n'), 'not json\n');
});
