/**
 * A field's typed value on a stored fact, the one place every reader of facts (filters,
 * factAggregate's groups and measures, series) gets it from: the field's typed slot when it
 * has one (an indexed field, slots.sql.ts), which its btree indexes key on, else read out of
 * `data`. Both give the same value (test/facts/typed-slots.property.test.ts).
 */
import { sql } from 'kysely';
import type { FieldType } from '../db/tables.ts';
import type { Frag } from './query/plan-types.ts';
import { slotRef } from './slots.sql.ts';

export interface TypedField {
  name: string;
  type: FieldType | null;
  is_indexed?: boolean;
  /** The slot holding the field's value (ModelField.slot: set once filled); null or absent: read `data`. */
  slot?: string | null;
}

// The same guard as filters.sql.ts: an ISO 8601 instant, or null.
const ISO_GUARD = '^\\d{4}-\\d{2}-\\d{2}[Tt ]\\d{2}:\\d{2}(:\\d{2}(\\.\\d+)?)?([Zz]|[+-]\\d{2}(:?\\d{2})?)$';

/**
 * The field's value on the row `alias` (a fact_current or facts row, or anything with the
 * same columns, slots included): numeric for integer and float, timestamptz for datetime, boolean for
 * boolean, text for string, jsonb for map and untyped fields. Null when the fact lacks the
 * member, holds null, or holds a JSON value of another type (a field retyped after facts
 * were written).
 */
export function fieldValue(alias: string, field: TypedField): Frag {
  if (field.slot) {
    const slot = slotRef(alias, field.slot);
    return field.type === 'boolean' ? sql`(${slot})::boolean` : slot;
  }
  return dataValue(alias, field);
}

/** The field's value read out of `data` (what a slot stores, slots.sql.ts's slotValue). */
export function dataValue(alias: string, field: TypedField): Frag {
  const data = sql.ref(`${alias}.data`);
  const member = sql`(${data} -> ${field.name}::text)`;
  const text = sql`(${data} ->> ${field.name}::text)`;
  switch (field.type) {
    case 'integer':
    case 'float':
      return sql`(case when jsonb_typeof(${member}) = 'number' then ${text}::numeric end)`;
    case 'datetime':
      return sql`(case when jsonb_typeof(${member}) = 'string' and ${text} ~ ${ISO_GUARD} then tributary_timestamptz_or_null(${text}) end)`;
    case 'boolean':
      return sql`(case when jsonb_typeof(${member}) = 'boolean' then ${text}::boolean end)`;
    case 'string':
      return sql`(case when jsonb_typeof(${member}) = 'string' then ${text} end)`;
    default:
      return sql`(case when jsonb_typeof(${member}) <> 'null' then ${member} end)`;
  }
}
