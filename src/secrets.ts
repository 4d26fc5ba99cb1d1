import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The prefixes that mark our secrets. Every secret we mint starts with one of these, which is
 * what lets log redaction (src/log.ts) find a secret wherever a client put it: a new kind of
 * secret gets its prefix here and is redacted from then on.
 */
export const SECRET_PREFIX = {
  accessToken: 'tbat_',
  clientSecret: 'tbcs_',
  adminToken: 'tbadm_',
  triggerToken: 'tbwh_',
} as const;

/** 256 bits of randomness, base64url: client secrets, admin tokens, trigger tokens. */
export function randomSecret(prefix = ''): string {
  return prefix + randomBytes(32).toString('base64url');
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Constant-time comparison of a presented secret with a stored SHA-256 hex digest. */
export function matchesHash(presented: string, storedHex: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = Buffer.from(storedHex, 'hex');
  return b.length === a.length && timingSafeEqual(a, b);
}

/** Constant-time comparison of two secrets of any length (both are hashed first). */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}
