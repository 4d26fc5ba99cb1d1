/**
 * What a provider's answer must not carry back into a run record or a connector's
 * last_error: every credential the service sent it, in every spelling an echo may use. A
 * provider that echoes its request (a debug endpoint, an error quoting the body) returns
 * the `Authorization` header, a form body or a query string, not the raw secret: so the
 * values sent are redacted as sent, percent-encoded (encodeURIComponent and form encoding,
 * upper- or lower-case hex) and inside a JSON string.
 */
import { REDACTED } from '../log.ts';

/** Characters of a provider's answer kept in a step error or a connector's last_error, after redaction. */
export const PROVIDER_EXCERPT_CHARS = 512;

// Shorter values would redact ordinary words of an answer; every credential form we send is longer.
const MIN_LENGTH = 4;

const formEncoded = (v: string) => new URLSearchParams({ v }).toString().slice(2);
const lowerHex = (v: string) => v.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase());
const jsonInner = (v: string) => JSON.stringify(v).slice(1, -1);
// Python's json.dumps and PHP's json_encode escape more than JSON.stringify does.
const asciiJson = (v: string) => jsonInner(v).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** The spellings of one sent value that an echo may carry it in. */
export function spellings(value: string): string[] {
  const encoded = [value, encodeURIComponent(value), formEncoded(value)];
  const forms = new Set<string>();
  for (const e of [...encoded, ...encoded.map(lowerHex)]) {
    for (const j of [e, jsonInner(e), asciiJson(e)]) {
      forms.add(j);
      forms.add(j.replaceAll('/', '\\/'));
    }
  }
  return [...forms];
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export type Redact = <T>(value: T) => T;

/**
 * A function that replaces every spelling of these values in a string, or in every string
 * of a JSON value, by `[redacted]`. One pass with the longest spellings first, so a whole
 * `Basic <base64>` goes rather than the base64 inside it.
 */
export function redactor(values: Iterable<string>): Redact {
  const list = [...values];
  const key = list.join('\0');
  let made = made_.get(key);
  if (made === undefined) {
    made = build(list);
    // Every call of a connector redacts with the same values: built once, not per call.
    if (made_.size >= REDACTORS_KEPT) made_.delete(made_.keys().next().value!);
    made_.set(key, made);
  }
  return made;
}

const made_ = new Map<string, Redact>();
const REDACTORS_KEPT = 256;

function build(values: string[]): Redact {
  const forms = new Set<string>();
  for (const v of values) for (const s of spellings(v)) if (s.length >= MIN_LENGTH) forms.add(s);
  if (forms.size === 0) return (value) => value;
  const sorted = [...forms].sort((a, b) => b.length - a.length);
  const re = new RegExp(sorted.map(escapeRe).join('|'), 'g');
  // The forms as they read inside JSON text: a string holds a form exactly when its JSON text holds this.
  const any = new RegExp(sorted.map((f) => escapeRe(jsonInner(f))).join('|'));
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return v.replace(re, REDACTED);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [walk(k), walk(x)]));
    return v;
  };
  // JSON escapes each character alike wherever it stands, so a value whose JSON text holds
  // no form's JSON spelling holds no form in any string or key: most answers are returned
  // as they are, without a copy.
  return <T>(value: T) => {
    if (typeof value === 'string') return value.replace(re, REDACTED) as T;
    const text = JSON.stringify(value);
    return (text === undefined || !any.test(text) ? value : walk(value)) as T;
  };
}

/** An error with the values redacted from its message, of the same kind (a retry decision depends on it). */
export function redactError(err: unknown, redact: Redact): unknown {
  if (err instanceof Error) err.message = redact(err.message);
  return err;
}

/**
 * Part of a provider's answer for an error text: redacted first (a cut cannot leave half a
 * secret), then cut at PROVIDER_EXCERPT_CHARS. Without `redact`, the answer is one callHttp
 * or callDriver returned, redacted already.
 */
export function providerExcerpt(body: unknown, redact: Redact = (v) => v): string {
  const text = redact(typeof body === 'string' ? body : (JSON.stringify(redact(body)) ?? ''));
  return text.length > PROVIDER_EXCERPT_CHARS ? `${text.slice(0, PROVIDER_EXCERPT_CHARS)}...` : text;
}

/**
 * A URL as an error text may show it: no user or password, each query value replaced (a
 * base_url may carry a key in its query string, one the connector does not know as its
 * secret), and the connector's sent credentials redacted from what is left.
 */
export function urlForText(url: string | URL, redact: Redact = (v) => v): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return REDACTED;
  }
  const names = [...u.searchParams.keys()];
  const query = names.length === 0 ? '' : `?${names.map((n) => `${encodeURIComponent(n)}=${REDACTED}`).join('&')}`;
  return redact(`${u.origin}${u.pathname}${query}`);
}
