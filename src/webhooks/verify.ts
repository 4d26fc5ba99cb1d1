/**
 * Inbound connector verification of a delivery, over the raw bytes before any parsing:
 * - hmac: the connector's config.signature_scheme (connectors/signature-schemes.ts), 5 minutes of clock tolerance;
 * - api_key: a configured header (default X-Api-Key) equal to the secret.
 * Every comparison is constant-time.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { secretsEqual } from '../secrets.ts';

export const DEFAULT_API_KEY_HEADER = 'x-api-key';

export function verifyApiKey(headers: IncomingHttpHeaders, secret: string, headerName: string = DEFAULT_API_KEY_HEADER): boolean {
  const v = headers[headerName.toLowerCase()];
  const presented = Array.isArray(v) ? v[0] : v;
  return presented !== undefined && secretsEqual(presented, secret);
}
