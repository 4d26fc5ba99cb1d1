/**
 * Secrets at rest: AES-256-GCM under the installation's connector key (kept in the database,
 * like the token signing key), a fresh 96-bit nonce per secret. The stored text is
 * `v1.<nonce>.<tag>.<ciphertext>` in base64url; the version leaves room for a key rotation.
 *
 * Connector secrets are sealed under the key itself. Idempotency-Key answers (a write's
 * stored answer can carry a secret shown once, such as a trigger token) are sealed under a
 * key derived for them alone, bound to their account and key, and their request
 * fingerprints are keyed hashes, so a request body's secret cannot be guessed from one.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 'v1';

/**
 * Seals `plaintext`. `context`, when given, is authenticated but not stored: the text opens
 * only with the same context (it ties a sealed value to the row it belongs to).
 */
export function sealSecret(key: Buffer, plaintext: string, context?: string): string {
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  if (context !== undefined) cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [VERSION, nonce.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
}

/** The plaintext; throws when the text was not sealed under this key and context or was altered. */
export function openSecret(key: Buffer, sealed: string, context?: string): string {
  const [version, nonce, tag, ciphertext] = sealed.split('.');
  if (version !== VERSION || nonce === undefined || tag === undefined || ciphertext === undefined) throw new Error('not a sealed secret');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'));
  if (context !== undefined) decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
}

/** A key of the installation key's for one use only (HKDF-SHA256): two uses never share a key or its nonce budget. */
function subkey(key: Buffer, use: string): Buffer {
  return Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), use, 32));
}

const answerKey = (key: Buffer) => subkey(key, 'tributary idempotency answer');
// A uuid and a key of printable ASCII: the newline cannot occur in either.
const answerContext = (credentialId: string, idempotencyKey: string) => `${credentialId}\n${idempotencyKey}`;

/** An Idempotency-Key's answer as stored: sealed, opening only for its own account and key. */
export function sealAnswer(key: Buffer, credentialId: string, idempotencyKey: string, body: string): string {
  return sealSecret(answerKey(key), body, answerContext(credentialId, idempotencyKey));
}

/**
 * The answer as it was sent. A stored text that is not sealed is one kept in plain text before
 * answers were sealed (JSON, which never starts with `v1.`): it is answered as it is.
 */
export function openAnswer(key: Buffer, credentialId: string, idempotencyKey: string, stored: string): string {
  return isSealed(stored) ? openSecret(answerKey(key), stored, answerContext(credentialId, idempotencyKey)) : stored;
}

export const isSealed = (text: string) => text.startsWith(`${VERSION}.`);

const KEYED = 'h1:';

/** A request's fingerprint as stored: a keyed hash of its digest (SHA-256 hex), so no one without the key can test guesses of a body against it. */
export function keyedFingerprint(key: Buffer, digest: string): string {
  return `${KEYED}${createHmac('sha256', subkey(key, 'tributary idempotency fingerprint')).update(digest).digest('hex')}`;
}

/** Whether a stored fingerprint is this digest's; one stored before fingerprints were keyed is the digest itself. */
export function fingerprintMatches(key: Buffer, stored: string, digest: string): boolean {
  return stored.startsWith(KEYED) ? stored === keyedFingerprint(key, digest) : stored === digest;
}
