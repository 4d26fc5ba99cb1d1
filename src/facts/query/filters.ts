/**
 * The filter language of factQuery (`filters` and `joinFilters`): a JSON array of at most
 * 20 {field, op, value} clauses, ANDed, checked against the data model's field types
 * before any SQL is built, so that every mistake is an invalid_query error naming the argument
 * and the clause and nothing the caller wrote reaches the database except as a bound parameter.
 */
import type { FieldType } from '../../db/tables.ts';
import { jsonDepthExceeds } from '../../json.ts';
import { invalidParam, quoteName } from '../../errors.ts';
import { parseDateTime } from '../../datetime.ts';

/** A query argument the caller must change (GraphQL renders it as graphql_validation naming the argument). */
export const badArgument = (detail: string, argument: string) => invalidParam(argument, detail);

export const MAX_CLAUSES = 20;
/** Far above any honest filter (20 clauses with 1,000-value lists of ids), far below the body limit. */
export const MAX_FILTER_TEXT = 200_000;
export const MAX_LIST_VALUES = 1_000;
const MAX_FILTER_DEPTH = 32;

export const FILTER_OPS = ['eq', 'ne', 'in', 'nin', 'is_null', 'gt', 'gte', 'lt', 'lte', 'contains', 'starts_with'] as const;
export type FactFilterOp = (typeof FILTER_OPS)[number];

const ORDERED_TYPES: ReadonlySet<FieldType | null> = new Set<FieldType | null>(['integer', 'float', 'datetime']);

/** Operators a field of this type accepts; a field without a type takes only the universal ones. */
export function opsFor(type: FieldType | null): readonly FactFilterOp[] {
  const ops: FactFilterOp[] = ['eq', 'ne', 'in', 'nin', 'is_null'];
  if (ORDERED_TYPES.has(type)) ops.push('gt', 'gte', 'lt', 'lte');
  if (type === 'string') ops.push('contains', 'starts_with');
  return ops;
}

export interface FieldDef {
  name: string;
  type: FieldType | null;
  /** The field has an index on fact_current (field-index.sql.ts). */
  is_indexed?: boolean;
  /** The typed slot holding the field's value (ModelField.slot). */
  slot?: string | null;
}

/**
 * A checked clause. `value` is normalized: datetimes are ISO strings in UTC, `in`/`nin`
 * hold an array, `is_null` a boolean.
 */
export interface FactFilter {
  field: string;
  type: FieldType | null;
  op: FactFilterOp;
  value: unknown;
  /** The field has an index on fact_current: eq and ranges compare its indexed expression. */
  indexed?: boolean;
  /** The field's typed slot (slots.sql.ts): where the row has it (facts, fact_current), clauses compare it. */
  slot?: string;
}

export interface RawClause {
  field: string;
  op: FactFilterOp;
  value: unknown;
}

/** Shape checks that need no data model: JSON, array, clause count, keys, known op. */
export function parseFilterText(text: string | null | undefined, argument: string): RawClause[] {
  if (text === null || text === undefined) return [];
  if (text.length > MAX_FILTER_TEXT) throw badArgument(`${argument} is longer than ${MAX_FILTER_TEXT} characters`, argument);
  if (jsonDepthExceeds(text, MAX_FILTER_DEPTH)) throw badArgument(`${argument} is nested deeper than ${MAX_FILTER_DEPTH} levels`, argument);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badArgument(`${argument} is not valid JSON: expected an array of {field, op, value}`, argument);
  }
  if (!Array.isArray(parsed)) throw badArgument(`${argument} must be a JSON array of {field, op, value}`, argument);
  if (parsed.length > MAX_CLAUSES) throw badArgument(`${argument} has ${parsed.length} clauses; at most ${MAX_CLAUSES} are allowed`, argument);
  return parsed.map((c, i) => {
    const at = `${argument}[${i}]`;
    if (typeof c !== 'object' || c === null || Array.isArray(c)) throw badArgument(`${at} must be an object {field, op, value}`, argument);
    const keys = Object.keys(c);
    const extra = keys.find((k) => k !== 'field' && k !== 'op' && k !== 'value');
    if (extra !== undefined) throw badArgument(`${at} has an unknown member; only field, op and value are allowed`, argument);
    const { field, op } = c as Record<string, unknown>;
    if (typeof field !== 'string' || field === '') throw badArgument(`${at}.field must be a field name`, argument);
    if (typeof op !== 'string' || !(FILTER_OPS as readonly string[]).includes(op)) {
      throw badArgument(`${at}.op must be one of ${FILTER_OPS.join(', ')}`, argument);
    }
    if (!('value' in c)) throw badArgument(`${at}.value is missing`, argument);
    return { field, op: op as FactFilterOp, value: (c as Record<string, unknown>).value };
  });
}

const MAX_LISTED_FIELDS = 50;

function fieldList(fields: ReadonlyMap<string, FieldDef>): string {
  if (fields.size === 0) return 'it has no fields';
  const names = [...fields.keys()].sort();
  const more = names.length > MAX_LISTED_FIELDS ? ` and ${names.length - MAX_LISTED_FIELDS} more` : '';
  return `its fields: ${names.slice(0, MAX_LISTED_FIELDS).join(', ')}${more}`;
}

/** Checks each clause against the model's fields and normalizes its value. */
export function typeFilters(raw: readonly RawClause[], fields: ReadonlyMap<string, FieldDef>, argument: string, modelSlug: string): FactFilter[] {
  return raw.map((c, i): FactFilter => {
    const checked = typeClause(c, i, fields, argument, modelSlug);
    const def = fields.get(checked.field);
    if (def?.is_indexed !== true) return checked;
    return def.slot ? { ...checked, indexed: true, slot: def.slot } : { ...checked, indexed: true };
  });
}

function typeClause(c: RawClause, i: number, fields: ReadonlyMap<string, FieldDef>, argument: string, modelSlug: string): FactFilter {
  const at = `${argument}[${i}]`;
  const def = fields.get(c.field);
  if (!def) throw badArgument(`${at}.field ${quoteName(c.field)} is not a field of data model ${modelSlug}; ${fieldList(fields)}`, argument);
  const allowed = opsFor(def.type);
  if (!allowed.includes(c.op)) {
    throw badArgument(`${at}: op ${c.op} does not apply to field ${def.name} of type ${def.type ?? 'untyped'}; allowed: ${allowed.join(', ')}`, argument);
  }
  const bad = (what: string) => badArgument(`${at}.value ${what}`, argument);
  if (c.op === 'is_null') {
    if (typeof c.value !== 'boolean') throw bad('must be true or false for is_null');
    return { field: def.name, type: def.type, op: c.op, value: c.value };
  }
  if (c.op === 'in' || c.op === 'nin') {
    if (!Array.isArray(c.value)) throw bad(`must be an array for ${c.op}`);
    if (c.value.length > MAX_LIST_VALUES) throw bad(`has more than ${MAX_LIST_VALUES} values`);
    const values = c.value.map((v) => {
      const n = normalizeValue(def.type, v);
      if (n === undefined) throw bad(`must hold only values of type ${def.type ?? 'JSON (not null)'}`);
      return n;
    });
    return { field: def.name, type: def.type, op: c.op, value: values };
  }
  if (c.op === 'contains' || c.op === 'starts_with') {
    if (!storableString(c.value)) throw bad('must be a string');
    return { field: def.name, type: def.type, op: c.op, value: c.value };
  }
  const n = normalizeValue(def.type, c.value);
  if (n === undefined) throw bad(`must be a value of type ${def.type ?? 'JSON (not null)'}; use is_null for null`);
  return { field: def.name, type: def.type, op: c.op, value: n };
}

/** The value in the form the SQL layer binds, or undefined when it does not fit the type. */
function normalizeValue(type: FieldType | null, v: unknown): unknown {
  switch (type) {
    case 'string':
      return storableString(v) ? v : undefined;
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v) ? v : undefined;
    case 'float':
      return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
    case 'boolean':
      return typeof v === 'boolean' ? v : undefined;
    case 'datetime': {
      const d = typeof v === 'string' ? parseDateTime(v) : undefined;
      return d ? d.toISOString() : undefined;
    }
    case 'map':
      return typeof v === 'object' && v !== null && !Array.isArray(v) && storableJson(v) ? v : undefined;
    default:
      return v !== null && storableJson(v) ? v : undefined;
  }
}

// The database refuses U+0000 and unpaired surrogates (in text and in jsonb): such a value
// could never match a stored one, and sending it would fail the statement.
function storableString(v: unknown): v is string {
  return typeof v === 'string' && !v.includes('\u0000') && v.isWellFormed();
}

function storableJson(v: unknown): boolean {
  if (typeof v === 'string') return storableString(v);
  if (Array.isArray(v)) return v.every(storableJson);
  if (typeof v === 'object' && v !== null) return Object.entries(v).every(([k, x]) => storableString(k) && storableJson(x));
  return true;
}
