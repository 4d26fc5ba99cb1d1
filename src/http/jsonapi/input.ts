/**
 * Reading a create/update request document: the top-level shape, `data.type`, and each
 * attribute against the type's writable allow-list. Anything not on the list (unknown,
 * read-only or internal) is refused by name, never silently dropped.
 */
import { AppError, invalidAt } from '../../errors.ts';

export type InputField =
  | { kind: 'string'; required?: boolean; nullable?: boolean; max?: number; pattern?: RegExp; patternText?: string; trim?: boolean }
  | { kind: 'integer'; required?: boolean; nullable?: boolean; min?: number; max?: number }
  | { kind: 'boolean'; required?: boolean; nullable?: boolean }
  | { kind: 'enum'; required?: boolean; nullable?: boolean; values: readonly string[] }
  | { kind: 'object'; required?: boolean; nullable?: boolean; maxBytes?: number };

export type InputSchema = Readonly<Record<string, InputField>>;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkValue(name: string, f: InputField, v: unknown): unknown {
  const at = `/data/attributes/${name}`;
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
    case 'object':
      if (!isObject(v)) throw invalidAt(at, `${name} must be an object`);
      if (JSON.stringify(v).length > (f.maxBytes ?? 65_536)) throw invalidAt(at, `${name} is too large`);
      return v;
  }
}

export interface DocumentTarget {
  type: string;
  /** Present for updates: data.id must equal it. */
  id?: string;
}

/**
 * Validates a request document and returns its attributes, checked against `schema`.
 * For creates, required attributes must be present; for updates every attribute is optional.
 */
export function readAttributes(body: unknown, target: DocumentTarget, schema: InputSchema): Record<string, unknown> {
  if (!isObject(body)) throw invalidAt('', 'The request document must be a JSON object');
  for (const k of Object.keys(body)) {
    if (!['data', 'meta', 'jsonapi'].includes(k)) throw invalidAt(`/${k}`, `Unexpected top-level member ${k}`);
  }
  const data = body.data;
  if (!isObject(data)) throw invalidAt('/data', 'data must be a resource object');
  if (typeof data.type !== 'string') throw invalidAt('/data/type', 'data.type is required');
  if (data.type !== target.type) {
    throw new AppError('type_mismatch', `data.type must be ${target.type}`, { source: { pointer: '/data/type' } });
  }
  if (target.id === undefined) {
    if (data.id !== undefined || data.lid !== undefined) throw new AppError('forbidden', 'Client-generated ids are not supported', { source: { pointer: '/data/id' } });
  } else if (typeof data.id !== 'string' || data.id.toLowerCase() !== target.id.toLowerCase()) {
    // Ids are UUIDs, which compare case-insensitively, as they do in the URL.
    throw new AppError('conflict', 'data.id must match the id in the URL', { source: { pointer: '/data/id' } });
  }
  for (const k of Object.keys(data)) {
    if (!['type', 'id', 'attributes', 'meta'].includes(k)) throw invalidAt(`/data/${k}`, k === 'relationships' ? 'Relationships are set through their *_id attributes' : `Unexpected member ${k}`);
  }
  const attrs = data.attributes ?? {};
  if (!isObject(attrs)) throw invalidAt('/data/attributes', 'attributes must be an object');
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(attrs)) {
    const f = schema[name];
    if (!f || !Object.hasOwn(schema, name)) throw invalidAt(`/data/attributes/${name}`, `${name} is not a writable attribute of ${target.type}`);
    out[name] = checkValue(name, f, value);
  }
  if (target.id === undefined) {
    for (const [name, f] of Object.entries(schema)) {
      if (f.required && out[name] === undefined) throw invalidAt(`/data/attributes/${name}`, `${name} is required`);
    }
  }
  return out;
}
