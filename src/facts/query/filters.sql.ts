/**
 * A checked filter clause as a SQL predicate over a fact's data. Every value is a bound
 * parameter; the JSON path of a field is built from its name as a quoted member.
 */
import { sql } from 'kysely';
import type { FactFilter } from './filters.ts';
import type { Frag } from './plan-types.ts';
import { INDEXABLE_TYPES, indexedOperand } from '../field-index.sql.ts';
import { fieldValue } from '../typed.sql.ts';
import { slotRef } from '../slots.sql.ts';

// Stored datetimes are ISO 8601 strings. A field whose type was changed after facts were
// written may hold other strings: the guard keeps out those of another shape (and what
// PostgreSQL would read besides ISO, such as 'now'), and tributary_timestamptz_or_null
// (migration 0004) makes null of those of ISO shape that are no instant ('2026-02-30').
const ISO_GUARD = '^\\d{4}-\\d{2}-\\d{2}[Tt ]\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?([Zz]|[+-]\\d{2}(:?\\d{2})?)$';

/** The SQL value a clause compares, typed by the field: numeric, timestamptz, text or jsonb. */
function operand(data: Frag, c: FactFilter): Frag {
  const member = sql`(${data} -> ${c.field}::text)`;
  const text = sql`(${data} ->> ${c.field}::text)`;
  if (c.type === 'integer' || c.type === 'float') return sql`(case when jsonb_typeof(${member}) = 'number' then ${text}::numeric end)`;
  if (c.type === 'datetime')
    return sql`(case when jsonb_typeof(${member}) = 'string' and ${text} ~ ${ISO_GUARD} then tributary_timestamptz_or_null(${text}) end)`;
  if (c.op === 'contains') return sql`(case when jsonb_typeof(${member}) = 'string' then ${text} end)`;
  return member;
}

/** The value a SQL comparison compares with (numbers never get here: see scalarEquality and pathPredicate). */
function bound(c: FactFilter, v: unknown): Frag {
  if (c.type === 'datetime') return sql`${v as string}::timestamptz`;
  return sql`${JSON.stringify(v)}::jsonb`;
}

function boundList(c: FactFilter, values: unknown[]): Frag {
  const elements = sql`jsonb_array_elements(${JSON.stringify(values)}::jsonb) as e(v)`;
  if (c.type === 'integer' || c.type === 'float') return sql`(select (e.v #>> '{}')::numeric from ${elements})`;
  if (c.type === 'datetime') return sql`(select (e.v #>> '{}')::timestamptz from ${elements})`;
  return sql`(select e.v from ${elements})`;
}

/** Field types whose values are JSON scalars compared by value (datetime compares instants). */
const SCALAR_TYPES: ReadonlySet<FactFilter['type']> = new Set<FactFilter['type']>(['string', 'integer', 'float', 'boolean', null]);

type Scalar = string | number | boolean;
const isScalar = (v: unknown): v is Scalar => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/**
 * eq on a scalar value as containment: `data @> {"field": value}` holds exactly when the
 * member is that scalar (numbers compare as numbers: 5.0 matches 5). The GIN index on
 * fact_current.data answers it, so a latest page or count filtered on a rare value reads
 * only the rows that have it; where it is tested row by row, it reads the stored jsonb in
 * place, where `data -> field = value` first copies the member out. Objects and arrays (map
 * and untyped fields) keep `->` equality, since containment of those is not equality.
 */
function scalarEquality(data: Frag, c: FactFilter): Frag | undefined {
  const v = c.value;
  if (!SCALAR_TYPES.has(c.type) || !isScalar(v)) return undefined;
  return sql`${data} @> ${JSON.stringify({ [c.field]: v })}::jsonb`;
}

const COMPARISON = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

/**
 * A strict-mode jsonpath predicate (`data @@ 'strict <predicate>'`), for numeric ranges,
 * string prefixes and short `in` lists: it tests the stored jsonb in one call, where the
 * SQL form copies the member out (twice for a range, which also round-trips the number
 * through text; docs/benchmarks.md has the figures). A member that is missing or of another
 * JSON type makes a comparison unknown, which `@@` answers with null: the row does not
 * match, as with the SQL form. Literals are JSON (numbers, booleans, and strings that
 * filters.ts checked are well-formed), which is jsonpath's literal syntax as well.
 */
function pathPredicate(data: Frag, predicate: string): Frag {
  return sql`${data} @@ ${`strict ${predicate}`}::jsonpath`;
}

const pathMember = (field: string): string => `$.${JSON.stringify(field)}`;

/**
 * PostgreSQL's own `= ANY(array)` switches to a hash table at 9 elements; a jsonpath
 * disjunction is tested element by element, so longer lists keep the hashed form.
 */
const MAX_PATH_IN = 8;

/**
 * `in` over a few scalars as a jsonpath disjunction (`$."f" == a || $."f" == b`), which the
 * GIN index on fact_current.data answers like eq: "these two customers" reads their
 * entities' rows instead of testing every current row (a page walks the whole model in
 * order).
 * Equality is by type and value as for eq (5.0 is 5; "5" is not 5). Longer lists, and
 * lists holding objects or arrays, keep the hashed subquery, whose cost per row does not
 * grow with the list (a long disjunction tested on every row costs many times as much).
 */
function scalarMembership(data: Frag, c: FactFilter): Frag | undefined {
  const values = c.value as unknown[];
  if (!SCALAR_TYPES.has(c.type) || values.length === 0 || values.length > MAX_PATH_IN || !values.every(isScalar)) return undefined;
  const member = pathMember(c.field);
  return pathPredicate(data, values.map((v) => `${member} == ${JSON.stringify(v)}`).join(' || '));
}

/**
 * A range on an indexed number field compares the expression its index holds, which the
 * planner matches to the index: a count reads only the matching rows of the index instead
 * of testing every current row of the model. Same rows as the jsonpath form (numbers by
 * value, a member of another JSON type or missing never matches).
 */
function indexedClause(data: Frag, c: FactFilter): Frag | undefined {
  if (!c.indexed || !INDEXABLE_TYPES.has(c.type)) return undefined;
  if (c.op !== 'gt' && c.op !== 'gte' && c.op !== 'lt' && c.op !== 'lte') return undefined;
  return sql`${indexedOperand(data, c.field)} ${sql.raw(COMPARISON[c.op])} ${c.value as number}::numeric`;
}

/** eq and short `in` lists over scalars: answered by the GIN index on fact_current.data. */
function ginAnswers(data: Frag, c: FactFilter): boolean {
  return (c.op === 'eq' && scalarEquality(data, c) !== undefined) || (c.op === 'in' && scalarMembership(data, c) !== undefined);
}

/** The array type a slot's list of values binds as. */
function slotArray(c: FactFilter): Frag {
  if (c.type === 'integer' || c.type === 'float') return sql`numeric[]`;
  if (c.type === 'datetime') return sql`timestamptz[]`;
  return sql`text[]`;
}

/** A value as the slot stores it: booleans are the text 'true' / 'false' in a txt slot. */
const slotBound = (c: FactFilter, v: unknown): unknown => (c.type === 'boolean' ? String(v) : v);

/**
 * A clause on a field with a typed slot, over the row `alias` (facts or fact_current), as a
 * comparison of the slot column, which the field's btree indexes key on and carry (an
 * index-only count; field-index.sql.ts). The same rows as the JSON forms: the slot holds
 * exactly fieldValue's reading of the member, null when it is missing, null or of another
 * JSON type, and every value was checked against the field's type (filters.ts). is_null
 * keeps the JSON form: a member of another type is not null there, yet has no slot value.
 */
export function slotClauseSql(alias: string, c: FactFilter): Frag | undefined {
  if (!c.slot || c.op === 'is_null' || c.type === null || c.type === 'map') return undefined;
  const col = slotRef(alias, c.slot);
  const one = () => {
    const v = slotBound(c, c.value);
    if (c.type === 'integer' || c.type === 'float') return sql`${v as number}::numeric`;
    if (c.type === 'datetime') return sql`${v as string}::timestamptz`;
    return sql`${v as string}::text`;
  };
  const list = () => sql`${(c.value as unknown[]).map((v) => slotBound(c, v))}::${slotArray(c)}`;
  switch (c.op) {
    case 'eq':
      return sql`${col} = ${one()}`;
    case 'ne':
      return sql`${col} is distinct from ${one()}`;
    case 'in':
      return sql`${col} = any(${list()})`;
    case 'nin':
      return sql`(${col} is null or not (${col} = any(${list()})))`;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      return sql`${col} ${sql.raw(COMPARISON[c.op])} ${one()}`;
    case 'contains':
      return sql`strpos(${col}, ${c.value as string}::text) > 0`;
    case 'starts_with':
      return sql`starts_with(${col}, ${c.value as string}::text)`;
  }
}

/**
 * The filters of a read of fact_current or facts (the row `alias`). Clauses on fields with a
 * typed slot compare the slot. Of the others, on fact_current, ranges on indexed fields of
 * before (an expression index, no slot yet) take the indexed form unless another clause is
 * answered by the GIN index: then the planner starts from that one and tests the range on
 * each row it names, and the indexed form costs about twice the jsonpath's per row tested
 * (docs/benchmarks.md).
 */
export function rowFiltersSql(alias: string, filters: readonly FactFilter[], current: boolean): Frag[] {
  const data = sql.ref(`${alias}.data`) as Frag;
  const gin = filters.some((c) => !c.slot && ginAnswers(data, c));
  return filters.map((c) => slotClauseSql(alias, c) ?? (gin || !current ? undefined : indexedClause(data, c)) ?? clauseSql(data, c));
}

/** The filters of a read of fact_current `alias`. */
export function currentFiltersSql(alias: string, filters: readonly FactFilter[]): Frag[] {
  return rowFiltersSql(alias, filters, true);
}

/** The field's typed value, for readers that build their own comparisons (fieldValue with the clause's slot). */
export const clauseOperand = (alias: string, c: FactFilter): Frag => fieldValue(alias, { name: c.field, type: c.type, slot: c.slot ?? null });

export function clauseSql(data: Frag, c: FactFilter): Frag {
  const x = operand(data, c);
  const containment = c.op === 'eq' || c.op === 'ne' ? scalarEquality(data, c) : undefined;
  switch (c.op) {
    case 'eq':
      return containment ?? sql`${x} = ${bound(c, c.value)}`;
    // ne and nin are the complements of eq and in: a missing or null member matches them.
    case 'ne':
      return containment ? sql`not (${containment})` : sql`${x} is distinct from ${bound(c, c.value)}`;
    case 'in':
      return scalarMembership(data, c) ?? sql`${x} in ${boundList(c, c.value as unknown[])}`;
    case 'nin':
      return sql`(${x} is null or ${x} not in ${boundList(c, c.value as unknown[])})`;
    case 'is_null':
      return c.value ? sql`(${data} ->> ${c.field}::text) is null` : sql`(${data} ->> ${c.field}::text) is not null`;
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      return c.type === 'integer' || c.type === 'float'
        ? pathPredicate(data, `${pathMember(c.field)} ${COMPARISON[c.op]} ${JSON.stringify(c.value)}`)
        : sql`${x} ${sql.raw(COMPARISON[c.op])} ${bound(c, c.value)}`;
    case 'contains':
      return sql`strpos(${x}, ${c.value as string}::text) > 0`;
    case 'starts_with':
      return pathPredicate(data, `${pathMember(c.field)} starts with ${JSON.stringify(c.value)}`);
  }
}
