/**
 * Serialization of rows into JSON:API documents: the public attribute list is the only
 * way a column reaches a client; `fields` narrows it; `include` adds related resources
 * with full linkage, each loaded through its own type's visibility rule.
 */
import { invalidParam } from '../../errors.ts';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/connect.ts';
import type { ResourceType, TypeRegistry } from '../../resources/resource.ts';
import { loadVisibleBy } from './read.sql.ts';
import type { ParsedQuery } from './types.ts';

type Row = Record<string, any>;
type Identifier = { type: string; id: string };
type Linkage = Identifier | null | Identifier[];

export const API_PREFIX = '/api/json/v1';

function jsonValue(v: unknown): unknown {
  if (v instanceof Date) return v.toISOString();
  return v === undefined ? null : v;
}

/** Linkage found while walking `include`, keyed by type:id:relationship. */
type LinkageMap = Map<string, Linkage>;
const linkKey = (type: string, id: string, rel: string) => `${type}:${id}:${rel}`;

export function resourceObject(
  type: ResourceType,
  row: Row,
  fields: Set<string> | undefined,
  linkage: LinkageMap | undefined,
  now: Date,
): Record<string, unknown> {
  const presented = type.present?.(row, now);
  const attributes: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(type.attributes)) {
    if (fields && !fields.has(name)) continue;
    attributes[name] = jsonValue(presented && name in presented ? presented[name] : row[spec.column]);
  }
  const id = String(row.id);
  const relationships: Record<string, unknown> = {};
  for (const [name, rel] of Object.entries(type.relationships)) {
    if (fields && !fields.has(name)) continue;
    const found = linkage?.get(linkKey(type.type, id, name));
    if (found !== undefined) relationships[name] = { data: found };
    else if (rel.kind === 'one') relationships[name] = { data: row[rel.column!] ? { type: rel.type, id: String(row[rel.column!]) } : null };
    else relationships[name] = { meta: { included: false } };
  }
  const obj: Record<string, unknown> = { type: type.type, id, attributes };
  if (Object.keys(relationships).length > 0) obj.relationships = relationships;
  obj.links = { self: `${API_PREFIX}/${type.path}/${id}` };
  return obj;
}

/** Turns ['a','b'] and ['a','c'] into a tree {a: {b: {}, c: {}}}. */
function includeTree(paths: string[][]): Map<string, any> {
  const root = new Map<string, any>();
  for (const p of paths) {
    let node = root;
    for (const seg of p) {
      if (!node.has(seg)) node.set(seg, new Map());
      node = node.get(seg);
    }
  }
  return root;
}

/** Resources one to-many relationship may add to a compound document. */
export const MAX_INCLUDED_PER_RELATIONSHIP = 1000;

async function walkIncludes(
  db: Db,
  registry: TypeRegistry,
  principal: Principal,
  type: ResourceType,
  parents: Row[],
  tree: Map<string, Map<string, any>>,
  linkage: LinkageMap,
  included: Map<string, { type: ResourceType; row: Row }>,
): Promise<void> {
  for (const [relName, subtree] of tree) {
    const rel = type.relationships[relName]!;
    const target = registry.get(rel.type)!;
    let related: Row[];
    if (rel.kind === 'one') {
      const ids = [...new Set(parents.map((p) => p[rel.column!]).filter((v): v is string => typeof v === 'string'))];
      related = await loadVisibleBy(db, target, principal, 'id', ids);
      const byId = new Map(related.map((r) => [String(r.id), r]));
      for (const p of parents) {
        const fk = p[rel.column!];
        // A related row the caller may not see is linked as null, never revealed.
        linkage.set(linkKey(type.type, String(p.id), relName), fk && byId.has(String(fk)) ? { type: target.type, id: String(fk) } : null);
      }
    } else {
      // A to-many relationship can be long (a workflow's runs): past the cap, the client is
      // pointed at the list endpoint, which pages, instead of getting an unbounded document.
      related = await loadVisibleBy(
        db,
        target,
        principal,
        rel.foreignKey!,
        parents.map((p) => String(p.id)),
        MAX_INCLUDED_PER_RELATIONSHIP + 1,
      );
      if (related.length > MAX_INCLUDED_PER_RELATIONSHIP) {
        throw invalidParam(
          'include',
          `include=${relName} would include more than ${MAX_INCLUDED_PER_RELATIONSHIP} ${target.type} resources; list them from /${target.path} with a filter on ${rel.foreignKey}, which pages`,
        );
      }
      const byParent = new Map<string, Identifier[]>();
      for (const r of related) {
        const k = String(r[rel.foreignKey!]);
        if (!byParent.has(k)) byParent.set(k, []);
        byParent.get(k)!.push({ type: target.type, id: String(r.id) });
      }
      for (const p of parents) linkage.set(linkKey(type.type, String(p.id), relName), byParent.get(String(p.id)) ?? []);
    }
    for (const r of related) included.set(`${target.type}:${r.id}`, { type: target, row: r });
    if (subtree.size > 0) await walkIncludes(db, registry, principal, target, related, subtree, linkage, included);
  }
}

export interface DocumentOptions {
  links?: Record<string, string | null>;
  meta?: Record<string, unknown>;
  /** The answer's instant (the deps clock), for attributes derived from time. */
  now: Date;
}

/**
 * A type's resource objects written straight to JSON text, with every member name, the
 * type and the link prefix encoded once per type rather than on every row: the text is
 * byte for byte JSON.stringify(resourceObject(...)), without building that object first.
 */
interface TypeWriter {
  head: string;
  selfPrefix: string;
  attributes: { name: string; key: string; column: string }[];
  relationships: { name: string; key: string; rel: ResourceType['relationships'][string] }[];
}

const writers = new WeakMap<ResourceType, TypeWriter>();

function writerOf(type: ResourceType): TypeWriter {
  let w = writers.get(type);
  if (w === undefined) {
    w = {
      head: `{"type":${JSON.stringify(type.type)},"id":`,
      selfPrefix: `${API_PREFIX}/${type.path}/`,
      attributes: Object.entries(type.attributes).map(([name, spec]) => ({ name, key: `${JSON.stringify(name)}:`, column: spec.column })),
      relationships: Object.entries(type.relationships).map(([name, rel]) => ({ name, key: `${JSON.stringify(name)}:`, rel })),
    };
    writers.set(type, w);
  }
  return w;
}

/** A value as JSON text the way JSON.stringify writes it as a member (a Date as its ISO text, undefined as null). */
function valueText(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  // toISOString writes digits, '-', '+', 'T', ':', '.' and 'Z' only: nothing JSON escapes.
  if (v instanceof Date) return `"${v.toISOString()}"`;
  return JSON.stringify(v);
}

/** resourceObject as JSON text: the same members in the same order. */
export function resourceText(type: ResourceType, row: Row, fields: Set<string> | undefined, linkage: LinkageMap | undefined, now: Date): string {
  const w = writerOf(type);
  const presented = type.present?.(row, now);
  let attrs = '';
  for (const a of w.attributes) {
    if (fields && !fields.has(a.name)) continue;
    const v = presented && a.name in presented ? presented[a.name] : row[a.column];
    attrs += `${attrs === '' ? '' : ','}${a.key}${valueText(v)}`;
  }
  const id = String(row.id);
  let rels = '';
  for (const r of w.relationships) {
    if (fields && !fields.has(r.name)) continue;
    const found = linkage?.get(linkKey(type.type, id, r.name));
    let text: string;
    if (found !== undefined) text = `{"data":${JSON.stringify(found)}}`;
    else if (r.rel.kind === 'one') {
      const fk = row[r.rel.column!];
      text = fk ? `{"data":{"type":${JSON.stringify(r.rel.type)},"id":${JSON.stringify(String(fk))}}}` : '{"data":null}';
    } else text = '{"meta":{"included":false}}';
    rels += `${rels === '' ? '' : ','}${r.key}${text}`;
  }
  const idText = JSON.stringify(id);
  return `${w.head}${idText},"attributes":{${attrs}}${rels === '' ? '' : `,"relationships":{${rels}}`},"links":{"self":${JSON.stringify(w.selfPrefix + id)}}}`;
}

/**
 * A document whose resources are JSON text already (resourceText): sendDocument and
 * serializeList join them, so a resource is serialized once, and a list's budget is
 * counted on the texts that are sent.
 */
export interface BuiltDocument {
  built: true;
  data: string | string[];
  included?: string[];
  links?: Record<string, string | null>;
  meta?: Record<string, unknown>;
}

export const isBuiltDocument = (doc: unknown): doc is BuiltDocument => typeof doc === 'object' && doc !== null && (doc as BuiltDocument).built === true;

const JSONAPI_MEMBER = '"jsonapi":{"version":"1.1"}';

/** The members after data and included, in the order JSON.stringify of the document object wrote them. */
function restMembers(doc: BuiltDocument): string {
  let out = '';
  if (doc.links) out += `,"links":${JSON.stringify(doc.links)}`;
  if (doc.meta) out += `,"meta":${JSON.stringify(doc.meta)}`;
  return out;
}

/** A built document's text: what JSON.stringify gave for the document object. */
export function documentText(doc: BuiltDocument): string {
  const data = typeof doc.data === 'string' ? doc.data : `[${doc.data.join(',')}]`;
  const included = doc.included === undefined ? '' : `,"included":[${doc.included.join(',')}]`;
  return `{${JSONAPI_MEMBER},"data":${data}${included}${restMembers(doc)}}`;
}

/** A complete document for one row or a list of rows of `type`. */
export async function buildDocument(
  db: Db,
  registry: TypeRegistry,
  principal: Principal,
  type: ResourceType,
  data: Row | Row[],
  q: Pick<ParsedQuery, 'include' | 'fields'>,
  opts: DocumentOptions,
): Promise<BuiltDocument> {
  const rows = Array.isArray(data) ? data : [data];
  const linkage: LinkageMap = new Map();
  const included = new Map<string, { type: ResourceType; row: Row }>();
  if (q.include.length > 0 && rows.length > 0) await walkIncludes(db, registry, principal, type, rows, includeTree(q.include), linkage, included);
  for (const r of rows) included.delete(`${type.type}:${r.id}`);
  const serialize = (t: ResourceType, r: Row) => resourceText(t, r, q.fields.get(t.type), linkage, opts.now);
  const doc: BuiltDocument = { built: true, data: Array.isArray(data) ? rows.map((r) => serialize(type, r)) : serialize(type, data) };
  if (q.include.length > 0) doc.included = [...included.values()].map(({ type: t, row }) => serialize(t, row));
  if (opts.links) doc.links = opts.links;
  if (opts.meta) doc.meta = opts.meta;
  return doc;
}

/** A list document's text, or where it would pass `maxBytes`: after `fit` data resources, or in `included`. */
export type BoundedText = { text: string } | { over: 'data'; fit: number } | { over: 'included' };

/**
 * A list document's text, resource by resource, stopping where it would pass `maxBytes`
 * (LIST_MAX_BYTES) instead of answering a text no client should receive. The first
 * resource always fits: one resource is bounded by its own columns' caps, and a default
 * page must never fail.
 */
export function serializeList(doc: BuiltDocument, maxBytes: number): BoundedText {
  const rest = restMembers(doc);
  // The document without its resources: {"jsonapi":...,"data":[],...} less the brackets the items sit in.
  let bytes = Buffer.byteLength(`{${JSONAPI_MEMBER}${rest}}`);
  const fits = (items: readonly string[], always: number): number | undefined => {
    for (let i = 0; i < items.length; i++) {
      bytes += Buffer.byteLength(items[i]!) + 1;
      if (bytes > maxBytes && i >= always) return i;
    }
    return undefined;
  };
  const data = typeof doc.data === 'string' ? [doc.data] : doc.data;
  const fit = fits(data, 1);
  if (fit !== undefined) return { over: 'data', fit };
  if (doc.included !== undefined && fits(doc.included, 0) !== undefined) return { over: 'included' };
  return { text: documentText({ ...doc, data }) };
}
