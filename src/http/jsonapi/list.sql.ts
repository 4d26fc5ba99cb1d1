/**
 * Turns a ParsedQuery's filter, sort and page into SQL over one table.
 *
 * Ordering rule: NULL sorts as greater than every value, which is PostgreSQL's own
 * default (ASC NULLS LAST, DESC NULLS FIRST), so plain btree indexes serve these orders.
 * The id tie-breaker follows the direction of the last sort key, so `sort=-inserted_at`
 * is exactly `inserted_at DESC, id DESC` and one composite index covers it.
 *
 * Keyset pages compare against the cursor with an expanded OR chain rather than a row
 * comparison, because keys may mix directions and hold NULLs. `before` runs the query in
 * reverse order; finishKeysetPage puts the rows back.
 *
 * Cursor values are JavaScript Dates, which hold milliseconds: datetime columns used for
 * sorting must be stored at that precision (timestamptz(3)), or rows sharing a
 * millisecond could be skipped or repeated across pages.
 */
import { sql, type RawBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely';
import type { JsonApiFilter, ParsedQuery } from './types.ts';
import { filterClauseSql } from '../../resources/filter.sql.ts';

type AnySelect = SelectQueryBuilder<any, any, any>;

export interface OrderKey {
  column: string;
  desc: boolean;
}

export function applyFilters<QB extends AnySelect>(qb: QB, table: string, filter: readonly JsonApiFilter[]): QB {
  let out: AnySelect = qb;
  for (const clause of filter) out = out.where(filterSql(table, clause));
  return out as QB;
}

/** What a statement compiled once binds at each run in place of a page's limit and offset (slot() values). */
export interface PageSlots {
  limit: string;
  offset: string;
}

/**
 * Filters, orders and pages `qb`. It fetches one row beyond the limit so that
 * finishKeysetPage can tell whether another page exists. With `slots`, the limit and
 * offset are those slots (bound to q.page.limit + 1 and the offset at each run).
 */
export function applyListQuery<QB extends AnySelect>(qb: QB, table: string, q: ParsedQuery, slots?: PageSlots): QB {
  let out: AnySelect = applyFilters(qb, table, q.filter);
  const keys = readOrder(q);

  if (q.page.kind === 'keyset') {
    const cursor = q.page.after ?? q.page.before;
    if (cursor !== undefined) out = out.where(afterCursor(table, keys, [...cursor.values, cursor.id]));
  }
  for (const key of keys) {
    out = out.orderBy(sql.id(table, key.column), (ob) => (key.desc ? ob.desc().nullsFirst() : ob.asc().nullsLast()));
  }
  out = out.limit((slots?.limit ?? q.page.limit + 1) as number);
  if (q.page.kind === 'offset') out = out.offset((slots?.offset ?? q.page.offset) as number);
  return out as QB;
}

export interface FinishedPage<R> {
  rows: R[];
  hasNext: boolean;
  hasPrev: boolean;
}

/**
 * Trims the look-ahead row fetched by applyListQuery and restores the order of a
 * `before` page. Works for offset pages too. After a cursor, a previous page is assumed
 * to exist (the cursor came from one); the same goes for a next page before a cursor.
 */
export function finishKeysetPage<R>(rows: readonly R[], q: ParsedQuery): FinishedPage<R> {
  const extra = rows.length > q.page.limit;
  const page = rows.slice(0, q.page.limit);
  if (q.page.kind === 'offset') return { rows: page, hasNext: extra, hasPrev: q.page.offset > 0 };
  if (q.page.before !== undefined) return { rows: page.reverse(), hasNext: true, hasPrev: extra };
  return { rows: page, hasNext: extra, hasPrev: q.page.after !== undefined };
}

/** `qb` with only the filters applied, selecting `total`: the number of matching rows. */
export function countQuery(qb: AnySelect, table: string, q: ParsedQuery): SelectQueryBuilder<any, any, { total: number | string | bigint }> {
  return applyFilters(qb, table, q.filter)
    .clearSelect()
    .clearOrderBy()
    .clearLimit()
    .clearOffset()
    .select(sql<number | string | bigint>`count(*)`.as('total'));
}

export async function countRows(qb: AnySelect, table: string, q: ParsedQuery): Promise<number> {
  const row = await countQuery(qb, table, q).executeTakeFirst();
  return Number(row?.total ?? 0);
}

/** The order a list's statement reads rows in (reversed for a `before` page), id last. */
export function readOrder(q: ParsedQuery): OrderKey[] {
  const backwards = q.page.kind === 'keyset' && q.page.before !== undefined;
  return orderKeys(q).map((k) => ({ column: k.column, desc: k.desc !== backwards }));
}

function orderKeys(q: ParsedQuery): OrderKey[] {
  const last = q.sort[q.sort.length - 1];
  return [...q.sort.map((k) => ({ column: k.column, desc: k.desc })), { column: 'id', desc: last?.desc ?? false }];
}

function filterSql(table: string, clause: JsonApiFilter): RawBuilder<SqlBool> {
  return filterClauseSql(sql.id(table, clause.column), clause.op, clause.value, clause.kind === 'string_array');
}

/**
 * Rows strictly after `values` in the order `keys`:
 * (k1 after) OR (k1 = v1 AND k2 after) OR ... Since NULL is the greatest value, nothing
 * follows a NULL in ascending order and every non-NULL follows it in descending order.
 */
function afterCursor(table: string, keys: readonly OrderKey[], values: readonly unknown[]): RawBuilder<SqlBool> {
  const disjuncts: RawBuilder<SqlBool>[] = [];
  const equal: RawBuilder<SqlBool>[] = [];
  keys.forEach((key, i) => {
    const col = sql.id(table, key.column);
    const v = values[i] ?? null;
    let after: RawBuilder<SqlBool> | undefined;
    if (v === null) after = key.desc ? sql<SqlBool>`${col} is not null` : undefined;
    else after = key.desc ? sql<SqlBool>`${col} < ${v}` : sql<SqlBool>`(${col} > ${v} or ${col} is null)`;
    if (after !== undefined) disjuncts.push(equal.length === 0 ? after : sql<SqlBool>`(${sql.join([...equal, after], sql` and `)})`);
    equal.push(v === null ? sql<SqlBool>`${col} is null` : sql<SqlBool>`${col} = ${v}`);
  });
  return disjuncts.length === 0 ? sql<SqlBool>`false` : sql<SqlBool>`(${sql.join(disjuncts, sql` or `)})`;
}
