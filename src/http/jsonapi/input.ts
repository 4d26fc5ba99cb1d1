/**
 * Reading a create/update request document: the top-level shape, `data.type`, and each
 * attribute against the type's writable allow-list. Anything not on the list (unknown,
 * read-only or internal) is refused by name, never silently dropped.
 */
import { isObject } from '../../json.ts';
import { AppError, invalidAt } from '../../errors.ts';
import { checkValue, type InputSchema } from '../../input.ts';
import type { RelationshipSpec } from '../../resources/resource.ts';

export interface DocumentTarget {
  type: string;
  /** Present for updates: data.id must equal it. */
  id?: string;
  /**
   * The type's relationships. A to-one relationship whose column is a writable attribute
   * may be given as linkage instead of that attribute, as JSON:API clients do.
   */
  relationships?: Readonly<Record<string, RelationshipSpec>>;
  /**
   * Updates: the stored resource's attributes and relationships as a client reads them. A
   * member that is not writable but repeats its stored value is an echo of a read (clients
   * send back what they got, read-only members included) and is ignored.
   */
  current?: Readonly<Record<string, unknown>>;
}

/** An id given as linkage: longer than any id, and it cannot name a row. */
const MAX_LINKAGE_ID = 64;

interface Linkage {
  name: string;
  /** The attribute the relationship stands for. */
  column: string;
  id: string | null;
}

/**
 * The attributes that `relationships` stands for. A relationship object without `data`
 * (only links or meta, as a client echoes what it read) says nothing.
 */
function readLinkage(relationships: unknown, target: DocumentTarget, schema: InputSchema): Linkage[] {
  if (!isObject(relationships)) throw invalidAt('/data/relationships', 'relationships must be an object');
  const out: Linkage[] = [];
  for (const [name, value] of Object.entries(relationships)) {
    const at = `/data/relationships/${name}`;
    const rel = target.relationships !== undefined && Object.hasOwn(target.relationships, name) ? target.relationships[name] : undefined;
    const column = rel?.kind === 'one' ? rel.column : undefined;
    const field = column !== undefined && Object.hasOwn(schema, column) ? schema[column] : undefined;
    if (rel === undefined) throw invalidAt(at, `${name} is not a relationship of ${target.type}`);
    if (!isObject(value)) throw invalidAt(at, `${name} must be a relationship object with a data member`);
    if (!Object.hasOwn(value, 'data')) continue;
    if (column === undefined || field === undefined) throw invalidAt(at, `${name} cannot be set through ${target.type}`);
    const data = value.data;
    if (data === null) {
      if (!field.nullable) throw invalidAt(`${at}/data`, `${name} must not be null`);
      out.push({ name, column, id: null });
      continue;
    }
    if (!isObject(data)) throw invalidAt(`${at}/data`, `${name}.data must be a resource identifier {type, id} or null`);
    if (data.type !== rel.type) throw invalidAt(`${at}/data/type`, `${name}.data.type must be ${rel.type}`);
    if (typeof data.id !== 'string' || data.id === '' || data.id.length > MAX_LINKAGE_ID)
      throw invalidAt(`${at}/data/id`, `${name}.data.id must be the id of a ${rel.type}`);
    out.push({ name, column, id: data.id });
  }
  return out;
}

/** Ids are UUIDs, which compare case-insensitively. */
const sameId = (a: unknown, b: unknown) => (typeof a === 'string' && typeof b === 'string' ? a.toLowerCase() === b.toLowerCase() : a === b);

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
    if (data.id !== undefined || data.lid !== undefined)
      throw new AppError('forbidden', 'Client-generated ids are not supported', { source: { pointer: '/data/id' } });
  } else if (typeof data.id !== 'string' || data.id.toLowerCase() !== target.id.toLowerCase()) {
    // Ids are UUIDs, which compare case-insensitively, as they do in the URL.
    throw new AppError('conflict', 'data.id must match the id in the URL', { source: { pointer: '/data/id' } });
  }
  for (const k of Object.keys(data)) {
    // links are the server's to give: a client that echoes what it read sends them back.
    if (!['type', 'id', 'attributes', 'relationships', 'meta', 'links'].includes(k)) throw invalidAt(`/data/${k}`, `Unexpected member ${k}`);
  }
  const attrs = data.attributes ?? {};
  if (!isObject(attrs)) throw invalidAt('/data/attributes', 'attributes must be an object');
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(attrs)) {
    const f = schema[name];
    if (!f || !Object.hasOwn(schema, name)) {
      if (target.current !== undefined && Object.hasOwn(target.current, name) && JSON.stringify(target.current[name]) === JSON.stringify(value)) continue;
      throw invalidAt(`/data/attributes/${name}`, `${name} is not a writable attribute of ${target.type}`);
    }
    out[name] = checkValue(name, f, value, `/data/attributes/${name}`);
  }
  if (data.relationships !== undefined) {
    for (const { name, column, id } of readLinkage(data.relationships, target, schema)) {
      if (out[column] !== undefined && !sameId(out[column], id)) {
        throw invalidAt(`/data/relationships/${name}`, `${name} and ${column} name different resources; give one of them`);
      }
      out[column] = checkValue(column, schema[column]!, id, `/data/attributes/${column}`);
    }
  }
  if (target.id === undefined) {
    for (const [name, f] of Object.entries(schema)) {
      if (f.required && out[name] === undefined) throw invalidAt(`/data/attributes/${name}`, `${name} is required`);
    }
  }
  return out;
}
