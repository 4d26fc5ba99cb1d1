/**
 * The signature schemes of real webhook senders, verified over the raw bytes of a delivery
 * and signed the same way (for tests and for senders that need it). Every comparison is
 * constant-time; a scheme that signs a timestamp refuses one older or newer than the
 * tolerance, so a captured delivery cannot be replayed later. What the signature covers
 * (signedId: Standard Webhooks' id; Stripe's and Slack's timestamp with the body digest;
 * GitHub's and Shopify's body digest) is the delivery identity (triggers/identity.ts):
 * their id headers (X-GitHub-Delivery, X-Shopify-Webhook-Id) are not signed, so they only
 * label the run.
 * docs/webhooks.md, "Signature schemes", shows each with its headers.
 */
import { createHmac, hash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import {
  checkStandardWebhook,
  DEFAULT_SIGNATURE_SCHEME,
  header,
  isSignatureScheme,
  SIGNATURE_SCHEMES,
  SIGNATURE_TOLERANCE_SECONDS,
  standardWebhookSignature,
  type SignatureCheck,
  type SignatureFailure,
  type SignatureScheme,
  type SignedId,
} from './standard-webhooks.ts';

export { DEFAULT_SIGNATURE_SCHEME, header, isSignatureScheme, SIGNATURE_SCHEMES };
export type { SignatureCheck, SignatureFailure, SignatureScheme, SignedId };

const hmac = (secret: string, ...parts: Array<string | Buffer>) => {
  const h = createHmac('sha256', secret);
  for (const p of parts) h.update(p);
  return h.digest();
};

/** Constant-time: every candidate is compared, so the time taken does not tell which one matched. */
function anyEqual(expected: Buffer, candidates: Buffer[]): boolean {
  let ok = false;
  for (const given of candidates) if (given.length === expected.length && timingSafeEqual(given, expected)) ok = true;
  return ok;
}

const HEX_RE = /^[0-9a-f]+$/i;
const fromHex = (s: string) => (HEX_RE.test(s) && s.length % 2 === 0 ? Buffer.from(s, 'hex') : Buffer.alloc(0));

function timestampProblem(ts: string, nowSeconds: number): SignatureFailure | undefined {
  if (!/^\d{1,12}$/.test(ts)) return 'signature mismatch';
  return Math.abs(nowSeconds - Number(ts)) > SIGNATURE_TOLERANCE_SECONDS ? 'timestamp outside the tolerance' : undefined;
}

/** The digest of the bytes the signature covers; one-shot, no Hash object per delivery. */
const bodyDigest = (body: Buffer) => `sha256:${hash('sha256', body, 'hex')}`;

/** A verified message whose signature covers the body only: the body's digest, labelled by the sender's unsigned id. */
const bodySigned = (scheme: SignatureScheme, body: Buffer, label: string | undefined): SignatureCheck => {
  const digest = bodyDigest(body);
  return { ok: true, signedId: { scheme, value: digest, shown: label ?? digest } };
};

/** A verified message whose signature covers a timestamp and the body: both, as one identity. */
const stampSigned = (scheme: SignatureScheme, timestamp: string, body: Buffer): SignatureCheck => {
  const digest = bodyDigest(body);
  return { ok: true, signedId: { scheme, value: `${timestamp}:${digest}`, shown: digest } };
};

function github(headers: IncomingHttpHeaders, body: Buffer, secret: string): SignatureCheck {
  const sig = header(headers, 'x-hub-signature-256');
  if (sig === undefined) return { ok: false, reason: 'missing signature headers' };
  const given = sig.startsWith('sha256=') ? fromHex(sig.slice('sha256='.length)) : Buffer.alloc(0);
  if (!anyEqual(hmac(secret, body), [given])) return { ok: false, reason: 'signature mismatch' };
  return bodySigned('github', body, header(headers, 'x-github-delivery'));
}

function stripe(headers: IncomingHttpHeaders, body: Buffer, secret: string, nowSeconds: number): SignatureCheck {
  const sig = header(headers, 'stripe-signature');
  if (sig === undefined) return { ok: false, reason: 'missing signature headers' };
  let t: string | undefined;
  const v1: Buffer[] = [];
  for (const item of sig.split(',')) {
    const eq = item.indexOf('=');
    const [k, v] = [item.slice(0, eq).trim(), item.slice(eq + 1).trim()];
    if (k === 't') t = v;
    else if (k === 'v1') v1.push(fromHex(v));
  }
  if (t === undefined || v1.length === 0) return { ok: false, reason: 'missing signature headers' };
  // The signature first: a stale timestamp is only worth telling a sender who holds the secret.
  if (!anyEqual(hmac(secret, `${t}.`, body), v1)) return { ok: false, reason: 'signature mismatch' };
  const late = timestampProblem(t, nowSeconds);
  // Stripe's event id is inside the body, and a retry is signed anew (another t): the signed t with the body's digest.
  return late ? { ok: false, reason: late } : stampSigned('stripe', t, body);
}

function shopify(headers: IncomingHttpHeaders, body: Buffer, secret: string): SignatureCheck {
  const sig = header(headers, 'x-shopify-hmac-sha256');
  if (sig === undefined) return { ok: false, reason: 'missing signature headers' };
  if (!anyEqual(hmac(secret, body), [Buffer.from(sig, 'base64')])) return { ok: false, reason: 'signature mismatch' };
  return bodySigned('shopify', body, header(headers, 'x-shopify-webhook-id'));
}

function slack(headers: IncomingHttpHeaders, body: Buffer, secret: string, nowSeconds: number): SignatureCheck {
  const sig = header(headers, 'x-slack-signature');
  const ts = header(headers, 'x-slack-request-timestamp');
  if (sig === undefined || ts === undefined) return { ok: false, reason: 'missing signature headers' };
  const given = sig.startsWith('v0=') ? fromHex(sig.slice('v0='.length)) : Buffer.alloc(0);
  if (!anyEqual(hmac(secret, `v0:${ts}:`, body), [given])) return { ok: false, reason: 'signature mismatch' };
  const late = timestampProblem(ts, nowSeconds);
  return late ? { ok: false, reason: late } : stampSigned('slack', ts, body);
}

/** The header that carries each scheme's signature, as its sender spells it: what an inbound connector's last_error names. */
export const SIGNATURE_HEADER_NAMES: Record<SignatureScheme, string> = {
  standard_webhooks: 'webhook-signature',
  github: 'X-Hub-Signature-256',
  stripe: 'Stripe-Signature',
  shopify: 'X-Shopify-Hmac-Sha256',
  slack: 'X-Slack-Signature',
};

/** Verifies a delivery by its connector's scheme with the connector's secret, at `nowSeconds`. */
export function verifySignature(scheme: SignatureScheme, headers: IncomingHttpHeaders, body: Buffer, secret: string, nowSeconds: number): SignatureCheck {
  switch (scheme) {
    case 'standard_webhooks':
      return checkStandardWebhook(headers, body, secret, nowSeconds);
    case 'github':
      return github(headers, body, secret);
    case 'stripe':
      return stripe(headers, body, secret, nowSeconds);
    case 'shopify':
      return shopify(headers, body, secret);
    case 'slack':
      return slack(headers, body, secret, nowSeconds);
  }
}

/** The headers a sender of `scheme` puts on `body` (message `id` where the scheme carries one). */
export function signatureHeaders(scheme: SignatureScheme, secret: string, body: string, id: string, nowSeconds: number): Record<string, string> {
  switch (scheme) {
    case 'standard_webhooks':
      return { 'webhook-id': id, 'webhook-timestamp': String(nowSeconds), 'webhook-signature': standardWebhookSignature(secret, id, nowSeconds, body) };
    case 'github':
      return { 'x-github-delivery': id, 'x-hub-signature-256': `sha256=${hmac(secret, body).toString('hex')}` };
    case 'stripe':
      return { 'stripe-signature': `t=${nowSeconds},v1=${hmac(secret, `${nowSeconds}.`, body).toString('hex')}` };
    case 'shopify':
      return { 'x-shopify-webhook-id': id, 'x-shopify-hmac-sha256': hmac(secret, body).toString('base64') };
    case 'slack':
      return { 'x-slack-request-timestamp': String(nowSeconds), 'x-slack-signature': `v0=${hmac(secret, `v0:${nowSeconds}:`, body).toString('hex')}` };
  }
}
