/**
 * verifyToken remembers a verified signature per signing key: expiry is still compared on
 * every use, another key never accepts a remembered token, and a tampered token is refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { signToken, verifyToken, type TokenClaims } from '../../src/auth/tokens.ts';

const claims = (exp: number): TokenClaims => ({ sub: randomUUID(), org: randomUUID(), ws: randomUUID(), scp: ['api_read'], exp, iat: Date.now() });

test('a remembered token still expires, and only its own key accepts it', () => {
  const key = randomBytes(32);
  const other = randomBytes(32);
  const c = claims(1_000);
  const token = signToken(key, c);
  assert.deepEqual(verifyToken(key, token, 999), c);
  // Remembered now: the same answer again, then refused once its expiry has passed.
  assert.deepEqual(verifyToken(key, token, 999), c);
  assert.equal(verifyToken(key, token, 1_000), undefined);
  assert.equal(verifyToken(key, token, 5_000), undefined);
  assert.equal(verifyToken(other, token, 999), undefined);
  // A changed signature or payload is never the remembered token.
  const tampered = token.slice(0, -2) + (token.endsWith('AA') ? 'AB' : 'AA');
  assert.equal(verifyToken(key, tampered, 999), undefined);
});

test('a token first seen expired is refused, and later checks stay refused', () => {
  const key = randomBytes(32);
  const token = signToken(key, claims(100));
  assert.equal(verifyToken(key, token, 200), undefined);
  assert.equal(verifyToken(key, token, 200), undefined);
  assert.notEqual(verifyToken(key, token, 50), undefined);
});
