/**
 * The headers of a webhook delivery as its run keeps them (workflow_run.delivery_headers),
 * so an operator sees what started a run without the secrets that came with it:
 * - a header that carries credentials keeps its name, its value becomes "[redacted]": the
 *   ones named below, any name containing one of SECRET_STEMS, the header an api_key
 *   connector reads its key from, and any value that looks like a key or one of our tokens;
 * - the delivery-id headers (triggers/identity.ts) are shown in full: the run shows that
 *   value as its delivery_id already (unless an api_key connector reads its key from one,
 *   which connectors/inbound-rules.ts refuses, and which is redacted all the same);
 * - hop-by-hop headers, and those a Connection header names, are left out: they describe
 *   the connection to us, not the delivery;
 * - bounded: the first MAX_HEADERS headers, each value cut to MAX_VALUE_CHARS characters.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { REDACTED } from '../log.ts';
import { looksLikeSecret } from '../secrets.ts';
import { DELIVERY_ID_HEADERS } from './identity.ts';

export const MAX_HEADERS = 50;
export const MAX_VALUE_CHARS = 1024;

const SECRET_NAMES = new Set(['authorization', 'proxy-authorization', 'cookie']);
export const SECRET_STEMS = ['signature', 'secret', 'token', 'auth', 'key', 'password', 'credential', 'hmac'] as const;
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
const SHOWN_IN_FULL: ReadonlySet<string> = new Set(DELIVERY_ID_HEADERS);

/** Whether a header's value is never kept: by its name, or one of `secretHeaders` (lower case). */
function secretName(name: string, secretHeaders: ReadonlySet<string>): boolean {
  return SECRET_NAMES.has(name) || secretHeaders.has(name) || SECRET_STEMS.some((stem) => name.includes(stem));
}

/**
 * Values judged not to look like a secret: the same few (host, user agent, media type)
 * come with every delivery. Only those are kept, so no secret is held in memory here.
 */
const PLAIN_VALUES = 1000;
const MAX_PLAIN_CHARS = 256;
const plainValues = new Set<string>();

function looksSecret(value: string): boolean {
  if (plainValues.has(value)) return false;
  if (looksLikeSecret(value)) return true;
  if (value.length <= MAX_PLAIN_CHARS) {
    if (plainValues.size >= PLAIN_VALUES) plainValues.clear();
    plainValues.add(value);
  }
  return false;
}

export function deliveryHeaders(headers: IncomingHttpHeaders, secretHeaders: readonly string[] = []): Record<string, string> {
  const secret = new Set(secretHeaders.map((h) => h.toLowerCase()));
  const connection = headers.connection;
  const named = new Set(
    (Array.isArray(connection) ? connection.join(',') : (connection ?? ''))
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter((s) => s !== ''),
  );
  // A Map, then own properties: a header named __proto__ is a header like any other.
  const out = new Map<string, string>();
  for (const [rawName, raw] of Object.entries(headers)) {
    if (out.size === MAX_HEADERS) break;
    const name = rawName.toLowerCase();
    if (raw === undefined || HOP_BY_HOP.has(name) || named.has(name) || out.has(name)) continue;
    const value = Array.isArray(raw) ? raw.join(', ') : raw;
    // The connector's key header is redacted even under a delivery-id name (one stored before the inbound rules).
    const redact = secret.has(name) || (!SHOWN_IN_FULL.has(name) && (secretName(name, secret) || looksSecret(value)));
    out.set(name, redact ? REDACTED : value.slice(0, MAX_VALUE_CHARS));
  }
  return Object.fromEntries(out);
}

/** What expressions see as `delivery` (docs/workflows.md): the delivery's id and its headers. */
export interface ExpressionDelivery {
  id: string | null;
  headers: Record<string, string>;
}

/**
 * A run's `delivery` for its expressions, from what the run records: its delivery id and
 * its delivery_headers (made by deliveryHeaders above, the one redaction rule). A redacted
 * header is left out, not shown as "[redacted]": an expression has no use for a credential's
 * name, and a transform that returns the headers would copy it into the run's record. Null
 * for a run that came from no delivery (a schedule's tick: neither an id nor headers).
 */
export function expressionDelivery(id: string | null, headers: Record<string, string> | null): ExpressionDelivery | null {
  if (id === null && headers === null) return null;
  const shown = new Map<string, string>();
  for (const [name, value] of Object.entries(headers ?? {})) if (value !== REDACTED) shown.set(name, value);
  return { id, headers: Object.fromEntries(shown) };
}
