/**
 * Delivery identity: what makes two deliveries "the same" for deduplication.
 * The first non-empty of the four delivery-id headers (docs/webhooks.md), keyed by the header's name as well as
 * its value (the same number from two senders' headers is two deliveries; Idempotency-Key
 * keeps the key it always had, so guards stored before stay valid); without one, a digest of the
 * trigger and the raw body within a two-hour bucket (byte-identical retries inside one
 * bucket deduplicate; a retry across its boundary can run twice). X-Request-Id never
 * counts: it is a correlation value, different on every attempt.
 *
 * A delivery its connector verified also has the identity its signature vouches for
 * (connectors/signature-schemes.ts), per trigger: Standard Webhooks' webhook-id/svix-id;
 * Stripe's and Slack's signed timestamp with the body's digest; GitHub's and Shopify's body
 * digest (their X-GitHub-Delivery and X-Shopify-Webhook-Id are not covered by the HMAC, so
 * they never make a new identity). Without a delivery-id header it is the identity (in any
 * bucket: a provider's retry deduplicates across hours); with one, the header's key is kept
 * beside it, never alone, and the accepting statement takes both or neither
 * (webhooks.sql.ts): either one already held makes the delivery a duplicate, so a captured
 * message replayed with a fresh Idempotency-Key, X-Alpha-Delivery or X-GitHub-Delivery is a
 * duplicate too, and a duplicate stores no key.
 */
import { createHash, hash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

export const DELIVERY_ID_HEADERS = ['idempotency-key', 'x-alpha-delivery', 'x-beta-webhook-id', 'x-gamma-idempotency-token'] as const;
export const BODY_BUCKET_MS = 2 * 60 * 60 * 1000;
/** Longer delivery ids are refused: no sender needs more, and the id is stored on the run. */
export const MAX_DELIVERY_ID_LENGTH = 1024;

export interface DeliveryIdentity {
  /** The guard's key, unique per organization. */
  key: string;
  /** What the run shows as delivery_id: the header's value, or the body digest. */
  deliveryId: string;
  fromHeader: boolean;
  /** The guard of the signed message id, kept beside a header's key (taken in the same statement). */
  signedKey?: string;
}

/** What a verified delivery's signature vouches for (SignedId), and the trigger it was sent to. */
export interface SignedDelivery {
  triggerId: string;
  scheme: string;
  /** The signed identity: made of signed parts only. */
  value: string;
  /** The run's delivery_id when no delivery-id header came. */
  shown: string;
}

// One-shot: no Hash object per call (it runs on every delivery).
const sha256 = (s: string) => hash('sha256', s, 'hex');
// Per trigger: a sender that delivers one message to two endpoints (two triggers) means two runs.
const signedKeyOf = (s: SignedDelivery) => `s:${s.triggerId}:${s.scheme}:${sha256(s.value)}`;

export function deliveryHeader(headers: IncomingHttpHeaders): { name: (typeof DELIVERY_ID_HEADERS)[number]; value: string } | undefined {
  for (const name of DELIVERY_ID_HEADERS) {
    const raw = headers[name];
    const v = Array.isArray(raw) ? raw.find((x) => x.trim() !== '') : raw;
    if (v !== undefined && v.trim() !== '') return { name, value: v.trim() };
  }
  return undefined;
}

/**
 * The identity of a delivery to the trigger whose token hashes to `triggerTokenHash`
 * (the hash, not the token, so the token is never kept in memory longer than needed).
 */
export function deliveryIdentity(
  headers: IncomingHttpHeaders,
  triggerTokenHash: string,
  body: Buffer,
  nowMs: number,
  signed?: SignedDelivery,
): DeliveryIdentity {
  const header = deliveryHeader(headers);
  if (header !== undefined) {
    const digest = sha256(header.value);
    const key = header.name === 'idempotency-key' ? `h:${digest}` : `h:${header.name}:${digest}`;
    return signed === undefined
      ? { key, deliveryId: header.value, fromHeader: true }
      : { key, deliveryId: header.value, fromHeader: true, signedKey: signedKeyOf(signed) };
  }
  if (signed !== undefined) return { key: signedKeyOf(signed), deliveryId: signed.shown, fromHeader: true };
  const bucket = Math.floor(nowMs / BODY_BUCKET_MS);
  const digest = createHash('sha256').update(`${triggerTokenHash}:${bucket}:`).update(body).digest('hex');
  return { key: `b:${digest}`, deliveryId: `sha256:${digest}`, fromHeader: false };
}
