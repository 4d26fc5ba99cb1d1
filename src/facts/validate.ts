/**
 * Validation of one fact against its data model's fields, and
 * the values derived from it: the UTC observed_at, the normalized data, the entity id and
 * the source key. Pure functions: no I/O, so the write path and tests share them.
 */
import type { DataModelWithFields, ModelField } from './models.sql.ts';
import { canonicalJson, isObject, MAX_JSON_DEPTH, pointerToken } from '../json.ts';
import { createHash } from 'node:crypto';
import type { FieldType } from '../db/tables.ts';
import { parseDateTime } from '../datetime.ts';

/** What the writer needs of a data model (DataModelWithFields, loaded once per batch). */
export type FactModel = Pick<DataModelWithFields, 'id' | 'fields'>;
export type FactField = ModelField;

export interface FactInput {
  observed_at: unknown;
  data: unknown;
  source_key?: unknown;
}

export interface FieldError {
  pointer: string;
  detail: string;
}

export interface ValidFact {
  /** ISO 8601 in UTC with Z, millisecond precision. */
  observedAt: string;
  /** The data with datetime values normalized to UTC. */
  data: Record<string, unknown>;
  entityId: string | null;
  sourceKey: string;
}

export type Validated = { ok: true; fact: ValidFact } | { ok: false; errors: FieldError[] };

export const MAX_SOURCE_KEY_LENGTH = 512;
/**
 * The entity id (the primary-key value as text) is a btree key of facts and fact_current,
 * whose entries hold at most about 2,700 bytes: 512 UTF-16 units are at most 1,536 bytes.
 */
export const MAX_ENTITY_ID_LENGTH = 512;

/** An ISO 8601 date-time with Z or an offset, as epoch milliseconds; undefined when it is not one. */
export function instantMs(s: string): number | undefined {
  return parseDateTime(s)?.getTime();
}

/** The UTC form of an ISO 8601 date-time, or undefined. */
export function normalizeDateTime(v: unknown): string | undefined {
  if (typeof v !== 'string') return undefined;
  const t = instantMs(v);
  return t === undefined ? undefined : new Date(t).toISOString();
}

// PostgreSQL text and jsonb reject U+0000, and a lone surrogate cannot be stored as UTF-8;
// either would fail the whole batch's statement, so it is refused per item instead.
function badText(s: string): string | undefined {
  if (s.includes('\u0000')) return 'must not contain the character U+0000';
  if (!s.isWellFormed()) return 'must not contain unpaired UTF-16 surrogates';
  return undefined;
}

/** The first thing in `v` that JSON (as jsonb stores it) cannot carry, with its pointer. */
export function jsonProblem(v: unknown, pointer: string, depth = 1): FieldError | undefined {
  if (v === null || typeof v === 'boolean') return undefined;
  if (typeof v === 'number') return Number.isFinite(v) ? undefined : { pointer, detail: 'must be a finite number' };
  if (typeof v === 'string') {
    const bad = badText(v);
    return bad ? { pointer, detail: bad } : undefined;
  }
  const isArray = Array.isArray(v);
  if (!isArray && !isObject(v)) return { pointer, detail: 'must be a JSON value' };
  if (depth > MAX_JSON_DEPTH) return { pointer, detail: `must not be nested deeper than ${MAX_JSON_DEPTH} levels` };
  if (isArray) {
    for (let i = 0; i < v.length; i++) {
      const p = jsonProblem(v[i], `${pointer}/${i}`, depth + 1);
      if (p) return p;
    }
    return undefined;
  }
  for (const [k, item] of Object.entries(v)) {
    const bad = badText(k);
    if (bad) return { pointer: `${pointer}/${pointerToken(k)}`, detail: `member name ${bad}` };
    const p = jsonProblem(item, `${pointer}/${pointerToken(k)}`, depth + 1);
    if (p) return p;
  }
  return undefined;
}

const TYPE_DETAIL: Record<FieldType, string> = {
  string: 'must be a string',
  integer: 'must be a whole number between -9007199254740991 and 9007199254740991',
  float: 'must be a finite number',
  boolean: 'must be true or false',
  datetime: 'must be an ISO 8601 date-time with Z or a UTC offset',
  map: 'must be a JSON object',
};

/** A field's value (not null) checked against its type: the value to store, or an error. */
function checkValue(type: FieldType | null, v: unknown, pointer: string): { value: unknown } | FieldError {
  const mismatch = (t: FieldType): FieldError => ({ pointer, detail: TYPE_DETAIL[t] });
  switch (type) {
    case 'string': {
      if (typeof v !== 'string') return mismatch(type);
      const bad = badText(v);
      return bad ? { pointer, detail: bad } : { value: v };
    }
    case 'integer':
      return typeof v === 'number' && Number.isSafeInteger(v) ? { value: v } : mismatch(type);
    case 'float':
      return typeof v === 'number' && Number.isFinite(v) ? { value: v } : mismatch(type);
    case 'boolean':
      return typeof v === 'boolean' ? { value: v } : mismatch(type);
    case 'datetime': {
      const iso = normalizeDateTime(v);
      return iso === undefined ? mismatch(type) : { value: iso };
    }
    case 'map': {
      if (!isObject(v)) return mismatch(type);
      return jsonProblem(v, pointer) ?? { value: v };
    }
    case null:
      return jsonProblem(v, pointer) ?? { value: v };
  }
}

/**
 * The entity id from the primary-key value: a string as it is, a number or boolean as its
 * JSON text, an object or array (primary key of type map or untyped) as canonical JSON.
 */
export function entityIdOf(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return canonicalJson(v);
}

/**
 * Without a caller's key, the key is a hash of what the fact says, so resending the same
 * observation (a retried import or request) is recognized as a duplicate. The prefix keeps
 * derived keys apart from given ones.
 */
export function deriveSourceKey(observedAt: string, data: Record<string, unknown>): string {
  return `sha256:${createHash('sha256')
    .update(canonicalJson([observedAt, data]))
    .digest('hex')}`;
}

const ITEM_MEMBERS = new Set(['observed_at', 'data', 'source_key']);

/**
 * Checks one item. Every problem is reported, each at its JSON pointer in the item:
 * `/observed_at`, `/data`, `/data/<field>` (or deeper for a bad nested value), `/source_key`.
 *
 * A primary-key field that is not required may be absent or null: the fact then has a null
 * entity id and is an entity of its own. A required one is reported as missing.
 */
export function validateFact(model: FactModel, item: unknown): Validated {
  if (!isObject(item)) return { ok: false, errors: [{ pointer: '', detail: 'must be an object with observed_at and data' }] };
  const errors: FieldError[] = [];
  for (const name of Object.keys(item)) {
    if (!ITEM_MEMBERS.has(name)) errors.push({ pointer: `/${pointerToken(name)}`, detail: 'is not a member of a fact (observed_at, data, source_key)' });
  }

  const observedAt = normalizeDateTime(item.observed_at);
  if (item.observed_at === undefined || item.observed_at === null) errors.push({ pointer: '/observed_at', detail: 'is required' });
  else if (observedAt === undefined) errors.push({ pointer: '/observed_at', detail: TYPE_DETAIL.datetime });

  let sourceKey: string | undefined;
  if (item.source_key !== undefined && item.source_key !== null) {
    const sk = item.source_key;
    if (typeof sk !== 'string' || sk.length === 0 || sk.length > MAX_SOURCE_KEY_LENGTH) {
      errors.push({ pointer: '/source_key', detail: `must be a string of 1 to ${MAX_SOURCE_KEY_LENGTH} characters` });
    } else {
      const bad = badText(sk);
      if (bad) errors.push({ pointer: '/source_key', detail: bad });
      else sourceKey = sk;
    }
  }

  const entries: Array<[string, unknown]> = [];
  let entityId: string | null = null;
  const raw = item.data;
  if (raw === undefined || raw === null) {
    errors.push({ pointer: '/data', detail: 'is required' });
  } else if (!isObject(raw)) {
    errors.push({ pointer: '/data', detail: 'must be a JSON object' });
  } else {
    const fields = new Map(model.fields.map((f) => [f.name, f]));
    for (const name of Object.keys(raw)) {
      if (!fields.has(name)) errors.push({ pointer: `/data/${pointerToken(name)}`, detail: 'is not a field of the data model' });
    }
    for (const field of model.fields) {
      const pointer = `/data/${pointerToken(field.name)}`;
      // Object.hasOwn: a field may be called `constructor` or `toString`.
      const present = Object.hasOwn(raw, field.name);
      const v = present ? raw[field.name] : undefined;
      if (v === undefined || v === null) {
        if (field.is_required) errors.push({ pointer, detail: 'is required' });
        else if (present) entries.push([field.name, null]);
        continue;
      }
      const checked = checkValue(field.type, v, pointer);
      if ('detail' in checked) {
        errors.push(checked);
        continue;
      }
      if (field.is_primary_key) {
        entityId = entityIdOf(checked.value);
        if (entityId !== null && entityId.length > MAX_ENTITY_ID_LENGTH) {
          errors.push({ pointer, detail: `is the primary key: at most ${MAX_ENTITY_ID_LENGTH} characters as text` });
          continue;
        }
      }
      entries.push([field.name, checked.value]);
    }
  }

  if (errors.length > 0 || observedAt === undefined) return { ok: false, errors };
  // fromEntries defines own members, so no field name can reach a prototype.
  const data: Record<string, unknown> = Object.fromEntries(entries);
  return { ok: true, fact: { observedAt, data, entityId, sourceKey: sourceKey ?? deriveSourceKey(observedAt, data) } };
}
