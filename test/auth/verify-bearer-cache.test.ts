/**
 * verifyBearer over remembered tokens (tokens.ts keeps verified signatures per signing key): a kept token is
 * still refused once it expires, under another signing key, or with any byte changed.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { verifyBearer } from '../../src/auth/principal.ts';
import { signToken, type TokenClaims } from '../../src/auth/tokens.ts';
import { uuidv7 } from '../../src/ids.ts';

const claims = (exp: number): TokenClaims => ({ sub: uuidv7(), org: uuidv7(), ws: uuidv7(), scp: ['webhooks'], exp, iat: Date.now() });
const refused = (f: () => unknown) => assert.throws(f, (e: any) => e.status === 401);

it('a kept token: the same claims again, refused from its expiry on', () => {
  const key = randomBytes(32);
  const c = claims(1_000);
  const token = signToken(key, c);
  assert.deepEqual(verifyBearer(key, `Bearer ${token}`, 10), c);
  assert.deepEqual(verifyBearer(key, `Bearer ${token}`, 999), c, 'from the cache');
  refused(() => verifyBearer(key, `Bearer ${token}`, 1_000));
});

it('a kept token under another signing key, or with one character changed, is refused', () => {
  const key = randomBytes(32);
  const token = signToken(key, claims(2_000_000_000));
  verifyBearer(key, `Bearer ${token}`, 10);
  refused(() => verifyBearer(randomBytes(32), `Bearer ${token}`, 10));
  for (const at of [10, token.length - 2, Math.floor(token.length / 2)]) {
    const c = token[at] === 'A' ? 'B' : 'A';
    refused(() => verifyBearer(key, `Bearer ${token.slice(0, at)}${c}${token.slice(at + 1)}`, 10));
  }
});

it('the claims a caller gets cannot change what the next request of the token gets', () => {
  const key = randomBytes(32);
  const token = signToken(key, claims(2_000_000_000));
  const first = verifyBearer(key, `Bearer ${token}`, 10);
  assert.throws(() => (first.scp as string[]).push('api_write'));
  assert.deepEqual(verifyBearer(key, `Bearer ${token}`, 10).scp, ['webhooks']);
});
