/**
 * Validates a JSON:API query string (decisions §3) into a ParsedQuery.
 *
 * Every failure is an AppError `invalid_query` whose `source.parameter` is the raw key the
 * client sent, so a client can point at the exact culprit. Lookups into specs go through
 * Object.hasOwn: parameter names are hostile, and `filter[constructor]` must not find
 * Object.prototype.constructor.
 */
import { invalidParam, quoteName } from '../../errors.ts';
import type { AttrKind, AttrSpec, ResourceSpec } from '../../resources/resource.ts';
import type { Cursor, JsonApiFilter, JsonApiFilterOp, Page, ParsedQuery, SortKey } from './types.ts';
import { parseDateTime } from '../../datetime.ts';

export interface ParseQueryOptions {
  registry: (type: string) => ResourceSpec | undefined;
  /** Collection request: only these accept filter, sort and page. */
  list: boolean;
}

export type RawQuery = Record<string, string | string[] | undefined>;

/** Anything longer is rejected before any splitting or regex work. */
const MAX_RAW_LENGTH = 4096;
const MAX_VALUE_LENGTH = 1024;
/** The limits a query is held to; exported for the published OpenAPI document (openapi.ts). */
export const QUERY_LIMITS = {
  maxIncludePaths: 20,
  maxIncludeDepth: 3,
  maxSortKeys: 5,
  maxInValues: 100,
  defaultLimit: 50,
  maxLimit: 250,
  maxOffset: 1_000_000,
};
const MAX_INCLUDE_PATHS = QUERY_LIMITS.maxIncludePaths;
const MAX_INCLUDE_DEPTH = QUERY_LIMITS.maxIncludeDepth;
const MAX_SORT_KEYS = QUERY_LIMITS.maxSortKeys;
const MAX_IN_VALUES = QUERY_LIMITS.maxInValues;
const DEFAULT_LIMIT = QUERY_LIMITS.defaultLimit;
const MAX_LIMIT = QUERY_LIMITS.maxLimit;
const MAX_OFFSET = QUERY_LIMITS.maxOffset;

const FILTER_OPS: readonly JsonApiFilterOp[] = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'is_null', 'contains'];
const RANGE_KINDS: readonly AttrKind[] = ['integer', 'datetime', 'string'];
/** json cannot be compared and string_array has no total order worth exposing. */
const SORTABLE_KINDS: readonly AttrKind[] = ['string', 'integer', 'boolean', 'datetime', 'uuid', 'enum'];

/** Integer attributes are PostgreSQL `integer` columns: a value beyond them cannot match and must not reach SQL. */
const INT4_MIN = -(2 ** 31);
const INT4_MAX = 2 ** 31 - 1;
const isInt4 = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= INT4_MIN && (n as number) <= INT4_MAX;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// Date-only, or date-time with a mandatory zone: a zone-less time would be read in the
// server's local time. A space is accepted as the offset sign because an unencoded `+`
// in a query string decodes to a space.

export function parseQuery(raw: RawQuery, spec: ResourceSpec, opts: ParseQueryOptions): ParsedQuery {
  const result: ParsedQuery = {
    include: [],
    fields: new Map(),
    filter: [],
    sort: defaultSort(spec),
    page: { kind: 'keyset', limit: DEFAULT_LIMIT },
    count: false,
  };
  const page: Partial<Record<'limit' | 'offset' | 'after' | 'before' | 'count', string>> = {};

  for (const name of Object.keys(raw)) {
    const value = raw[name];
    if (value === undefined) continue;
    if (name.length > MAX_RAW_LENGTH) throw invalidParam(name, 'Parameter name is too long');
    if (typeof value !== 'string') throw invalidParam(name, 'Parameter must not be repeated');
    if (value.length > MAX_RAW_LENGTH) throw invalidParam(name, `Value must be at most ${MAX_RAW_LENGTH} characters`);
    if (value.includes('\0')) throw invalidParam(name, 'Value must not contain NUL characters');

    if (name === 'include') {
      result.include = parseInclude(name, value, spec, opts.registry);
      continue;
    }
    const fieldsType = /^fields\[([^[\]]*)\]$/.exec(name)?.[1];
    if (fieldsType !== undefined) {
      result.fields.set(fieldsType, parseFields(name, value, fieldsType, opts.registry));
      continue;
    }
    const family = /^(filter|page)\[/.exec(name)?.[1] ?? (name === 'sort' ? 'sort' : undefined);
    if (family === undefined) throw invalidParam(name, 'Unknown query parameter');
    if (!opts.list) throw invalidParam(name, `${family} is only allowed on collections`);

    if (family === 'sort') {
      result.sort = parseSort(name, value, spec);
    } else if (family === 'filter') {
      result.filter.push(parseFilter(name, value, spec));
    } else {
      const key = /^page\[(limit|offset|after|before|count)\]$/.exec(name)?.[1] as keyof typeof page | undefined;
      if (key === undefined) throw invalidParam(name, 'Unknown page parameter; use limit, offset, after, before or count');
      page[key] = value;
    }
  }

  result.count = page.count === undefined ? false : parseBoolean('page[count]', page.count);
  result.page = parsePage(page, result.sort, spec);
  return result;
}

function defaultSort(spec: ResourceSpec): SortKey[] {
  const attr = Object.hasOwn(spec.attributes, 'inserted_at') ? spec.attributes.inserted_at : undefined;
  return [{ attr: 'inserted_at', column: attr?.column ?? 'inserted_at', kind: attr?.kind ?? 'datetime', desc: true }];
}

function attribute(spec: ResourceSpec, name: string): AttrSpec | undefined {
  return Object.hasOwn(spec.attributes, name) ? spec.attributes[name] : undefined;
}

/** The registry is caller code keyed by a hostile string: only trust a spec that names itself. */
function lookupType(registry: ParseQueryOptions['registry'], type: string): ResourceSpec | undefined {
  const found = registry(type);
  return found !== undefined && found.type === type ? found : undefined;
}

function parseInclude(name: string, value: string, spec: ResourceSpec, registry: ParseQueryOptions['registry']): string[][] {
  if (value === '') return [];
  const seen = new Set<string>();
  const paths: string[][] = [];
  for (const path of value.split(',')) {
    if (seen.has(path)) continue;
    seen.add(path);
    if (seen.size > MAX_INCLUDE_PATHS) throw invalidParam(name, `At most ${MAX_INCLUDE_PATHS} include paths are allowed`);
    const segments = path.split('.');
    if (segments.length > MAX_INCLUDE_DEPTH) throw invalidParam(name, `Include path "${path}" is deeper than ${MAX_INCLUDE_DEPTH}`);
    let current: ResourceSpec | undefined = spec;
    for (const segment of segments) {
      const rel = current !== undefined && Object.hasOwn(current.relationships, segment) ? current.relationships[segment] : undefined;
      if (current === undefined || rel === undefined) {
        throw invalidParam(name, `"${path}" is not a relationship path of ${spec.type}`);
      }
      current = lookupType(registry, rel.type);
    }
    paths.push(segments);
  }
  return paths;
}

function parseFields(name: string, value: string, type: string, registry: ParseQueryOptions['registry']): Set<string> {
  const target = lookupType(registry, type);
  if (target === undefined) throw invalidParam(name, `Unknown resource type "${type}"`);
  const names = new Set<string>();
  if (value === '') return names;
  for (const field of value.split(',')) {
    if (!Object.hasOwn(target.attributes, field) && !Object.hasOwn(target.relationships, field)) {
      throw invalidParam(name, `"${field}" is not a field of ${type}`);
    }
    names.add(field);
  }
  return names;
}

function parseSort(name: string, value: string, spec: ResourceSpec): SortKey[] {
  const parts = value.split(',');
  if (parts.length > MAX_SORT_KEYS) throw invalidParam(name, `At most ${MAX_SORT_KEYS} sort keys are allowed`);
  const keys: SortKey[] = [];
  for (const part of parts) {
    const desc = part.startsWith('-');
    const attr = desc ? part.slice(1) : part;
    const def = attribute(spec, attr);
    if (def === undefined || !canSort(def)) {
      throw invalidParam(name, `Cannot sort by ${quoteName(attr)}; sortable: ${namesWhere(spec, canSort).join(', ')}`);
    }
    if (keys.some((k) => k.attr === attr)) throw invalidParam(name, `"${attr}" appears more than once`);
    keys.push({ attr, column: def.column, kind: def.kind, desc });
  }
  return keys;
}

export const canFilter = (def: AttrSpec) => def.filter === true && def.kind !== 'json';
export const canSort = (def: AttrSpec) => def.sort === true && SORTABLE_KINDS.includes(def.kind);

/**
 * The operators a filterable attribute takes: the one rule parseFilter applies and the
 * OpenAPI document lists. A string array answers element membership only.
 */
export function filterOperators(def: AttrSpec): JsonApiFilterOp[] {
  return FILTER_OPS.filter((op) => {
    if (op === 'is_null') return def.nullable === true;
    if (def.kind === 'string_array') return op === 'contains';
    if (op === 'contains') return def.kind === 'string';
    if (op === 'gt' || op === 'gte' || op === 'lt' || op === 'lte') return RANGE_KINDS.includes(def.kind);
    return true;
  });
}

function namesWhere(spec: ResourceSpec, test: (def: AttrSpec) => boolean): string[] {
  return Object.entries(spec.attributes)
    .filter(([, def]) => test(def))
    .map(([attr]) => attr);
}

function parseFilter(name: string, value: string, spec: ResourceSpec): JsonApiFilter {
  const match = /^filter\[([^[\]]*)\](?:\[([^[\]]*)\])?$/.exec(name);
  if (match === null) throw invalidParam(name, 'Use filter[attribute] or filter[attribute][operator]');
  const attr = match[1] ?? '';
  const def = attribute(spec, attr);
  if (def === undefined || !canFilter(def))
    throw invalidParam(name, `Cannot filter by ${quoteName(attr)}; filterable: ${namesWhere(spec, canFilter).join(', ')}`);
  const op = (match[2] ?? 'eq') as JsonApiFilterOp;
  if (!FILTER_OPS.includes(op)) throw invalidParam(name, `Unknown filter operator "${op}"`);

  const clause = (v: unknown): JsonApiFilter => ({ attr, column: def.column, kind: def.kind, op, value: v });
  const refuse = (): never => {
    throw invalidParam(name, `Operator ${op} does not apply to ${attr}`);
  };

  if (!filterOperators(def).includes(op)) refuse();
  if (op === 'is_null') return clause(parseBoolean(name, value));
  if (def.kind === 'string_array') return clause(coerce(name, value, def, def.values === undefined ? 'string' : 'enum'));
  if (op === 'in') {
    const parts = value.split(',');
    if (parts.length > MAX_IN_VALUES) throw invalidParam(name, `At most ${MAX_IN_VALUES} values are allowed`);
    return clause(parts.map((part) => coerce(name, part, def, def.kind)));
  }
  return clause(coerce(name, value, def, def.kind));
}

function coerce(name: string, value: string, def: AttrSpec, kind: AttrKind): unknown {
  if (value.length > MAX_VALUE_LENGTH) throw invalidParam(name, `Value must be at most ${MAX_VALUE_LENGTH} characters`);
  switch (kind) {
    case 'integer': {
      const n = /^-?\d{1,16}$/.test(value) ? Number(value) : NaN;
      if (!isInt4(n)) throw invalidParam(name, `Value must be a whole number from ${INT4_MIN} to ${INT4_MAX}`);
      return n === 0 ? 0 : n; // no -0
    }
    case 'boolean':
      return parseBoolean(name, value);
    case 'datetime': {
      const date = parseQueryDateTime(value);
      if (date === undefined) throw invalidParam(name, 'Value must be an ISO 8601 date or date-time with a time zone');
      return date;
    }
    case 'uuid':
      if (!UUID_RE.test(value)) throw invalidParam(name, 'Value must be a UUID');
      return value.toLowerCase();
    case 'enum':
      if (!(def.values ?? []).includes(value)) throw invalidParam(name, `Value must be one of: ${(def.values ?? []).join(', ')}`);
      return value;
    default:
      return value;
  }
}

function parseBoolean(name: string, value: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw invalidParam(name, 'Value must be true or false');
}

/**
 * A datetime in a query string: strict ISO 8601 (parseDateTime), also a bare date, and a
 * '+' that the query string decoded into a space read back as '+'.
 */
export function parseQueryDateTime(value: string): Date | undefined {
  return parseDateTime(value, { dateOnly: true, spaceAsPlus: true });
}

function parseInteger(name: string, value: string, min: number, max: number): number {
  const n = /^\d{1,7}$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= max)) throw invalidParam(name, `Value must be a whole number from ${min} to ${max}`);
  return n;
}

function parsePage(page: Partial<Record<'limit' | 'offset' | 'after' | 'before', string>>, sort: SortKey[], spec: ResourceSpec): Page {
  const limit = page.limit === undefined ? DEFAULT_LIMIT : parseInteger('page[limit]', page.limit, 1, MAX_LIMIT);
  if (page.offset !== undefined) {
    if (page.after !== undefined || page.before !== undefined) {
      throw invalidParam('page[offset]', 'page[offset] cannot be combined with page[after] or page[before]');
    }
    return { kind: 'offset', limit, offset: parseInteger('page[offset]', page.offset, 0, MAX_OFFSET) };
  }
  if (page.after !== undefined && page.before !== undefined) {
    throw invalidParam('page[before]', 'page[after] and page[before] cannot be combined');
  }
  // Without a cursor the first page is a keyset page: its links then carry cursors,
  // which stay stable when rows are inserted, unlike offsets.
  if (page.after !== undefined) return { kind: 'keyset', limit, after: decodeCursor('page[after]', page.after, sort, spec) };
  if (page.before !== undefined) return { kind: 'keyset', limit, before: decodeCursor('page[before]', page.before, sort, spec) };
  return { kind: 'keyset', limit };
}

/** The cursor of `row` under `sort`: what page[after]/page[before] accept back. */
export function encodeCursor(sort: SortKey[], row: object): string {
  const cells = row as Record<string, unknown>;
  const v = sort.map((key) => {
    const value = cells[key.column];
    if (value instanceof Date) return value.toISOString();
    // int8 columns come back from node-postgres as strings.
    if (key.kind === 'integer' && typeof value === 'string') return Number(value);
    return value ?? null;
  });
  return Buffer.from(JSON.stringify({ v, id: String(cells.id) }), 'utf8').toString('base64url');
}

function decodeCursor(name: string, value: string, sort: SortKey[], spec: ResourceSpec): Cursor {
  const bad = (): never => {
    throw invalidParam(name, 'Invalid cursor; it may belong to another sort order');
  };
  if (!/^[A-Za-z0-9_-]+$/.test(value)) bad();
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    return bad();
  }
  if (typeof decoded !== 'object' || decoded === null) return bad();
  const { v, id } = decoded as { v?: unknown; id?: unknown };
  if (!Array.isArray(v) || v.length !== sort.length || typeof id !== 'string' || !UUID_RE.test(id)) return bad();
  const values = sort.map((key, i) => {
    const cell: unknown = v[i];
    if (cell === null) return attribute(spec, key.attr)?.nullable === true ? null : bad();
    switch (key.kind) {
      case 'integer':
        return isInt4(cell) ? cell : bad();
      case 'boolean':
        return typeof cell === 'boolean' ? cell : bad();
      case 'datetime':
        return (typeof cell === 'string' ? parseQueryDateTime(cell) : undefined) ?? bad();
      case 'uuid':
        return typeof cell === 'string' && UUID_RE.test(cell) ? cell.toLowerCase() : bad();
      default:
        return typeof cell === 'string' && cell.length <= MAX_VALUE_LENGTH && !cell.includes('\0') ? cell : bad();
    }
  });
  return { values, id: id.toLowerCase() };
}
