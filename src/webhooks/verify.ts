/**
 * Inbound connector verification of a delivery, over the raw bytes before any parsing:
 * - hmac: the connector's config.signature_scheme (connectors/signature-schemes.ts), 5 minutes of clock tolerance;
 * - api_key: a configured header (default X-Api-Key) equal to the secret.
 * What a connector may hold (secrets, header names) is in connectors/inbound-rules.ts.
 * Every comparison is constant-time.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { secretsEqual } from '../secrets.ts';

export const DEFAULT_API_KEY_HEADER = 'x-api-key';

/**
 * Whether the header `headerName` holds the secret. Own properties only: a name such as
 * `constructor` or `__proto__` reaches no prototype member, whatever object holds the headers.
 */
export function verifyApiKey(headers: IncomingHttpHeaders, secret: string, headerName: string = DEFAULT_API_KEY_HEADER): boolean {
  const name = headerName.toLowerCase();
  const v: unknown = Object.hasOwn(headers, name) ? headers[name] : undefined;
  const presented = Array.isArray(v) ? v[0] : v;
  return typeof presented === 'string' && secretsEqual(presented, secret);
}
