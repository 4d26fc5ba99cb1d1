/**
 * Inbound connector verification of a delivery, over the raw bytes before any parsing:
 * - hmac: Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature `v1,<base64>`
 *   over `id.timestamp.body`, HMAC-SHA256 with the `whsec_` secret, 5 minutes of clock
 *   tolerance); the svix-* header names are accepted too, so deliveries signed by the
 *   `standardwebhooks` and `svix` libraries verify unchanged;
 * - api_key: a configured header (default X-Api-Key) equal to the secret.
 * Every comparison is constant-time.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { secretsEqual } from '../secrets.ts';

export const SIGNATURE_TOLERANCE_SECONDS = 5 * 60;

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The signing key of a `whsec_` secret (base64 after the prefix), as the sender libraries read it. */
export function signingKeyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

export function verifyStandardWebhook(headers: IncomingHttpHeaders, body: Buffer, secret: string, nowSeconds: number): boolean {
  const id = header(headers, 'webhook-id') ?? header(headers, 'svix-id');
  const timestamp = header(headers, 'webhook-timestamp') ?? header(headers, 'svix-timestamp');
  const signatures = header(headers, 'webhook-signature') ?? header(headers, 'svix-signature');
  if (!id || !timestamp || !signatures || !/^\d{1,12}$/.test(timestamp)) return false;
  if (Math.abs(nowSeconds - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) return false;
  const key = signingKeyOf(secret);
  if (key.length === 0) return false;
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
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

export const DEFAULT_API_KEY_HEADER = 'x-api-key';

export function verifyApiKey(headers: IncomingHttpHeaders, secret: string, headerName: string = DEFAULT_API_KEY_HEADER): boolean {
  const presented = header(headers, headerName.toLowerCase());
  return presented !== undefined && secretsEqual(presented, secret);
}
