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

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Whether one of the delivery's signatures is the secret's over these bytes, within the clock tolerance. */
export function verifyStandardWebhook(headers: IncomingHttpHeaders, body: Buffer, secret: string, nowSeconds: number): boolean {
  const id = header(headers, 'webhook-id') ?? header(headers, 'svix-id');
  const timestamp = header(headers, 'webhook-timestamp') ?? header(headers, 'svix-timestamp');
  const signatures = header(headers, 'webhook-signature') ?? header(headers, 'svix-signature');
  if (!id || !timestamp || !signatures || !/^\d{1,12}$/.test(timestamp)) return false;
  if (Math.abs(nowSeconds - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) return false;
  const key = signingKeyOf(secret);
  if (key.length === 0) return false;
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
  return ok;
}
