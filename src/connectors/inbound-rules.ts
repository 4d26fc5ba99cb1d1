/**
 * What an inbound connector may hold, checked where it is written (create and PATCH,
 * resources/external_connectors) and again where a delivery is verified (surface.ts), so
 * a connector stored before these rules cannot verify with what they refuse:
 * - an `hmac` secret: for `standard_webhooks` a `whsec_` key of 24 to 64 bytes; for the
 *   other schemes at least MIN_SECRET_BYTES bytes;
 * - an inbound `api_key` secret: at least MIN_SECRET_BYTES bytes, no control characters
 *   (a header value cannot carry them);
 * - neither with leading or trailing whitespace (HTTP strips it from a header value, and a
 *   secret pasted with a newline would never match);
 * - an inbound `api_key` connector's `config.header_name`: an HTTP field name (RFC 9110
 *   token) of at most 64 characters that is none the service reads itself (the delivery-id
 *   headers, X-Request-Id, Authorization, Content-Type, a scheme's signature headers...),
 *   so the key is never taken for a delivery id or shown with one, and never `__proto__`,
 *   which Node's parser never delivers.
 * docs/connectors.md, "Inbound secrets and header names", lists them.
 */
import { DEFAULT_SIGNATURE_SCHEME, isSignatureScheme } from './standard-webhooks.ts';
import { DELIVERY_ID_HEADERS } from '../triggers/identity.ts';

export const MIN_SECRET_BYTES = 16;
export const MAX_HEADER_NAME_CHARS = 64;

/** Header names the service reads itself, lower case. */
export const RESERVED_HEADER_NAMES: ReadonlySet<string> = new Set([
  ...DELIVERY_ID_HEADERS,
  'x-request-id',
  'authorization',
  'proxy-authorization',
  'cookie',
  'host',
  'content-type',
  'content-length',
  'content-encoding',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'expect',
  'te',
  'trailer',
  'upgrade',
  'traceparent',
  'tracestate',
  'forwarded',
  'x-forwarded-for',
  // The signature schemes' own headers.
  'x-hub-signature',
  'x-hub-signature-256',
  'stripe-signature',
]);

/** Prefixes of header families the service or a scheme reads (webhook-id, svix-signature, Tributary-Require-Verification...). */
export const RESERVED_HEADER_PREFIXES = ['webhook-', 'svix-', 'x-github-', 'x-shopify-', 'x-slack-', 'tributary-'] as const;

/** RFC 9110 token. */
const TOKEN_RE = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
// eslint-disable-next-line no-control-regex
const CONTROL_RE = /[\u0000-\u001f\u007f]/;
// Standard Webhooks: "whsec_" and the base64 of a key of 24 to 64 bytes (padding optional).
const WHSEC_RE = /^whsec_([A-Za-z0-9+/]+)={0,2}$/;

/** Why `name` cannot be an inbound api_key connector's header (undefined: it can). */
export function headerNameProblem(name: unknown, inbound: boolean): string | undefined {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_HEADER_NAME_CHARS || !TOKEN_RE.test(name))
    return `config.header_name must be an HTTP header name (letters, digits and !#$%&'*+-.^_\`|~, at most ${MAX_HEADER_NAME_CHARS} characters)`;
  const lower = name.toLowerCase();
  // No object key of that name holds a header: Node drops it from a request, and an outbound one would be lost too.
  if (lower === '__proto__') return 'config.header_name must not be __proto__: no header of that name is ever delivered';
  if (!inbound) return undefined;
  if (RESERVED_HEADER_NAMES.has(lower) || RESERVED_HEADER_PREFIXES.some((p) => lower.startsWith(p)))
    return `config.header_name must not be ${name}: the service reads that header itself (delivery ids, authorization, content, signatures)`;
  return undefined;
}

/** Why `secret` cannot be this connector's (undefined: it can, or no rule applies to it). */
export function secretProblem(authType: string | null | undefined, inbound: boolean, scheme: unknown, secret: string): string | undefined {
  const signs = authType === 'hmac';
  if (!signs && !(authType === 'api_key' && inbound)) return undefined;
  if (signs && (scheme === undefined || scheme === null || scheme === DEFAULT_SIGNATURE_SCHEME || !isSignatureScheme(scheme))) {
    const m = WHSEC_RE.exec(secret);
    const bytes = m ? Math.floor((m[1]!.length * 6) / 8) : 0;
    if (bytes < 24 || bytes > 64) return "An hmac connector's secret must be a Standard Webhooks key: whsec_ followed by the base64 of 24 to 64 bytes";
    return undefined;
  }
  const what = signs ? `An hmac connector's secret (signature_scheme ${String(scheme)})` : "An inbound api_key connector's secret";
  if (secret.trim() !== secret) return `${what} must not begin or end with whitespace`;
  if (Buffer.byteLength(secret) < MIN_SECRET_BYTES) return `${what} must be at least ${MIN_SECRET_BYTES} bytes`;
  if (!signs && CONTROL_RE.test(secret)) return `${what} must not hold control characters: a header value cannot carry them`;
  return undefined;
}
