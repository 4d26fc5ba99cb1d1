/**
 * A small in-memory implementation of factQuery's semantics, written
 * from the decisions rather than from the SQL, so the property test compares two
 * independent readings of the same rules.
 */
import type { FieldType } from '../../src/db/tables.ts';

export interface RefFact {
  id: string;
  entity_id: string | null;
  observed_at: number;
  inserted_at: number;
  data: Record<string, unknown>;
}

export interface RefClause {
  field: string;
  op: string;
  value: unknown;
}

export interface RefModel {
  slug: string;
  fields: { name: string; type: FieldType | null }[];
  facts: RefFact[];
}

export interface RefArgs {
  mode: 'latest' | 'timeline';
  axis: 'observed_at' | 'inserted_at';
  since?: number;
  until?: number;
  filters: RefClause[];
  sort: 'observed_at' | 'inserted_at' | 'entity_id';
  direction: 'asc' | 'desc';
  limit: number;
  offset: number;
  join?: { model: RefModel; type: 'left' | 'inner'; filters: RefClause[] };
}

export interface RefRow {
  id: string;
  entity_id: string | null;
  observed_at: number;
  inserted_at: number;
  data: Record<string, unknown>;
}

export interface RefPage {
  rows: RefRow[];
  count: number;
  pageNumber: number;
  lastPage: number;
  hasNextPage: boolean;
  hasPreviousPage: boolean;
}

const DAY = 86_400_000;

const member = (data: Record<string, unknown>, field: string): unknown => (Object.hasOwn(data, field) && data[field] !== undefined ? data[field] : null);

/** JSON equality as jsonb has it: objects ignore member order, numbers compare by value. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => jsonEqual(x, bb[i]));
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao);
  return ak.length === Object.keys(bo).length && ak.every((k) => Object.hasOwn(bo, k) && jsonEqual(ao[k], bo[k]));
}

function typedEqual(v: unknown, x: unknown, type: FieldType | null): boolean {
  if (type === 'integer' || type === 'float') return typeof v === 'number' && v === x;
  if (type === 'datetime') return typeof v === 'string' && Date.parse(v) === Date.parse(x as string);
  return jsonEqual(v, x);
}

function typedCompare(v: unknown, x: unknown, type: FieldType | null): number | undefined {
  if (type === 'integer' || type === 'float') return typeof v === 'number' ? v - (x as number) : undefined;
  if (type === 'datetime') return typeof v === 'string' ? Date.parse(v) - Date.parse(x as string) : undefined;
  return undefined;
}

export function matches(c: RefClause, data: Record<string, unknown>, type: FieldType | null): boolean {
  const v = member(data, c.field);
  switch (c.op) {
    case 'is_null':
      return (v === null) === c.value;
    case 'eq':
      return v !== null && typedEqual(v, c.value, type);
    case 'ne':
      return !(v !== null && typedEqual(v, c.value, type));
    case 'in':
      return v !== null && (c.value as unknown[]).some((x) => typedEqual(v, x, type));
    case 'nin':
      return !(v !== null && (c.value as unknown[]).some((x) => typedEqual(v, x, type)));
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      if (v === null) return false;
      const d = typedCompare(v, c.value, type);
      if (d === undefined) return false;
      return c.op === 'gt' ? d > 0 : c.op === 'gte' ? d >= 0 : c.op === 'lt' ? d < 0 : d <= 0;
    }
    case 'contains':
      return typeof v === 'string' && v.includes(c.value as string);
    case 'starts_with':
      return typeof v === 'string' && v.startsWith(c.value as string);
    default:
      throw new Error(`unknown op ${c.op}`);
  }
}

function allMatch(clauses: RefClause[], model: RefModel, data: Record<string, unknown>): boolean {
  return clauses.every((c) => matches(c, data, model.fields.find((f) => f.name === c.field)!.type));
}

const axisOf = (f: RefFact, axis: RefArgs['axis']) => (axis === 'observed_at' ? f.observed_at : f.inserted_at);

/** Positive when a is later than b in the "latest" order of the axis: axis, then inserted_at, then id. */
function laterThan(a: RefFact, b: RefFact, axis: RefArgs['axis']): boolean {
  const keys = axis === 'observed_at' ? [a.observed_at - b.observed_at, a.inserted_at - b.inserted_at] : [a.inserted_at - b.inserted_at];
  for (const k of keys) if (k !== 0) return k > 0;
  return a.id > b.id;
}

function newest(facts: RefFact[], axis: RefArgs['axis']): RefFact | undefined {
  let best: RefFact | undefined;
  for (const f of facts) if (!best || laterThan(f, best, axis)) best = f;
  return best;
}

function byteCompare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** 'invalid' where the service must answer graphql_validation. */
export function referenceQuery(model: RefModel, args: RefArgs, now: number): RefPage | 'invalid' {
  let { since, until } = args;
  if (args.mode === 'latest' && args.sort !== 'observed_at') return 'invalid';
  if (args.join && args.mode !== 'latest') return 'invalid';
  if (args.mode === 'timeline') {
    until ??= now;
    since ??= until - 90 * DAY;
  }
  if (since !== undefined && until !== undefined && since > until) return 'invalid';
  if (args.mode === 'timeline' && until! - since! > 366 * DAY) since = until! - 366 * DAY;

  let rows: RefFact[];
  if (args.mode === 'timeline') {
    rows = model.facts.filter((f) => axisOf(f, args.axis) >= since! && axisOf(f, args.axis) < until!);
  } else {
    const groups = new Map<string, RefFact[]>();
    for (const f of model.facts) {
      if (until !== undefined && axisOf(f, args.axis) > until) continue;
      const key = f.entity_id ?? `#${f.id}`;
      groups.set(key, [...(groups.get(key) ?? []), f]);
    }
    rows = [...groups.values()].map((g) => newest(g, args.axis)!);
    if (since !== undefined) rows = rows.filter((f) => axisOf(f, args.axis) >= since!);
  }
  rows = rows.filter((f) => allMatch(args.filters, model, f.data));

  let out: RefRow[] = rows.map((f) => ({ ...f }));
  if (args.join) {
    const j = args.join;
    const joined: RefRow[] = [];
    for (const r of out) {
      const candidates =
        r.entity_id === null
          ? []
          : j.model.facts.filter(
              (f) => f.entity_id === r.entity_id && (until === undefined || axisOf(f, args.axis) <= until) && allMatch(j.filters, j.model, f.data),
            );
      const match = newest(candidates, args.axis);
      if (!match && j.type === 'inner') continue;
      const obj: Record<string, unknown> = {};
      for (const f of j.model.fields) obj[f.name] = match ? member(match.data, f.name) : null;
      joined.push({ ...r, data: { ...r.data, [j.model.slug]: obj } });
    }
    out = joined;
  }

  const sign = args.direction === 'asc' ? 1 : -1;
  const idCmp = (a: RefRow, b: RefRow) => sign * (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  out.sort((a, b) => {
    if (args.mode === 'timeline' && args.sort === 'entity_id') {
      if (a.entity_id === null || b.entity_id === null) {
        if (a.entity_id === b.entity_id) return idCmp(a, b);
        return a.entity_id === null ? 1 : -1; // nulls last in both directions
      }
      const d = byteCompare(a.entity_id, b.entity_id);
      return d !== 0 ? sign * d : idCmp(a, b);
    }
    const col = args.mode === 'timeline' && args.sort === 'inserted_at' ? 'inserted_at' : 'observed_at';
    const d = a[col] - b[col];
    return d !== 0 ? sign * d : idCmp(a, b);
  });

  const count = out.length;
  return {
    rows: out.slice(args.offset, args.offset + args.limit),
    count,
    pageNumber: Math.floor(args.offset / args.limit) + 1,
    lastPage: Math.max(1, Math.ceil(count / args.limit)),
    hasNextPage: args.offset + args.limit < count,
    hasPreviousPage: args.offset > 0,
  };
}
