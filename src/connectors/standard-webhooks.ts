/**
 * Standard Webhooks, both ways: signing what a connector sends (hmac) and verifying what a
 * trigger receives. The signature is `v1,<base64>` of HMAC-SHA256 over `id.timestamp.body`
 * with the key of a `whsec_` secret; the svix-* header names are read too, so deliveries
 * signed by the `standardwebhooks` and `svix` libraries verify unchanged. Comparisons are
 * constant-time.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

export const SIGNATURE_TOLERANCE_SECONDS = 5 * 60;

// The schemes' shared words live here, the base scheme; connectors/signature-schemes.ts adds the others.
export const SIGNATURE_SCHEMES = ['standard_webhooks', 'github', 'stripe', 'shopify', 'slack'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];
export const DEFAULT_SIGNATURE_SCHEME: SignatureScheme = 'standard_webhooks';

export const isSignatureScheme = (s: unknown): s is SignatureScheme => typeof s === 'string' && (SIGNATURE_SCHEMES as readonly string[]).includes(s);

/** Why a delivery was refused, in words a sender can act on (never the signature or the secret). */
export type SignatureFailure = 'missing signature headers' | 'signature mismatch' | 'timestamp outside the tolerance';

/**
 * What a verified message's signature vouches for, as its delivery identity
 * (triggers/identity.ts): `value` is made of signed parts only (Standard Webhooks' id;
 * Stripe's and Slack's timestamp with the body's digest; GitHub's and Shopify's body
 * digest), so no header outside the signature can change it. `shown` is what the run
 * shows as its delivery_id when no delivery-id header came: the sender's own id where it
 * sends one (an unsigned X-GitHub-Delivery only ever labels the run), else the digest.
 */
export interface SignedId {
  scheme: SignatureScheme;
  value: string;
  shown: string;
}

export type SignatureCheck = { ok: true; signedId?: SignedId } | { ok: false; reason: SignatureFailure };

export function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s.trim() === '' ? undefined : s.trim();
}

/** The signing key of a `whsec_` secret (base64 after the prefix), as the sender libraries read it. */
export function signingKeyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

const digest = (key: Buffer, id: string, timestamp: number | string, body: string | Buffer) =>
  createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();

/** Standard Webhooks signature of `body` for message `id` at `timestamp` (seconds). */
export function standardWebhookSignature(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${digest(signingKeyOf(secret), id, timestamp, body).toString('base64')}`;
}

/** Whether one of the delivery's signatures is the secret's over these bytes, within the clock tolerance; if not, why. */
export function checkStandardWebhook(headers: IncomingHttpHeaders, body: Buffer, secret: string, nowSeconds: number): SignatureCheck {
  const id = header(headers, 'webhook-id') ?? header(headers, 'svix-id');
  const timestamp = header(headers, 'webhook-timestamp') ?? header(headers, 'svix-timestamp');
  const signatures = header(headers, 'webhook-signature') ?? header(headers, 'svix-signature');
  if (!id || !timestamp || !signatures) return { ok: false, reason: 'missing signature headers' };
  const key = signingKeyOf(secret);
  if (key.length === 0 || !/^\d{1,12}$/.test(timestamp)) return { ok: false, reason: 'signature mismatch' };
  const expected = digest(key, id, timestamp, body);
  let ok = false;
  // Several signatures (key rotation) are separated by spaces; each is `version,base64`.
  for (const part of signatures.split(' ')) {
    const comma = part.indexOf(',');
    if (comma < 0 || part.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(part.slice(comma + 1), 'base64');
    // Every candidate is compared, so the time taken does not tell which one matched.
    if (given.length === expected.length && timingSafeEqual(given, expected)) ok = true;
  }
  if (!ok) return { ok: false, reason: 'signature mismatch' };
  if (Math.abs(nowSeconds - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) return { ok: false, reason: 'timestamp outside the tolerance' };
  return { ok: true, signedId: { scheme: 'standard_webhooks', value: id, shown: id } };
}

/** Whether one of the delivery's signatures is the secret's over these bytes, within the clock tolerance. */
export function verifyStandardWebhook(headers: IncomingHttpHeaders, body: Buffer, secret: string, nowSeconds: number): boolean {
  return checkStandardWebhook(headers, body, secret, nowSeconds).ok;
}
