/**
 * Access tokens are signed, not stored: minting one is an HMAC, and every request reloads
 * the account anyway (see principal.ts), so a token only has to say who it was minted
 * for, which workspace and scopes it carried, and until when.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

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
}

const PREFIX = 'tbat_';

export function signToken(key: Buffer, claims: TokenClaims): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const mac = createHmac('sha256', key).update(payload).digest('base64url');
  return `${PREFIX}${payload}.${mac}`;
}

/** Returns the claims of a well-formed, correctly signed, unexpired token; otherwise undefined. */
export function verifyToken(key: Buffer, token: string, nowSeconds: number): TokenClaims | undefined {
  if (!token.startsWith(PREFIX) || token.length > 2048) return undefined;
  const dot = token.lastIndexOf('.');
  if (dot < 0) return undefined;
  const payload = token.slice(PREFIX.length, dot);
  const mac = Buffer.from(token.slice(dot + 1), 'base64url');
  const expected = createHmac('sha256', key).update(payload).digest();
  if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) return undefined;
  let claims: TokenClaims;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as TokenClaims;
  } catch {
    return undefined;
  }
  if (typeof claims.exp !== 'number' || claims.exp <= nowSeconds) return undefined;
  return claims;
}

export function isScope(s: string): s is Scope {
  return (SCOPES as readonly string[]).includes(s);
}
