/**
 * Access tokens are signed, not stored: minting one is an HMAC, and every request reloads
 * the account anyway (see principal.ts), so a token only has to say who it was minted
 * for, which workspace and scopes it carried, and until when.
 */
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import { SECRET_PREFIX } from '../secrets.ts';
import { boundedMap, type BoundedMap } from '../bounded-map.ts';

export const SCOPES = ['webhooks', 'api_read', 'api_write', 'embed'] as const;
export type Scope = (typeof SCOPES)[number];

export interface TokenClaims {
  /** service account id */
  sub: string;
  org: string;
  ws: string;
  scp: Scope[];
  /** expiry, unix seconds */
  exp: number;
  /** minted at, unix milliseconds (compared with the account's tokens_not_before) */
  iat: number;
}

const PREFIX = SECRET_PREFIX.accessToken;

// createHmac with a Buffer key first asks "is this a KeyObject? a CryptoKey?", and Node 24
// answers each by throwing and catching an exception (with its stack trace), which costs
// several times the HMAC itself. A KeyObject skips both checks; build it once per key.
const hmacKeys = new WeakMap<Buffer, KeyObject>();

function hmacKey(key: Buffer): KeyObject {
  let k = hmacKeys.get(key);
  if (k === undefined) {
    k = createSecretKey(key);
    hmacKeys.set(key, k);
  }
  return k;
}

export function signToken(key: Buffer, claims: TokenClaims): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const mac = createHmac('sha256', hmacKey(key)).update(payload).digest('base64url');
  return `${PREFIX}${payload}.${mac}`;
}

/**
 * Tokens whose signature was verified, per signing key: a client sends the same token on
 * every request until it expires, and the HMAC and JSON parse of it are a visible share of
 * a small read. Only the signature check is remembered: expiry is compared on every use,
 * and revocation never depended on it (every request re-reads the account, principal.ts).
 * Only correctly signed tokens enter, so a client cannot fill it with junk; bounded anyway.
 */
const verified = new WeakMap<Buffer, BoundedMap<string, Readonly<TokenClaims>>>();
const MAX_VERIFIED = 10_000;

/** Returns the claims of a well-formed, correctly signed, unexpired token; otherwise undefined. */
export function verifyToken(key: Buffer, token: string, nowSeconds: number): TokenClaims | undefined {
  let known = verified.get(key);
  const hit = known?.get(token);
  if (hit !== undefined) return hit.exp <= nowSeconds ? undefined : hit;
  const claims = verifySignature(key, token);
  if (claims === undefined || claims.exp <= nowSeconds) return undefined;
  if (known === undefined) {
    known = boundedMap(MAX_VERIFIED);
    verified.set(key, known);
  }
  // Frozen, its scopes too: every request of the token shares this object.
  const kept: TokenClaims = Object.freeze({ ...claims, scp: Object.freeze([...claims.scp]) as TokenClaims['scp'] });
  known.set(token, kept);
  return kept;
}

function verifySignature(key: Buffer, token: string): TokenClaims | undefined {
  if (!token.startsWith(PREFIX) || token.length > 2048) return undefined;
  const dot = token.lastIndexOf('.');
  if (dot < 0) return undefined;
  const payload = token.slice(PREFIX.length, dot);
  const mac = Buffer.from(token.slice(dot + 1), 'base64url');
  const expected = createHmac('sha256', hmacKey(key)).update(payload).digest();
  if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return undefined;
  let claims: TokenClaims;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as TokenClaims;
  } catch {
    return undefined;
  }
  if (claims === null || typeof claims !== 'object' || typeof claims.exp !== 'number' || typeof claims.iat !== 'number') return undefined;
  return claims;
}

export function isScope(s: string): s is Scope {
  return (SCOPES as readonly string[]).includes(s);
}

/** Whether a token that verifyToken refuses is one of ours that only ran out (so the caller may say "expired", not "invalid"). */
export function tokenExpired(key: Buffer, token: string, nowSeconds: number): boolean {
  const claims = verifyToken(key, token, 0);
  return claims !== undefined && claims.exp <= nowSeconds;
}
