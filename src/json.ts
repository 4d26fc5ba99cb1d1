/**
 * JSON helpers shared by every surface and by facts: one notion of an object, one nesting
 * limit, one parser of JSON text that enters the service, one canonical text.
 */
import { AppError, invalidAt, UNSTORABLE_TEXT } from './errors.ts';

/** Arrays and objects nest at most this deep in any JSON the service reads. */
export const MAX_JSON_DEPTH = 64;

/** A JSON object: not null, not an array, and a plain object (no class instance). */
export function isObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Whether the text nests arrays/objects deeper than `max`, scanning outside strings; stops early past the limit. */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped char
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}

/**
 * Whether a Content-Type names JSON: application/json, and unless `suffixed` is false also any
 * application/*+json type (RFC 6839), whose bodies parse the same. Parameters and case do not count.
 */
export function isJsonMediaType(contentType: string | undefined, { suffixed = true } = {}): boolean {
  if (contentType === undefined) return false;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || (suffixed && type.startsWith('application/') && type.endsWith('+json'));
}

/** One JSON pointer token (RFC 6901). */
export const pointerToken = (k: string | number) => String(k).replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * Whether PostgreSQL can store the text: it refuses NUL (in text and in jsonb) and UTF-8
 * has no form for a surrogate that is not half of a pair.
 */
export function isStorableText(s: string): boolean {
  return !s.includes('\0') && s.isWellFormed();
}

// The escapes that can spell NUL or half a surrogate pair (pairs match too), or a raw NUL.
const UNSTORABLE_HINT = /\\u(?:0000|[dD][89a-fA-F])|\0/;

/**
 * A cheap test of JSON text before its value is walked: false means no string or member
 * name parsed from it can hold unstorable text; true only that one might.
 */
export function mayHoldUnstorableText(text: string): boolean {
  return UNSTORABLE_HINT.test(text) || !text.isWellFormed();
}

/**
 * The JSON pointer of the first string or member name (in document order) that the
 * database cannot store, or undefined when there is none. Iterative: a value from an
 * expression may nest deeper than any stack.
 */
export function unstorableTextAt(root: unknown): string | undefined {
  // A member name is checked (a `name` entry) right before its value.
  const stack: Array<{ v: unknown; at: string; name?: true }> = [{ v: root, at: '' }];
  while (stack.length > 0) {
    const { v, at, name } = stack.pop()!;
    if (typeof v === 'string') {
      if (isStorableText(v)) continue;
      return name ? spellUnstorable(at) : at;
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], at: `${at}/${i}` });
    } else if (typeof v === 'object' && v !== null) {
      const keys = Object.keys(v);
      for (let i = keys.length - 1; i >= 0; i--) {
        const k = keys[i]!;
        const child = `${at}/${pointerToken(k)}`;
        stack.push({ v: (v as Record<string, unknown>)[k], at: child }, { v: k, at: child, name: true });
      }
    }
  }
  return undefined;
}

/**
 * The text with NUL and unpaired surrogates spelled as JSON escapes: a pointer through an
 * unstorable member name, fit to be shown and stored itself (in a step's error, say).
 */
export function spellUnstorable(s: string): string {
  return s.replace(/\0|\p{Cs}/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * JSON with object members in code-unit order at every level, undefined members left out:
 * equal values give equal text (entity ids of object keys, idempotency fingerprints).
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (Buffer.isBuffer(value)) return JSON.stringify(value.toString('base64'));
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    return `{${Object.keys(obj)
      .sort()
      .filter((k) => obj[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** JSON text from outside (a body, an uploaded document): nesting, prototype keys and unstorable text refused as a 4xx. */
export function parseJson(text: string): unknown {
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) {
    throw new AppError('invalid_request', `The JSON document is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  let value: unknown;
  try {
    // The reviver costs a call per value; a text that cannot spell those keys (no escapes,
    // neither name) does without it.
    value = mayHoldPrototypeKeys(text) ? JSON.parse(text, stripPrototypeKeys) : JSON.parse(text);
  } catch {
    throw new AppError('bad_request', 'The request body is not valid JSON');
  }
  // Refused here, where JSON enters, rather than by the database wherever it is stored
  // (a 503 on the webhook path, "malformed" without a place elsewhere).
  const at = mayHoldUnstorableText(text) ? unstorableTextAt(value) : undefined;
  if (at !== undefined) throw invalidAt(at, UNSTORABLE_TEXT);
  return value;
}

function mayHoldPrototypeKeys(text: string): boolean {
  return text.includes('__proto__') || text.includes('constructor') || text.includes('\\u');
}

// A reviver returning undefined deletes the member, so these keys never reach an object.
function stripPrototypeKeys(key: string, value: unknown): unknown {
  return key === '__proto__' || key === 'constructor' ? undefined : value;
}
