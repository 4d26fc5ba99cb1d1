/**
 * The list filters' operators in SQL, one builder for every place that narrows rows by a
 * `filter[attr][op]` (the JSON:API lists, and a bulk replay over the runs' list filters).
 */
import { sql, type RawBuilder, type SqlBool } from 'kysely';

export type FilterOp = 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte' | 'in' | 'is_null' | 'contains';

/**
 * `column op value`, the value already of the attribute's kind (a list for `in`, a boolean
 * for `is_null`); `stringArray` when the column is a text array (contains = holds the value).
 */
export function filterClauseSql(col: RawBuilder<unknown>, op: FilterOp, value: unknown, stringArray = false): RawBuilder<SqlBool> {
  switch (op) {
    case 'eq':
      return sql<SqlBool>`${col} = ${value}`;
    case 'ne':
      // A NULL is "not equal" to a value as far as a client can tell.
      return sql<SqlBool>`${col} is distinct from ${value}`;
    case 'gt':
      return sql<SqlBool>`${col} > ${value}`;
    case 'gte':
      return sql<SqlBool>`${col} >= ${value}`;
    case 'lt':
      return sql<SqlBool>`${col} < ${value}`;
    case 'lte':
      return sql<SqlBool>`${col} <= ${value}`;
    case 'in':
      return sql<SqlBool>`${col} in (${sql.join(value as unknown[])})`;
    case 'is_null':
      return value === true ? sql<SqlBool>`${col} is null` : sql<SqlBool>`${col} is not null`;
    case 'contains':
      // strpos, not LIKE: `%` and `_` in the value are literal characters.
      return stringArray ? sql<SqlBool>`${value} = any(${col})` : sql<SqlBool>`strpos(${col}, ${value}) > 0`;
  }
}
