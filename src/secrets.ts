import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';

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

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * One of our secrets: its prefix (group 1), then every character our secrets are made of
 * (base64url, and the dot of an access token), and '%' for one that arrives percent-encoded.
 * Quotes and backslashes end it, so redacting a JSON line leaves valid JSON.
 */
export const OUR_SECRET_SOURCE = `(${Object.values(SECRET_PREFIX).map(escapeRe).join('|')})[A-Za-z0-9_.%-]+`;
const OUR_SECRET_RE = new RegExp(OUR_SECRET_SOURCE);
// A random secret of ours without its prefix, or one of another system: a long run of
// base64url characters that mixes upper case, lower case and digits (UUIDs and hex ids do not).
const RANDOM_RUN_RE = /[A-Za-z0-9_-]{32,}/g;
// Keys of other systems in hex: a prefix and an underscore before 16 or more hex digits
// (`ak_c264...`, `sk_live_...`), or 40 or more hex digits in a row. 32 alone stay: that is a
// W3C trace id, a fine correlation value.
const HEX_KEY_RE = /[A-Za-z0-9]_([0-9a-fA-F]{16,})|([0-9a-fA-F]{40,})/g;

const mixes = (run: string, ...classes: RegExp[]): boolean => classes.every((c) => c.test(run));

/**
 * Whether a value carries one of our secrets, or something that looks like a random secret
 * of any system: what must never be echoed (links) or taken as a correlation id.
 */
export function looksLikeSecret(text: string): boolean {
  if (OUR_SECRET_RE.test(text)) return true;
  for (const run of text.match(RANDOM_RUN_RE) ?? []) if (mixes(run, /[A-Z]/, /[a-z]/, /\d/)) return true;
  // Digits and letters both: a long number or a word is no key.
  for (const m of text.matchAll(HEX_KEY_RE)) if (mixes(m[1] ?? m[2]!, /[a-fA-F]/, /\d/)) return true;
  return false;
}

/** 256 bits of randomness, base64url: client secrets, admin tokens, trigger tokens. */
export function randomSecret(prefix = ''): string {
  return prefix + randomBytes(32).toString('base64url');
}

export function sha256Hex(value: string): string {
  // The one-shot form: no Hash object per call.
  return hash('sha256', value, 'hex');
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
