/**
 * The one vocabulary for checking input values, used by the JSON:API documents
 * (http/jsonapi/input.ts, pointers into /data/attributes) and the admin API's plain
 * objects (readInput, pointers /name): the same rules give the same texts everywhere.
 */
import { invalidAt } from './errors.ts';
import { isUuid } from './ids.ts';
import { isObject } from './json.ts';

export type InputField =
  | { kind: 'string'; required?: boolean; nullable?: boolean; max?: number; pattern?: RegExp; patternText?: string; trim?: boolean }
  | { kind: 'integer'; required?: boolean; nullable?: boolean; min?: number; max?: number }
  | { kind: 'boolean'; required?: boolean; nullable?: boolean }
  | { kind: 'enum'; required?: boolean; nullable?: boolean; values: readonly string[] }
  /** `schema`: the JSON Schema the OpenAPI document gives the object, when its members are checked after (a widget's config). */
  | { kind: 'object'; required?: boolean; nullable?: boolean; maxBytes?: number; schema?: Readonly<Record<string, unknown>> }
  | { kind: 'id'; required?: boolean; nullable?: boolean }
  | { kind: 'array'; required?: boolean; nullable?: boolean; maxItems: number };

export type InputSchema = Readonly<Record<string, InputField>>;

/** A slug (of a data model, a provider): what a URL, a step and a GraphQL argument can name it by. */
export const SLUG_RE = /^[a-z0-9-]{1,63}$/;

/** One value against its field's rules; `at` is the pointer an error names. */
export function checkValue(name: string, f: InputField, v: unknown, at: string): unknown {
  if (v === null) {
    if (f.nullable) return null;
    throw invalidAt(at, `${name} must not be null`);
  }
  switch (f.kind) {
    case 'string': {
      if (typeof v !== 'string') throw invalidAt(at, `${name} must be a string`);
      if (v.includes('\0') || !v.isWellFormed()) throw invalidAt(at, `${name} must be valid Unicode text without NUL characters`);
      const s = f.trim === false ? v : v.trim();
      if (f.required && s === '') throw invalidAt(at, `${name} must not be empty`);
      if (s.length > (f.max ?? 1000)) throw invalidAt(at, `${name} must be at most ${f.max ?? 1000} characters`);
      if (f.pattern && !f.pattern.test(s)) throw invalidAt(at, `${name} ${f.patternText ?? 'has an invalid format'}`);
      return s;
    }
    case 'integer':
      if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalidAt(at, `${name} must be a whole number`);
      if (f.min !== undefined && v < f.min) throw invalidAt(at, `${name} must be at least ${f.min}`);
      if (f.max !== undefined && v > f.max) throw invalidAt(at, `${name} must be at most ${f.max}`);
      return v;
    case 'boolean':
      if (typeof v !== 'boolean') throw invalidAt(at, `${name} must be true or false`);
      return v;
    case 'enum':
      if (typeof v !== 'string' || !f.values.includes(v)) throw invalidAt(at, `${name} must be one of ${f.values.join(', ')}`);
      return v;
    case 'id':
      if (!isUuid(v)) throw invalidAt(at, `${name} must be an id`);
      return v.toLowerCase();
    case 'array':
      if (!Array.isArray(v)) throw invalidAt(at, `${name} must be an array`);
      if (v.length > f.maxItems) throw invalidAt(at, `${name} must have at most ${f.maxItems} items`);
      return v;
    case 'object':
      if (!isObject(v)) throw invalidAt(at, `${name} must be an object`);
      if (JSON.stringify(v).length > (f.maxBytes ?? 65_536)) throw invalidAt(at, `${name} is too large`);
      return v;
  }
}

/**
 * The members of a plain input object that `schema` names, each checked; a required one
 * that is absent is refused. Members the schema does not name are not read.
 */
export function readInput(
  schema: InputSchema,
  input: Readonly<Record<string, unknown>>,
  pointerOf: (name: string) => string = (name) => `/${name}`,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(schema)) {
    const v = input[name];
    if (v === undefined) {
      if (f.required) throw invalidAt(pointerOf(name), `${name} is required`);
      continue;
    }
    out[name] = checkValue(name, f, v, pointerOf(name));
  }
  return out;
}
