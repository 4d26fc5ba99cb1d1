/**
 * factAggregate as SQL: one GROUP BY statement over the rows factQuery would page through.
 *
 * - latest reads one row per entity: fact_current without `until`, the as-of sources of
 *   factQuery (as-of.sql.ts, the cheaper picked per query) with it; the join is factQuery's
 *   lateral lookup of the joined model's newest fact;
 * - timeline reads facts in [since, until) on the axis;
 * - series (latest with a bucket, evaluated at each bucket's end) is series.sql.ts's.
 *
 * Every key and measure operand comes through fieldValue (typed.sql.ts). Values the caller
 * gave are bound parameters; identifiers and directions come from fixed lists.
 */
import { sql } from 'kysely';
import type { Db } from '../../db/connect.ts';
import { clauseSql, currentFiltersSql } from '../query/filters.sql.ts';
import { asOfFromCurrent, asOfFromHistory, withAsOfSource } from '../query/as-of.sql.ts';
import { AXIS_COLUMN, DIRECTION, joinLateral, ref, whereClause } from '../query/fragments.sql.ts';
import type { FactQueryPlan, Frag } from '../query/plan-types.ts';
import { fieldValue } from '../typed.sql.ts';
import { runSeries } from './series.sql.ts';
import type { AggregateBucket, AggregateField, AggregateMeasure, AggregatePlan, AggregateResult, AggregateRow } from './plan-types.ts';

/** The factQuery plan reading the same rows (its page-only members are unused here). */
export function queryPlanOf(p: AggregatePlan): FactQueryPlan {
  return {
    workspaceId: p.workspaceId,
    model: p.model,
    mode: p.mode,
    axis: p.axis,
    since: p.since,
    until: p.until,
    sort: 'observed_at',
    direction: 'desc',
    limit: p.limit,
    offset: 0,
    filters: p.filters,
    join: p.join,
  };
}

/** The FROM and WHERE of the rows aggregated, as alias b (a facts or fact_current row); the joined fact's data as j. */
function rowsOf(q: FactQueryPlan, needJoin: boolean): { from: Frag; where: Frag[]; id: string } {
  const axis = AXIS_COLUMN[q.axis];
  const data = sql.ref('b.data') as Frag;
  let from: Frag;
  let where: Frag[];
  let id = 'id';
  if (q.mode === 'timeline') {
    from = sql`facts as b`;
    where = [
      sql`b.data_model_id = ${q.model.id}`,
      sql`b.workspace_id = ${q.workspaceId}`,
      sql`${ref('b', axis)} >= ${q.since!}`,
      sql`${ref('b', axis)} < ${q.until!}`,
      ...q.filters.map((c) => clauseSql(data, c)),
    ];
  } else if (q.until === undefined) {
    from = sql`fact_current as b`;
    id = 'fact_id';
    where = [sql`b.data_model_id = ${q.model.id}`, sql`b.workspace_id = ${q.workspaceId}`, sql`b.axis = ${q.axis}`, ...currentFiltersSql(data, q.filters)];
  } else {
    from = sql`(${q.asOf === 'current' ? asOfFromCurrent(q) : asOfFromHistory(q)}) as b`;
    where = q.filters.map((c) => clauseSql(data, c));
  }
  if (q.mode === 'latest' && q.since !== undefined) where.push(sql`${ref('b', axis)} >= ${q.since}`);
  // A left join changes no row: it is read only when a key or measure uses the joined model.
  if (q.join?.type === 'inner') from = sql`${from} join lateral ${joinLateral(q, 'b')} as j on true`;
  else if (q.join !== undefined && needJoin) from = sql`${from} left join lateral ${joinLateral(q, 'b')} as j on true`;
  return { from, where, id };
}

const valueOf = (f: AggregateField): Frag => fieldValue(f.source === 'join' ? 'j' : 'b', f.field);

/**
 * The start of the axis time's bucket: the local calendar period in the zone, its start
 * read back in the zone (where a local time occurs twice or never, PostgreSQL's reading).
 */
export function bucketSql(time: Frag, b: AggregateBucket): Frag {
  const local = sql`(${time} at time zone ${b.timezone}::text)`;
  // date_trunc's weeks start on Monday: a Sunday week is the Monday week of the day after, one day earlier.
  const start =
    b.unit === 'week' && b.weekStart === 'sunday'
      ? sql`(date_trunc('week', ${local} + interval '1 day') - interval '1 day')`
      : sql`date_trunc(${b.unit}::text, ${local})`;
  return sql`(${start} at time zone ${b.timezone}::text)`;
}

function measureSql(m: AggregateMeasure, q: FactQueryPlan, id: string): Frag {
  switch (m.op) {
    case 'count':
      return sql`count(*)::float8`;
    case 'count_distinct_entities':
      // In latest mode every row is its own entity; in a timeline, facts without an entity id are each their own.
      return q.mode === 'latest' ? sql`count(*)::float8` : sql`count(distinct coalesce(b.entity_id, '#' || ${ref('b', id)}::text))::float8`;
    case 'sum':
      return sql`sum(${valueOf(m.field!)})::float8`;
    case 'avg':
      return sql`avg(${valueOf(m.field!)})::float8`;
    case 'min':
      return sql`min(${valueOf(m.field!)})::float8`;
    case 'max':
      return sql`max(${valueOf(m.field!)})::float8`;
  }
}

const isNumber = (f: AggregateField) => f.field.type === 'integer' || f.field.type === 'float';

/** A group key in the order's terms: strings by bytes (the same order on every server whatever its collation). */
function keyOrderSql(p: AggregatePlan, i: number): Frag {
  const k = sql.ref(`g.k${i}`) as Frag;
  return p.groupBy[i]!.field.type === 'string' ? sql`${k} collate "C"` : k;
}

/** The caller's order, then the ties broken by bucket and keys ascending: one order for every page size. */
function orderSql(p: AggregatePlan): Frag {
  const parts: Frag[] = [];
  const used = new Set<string>();
  const add = (key: string, expr: Frag, dir: 'asc' | 'desc') => {
    if (used.has(key)) return;
    used.add(key);
    parts.push(sql`${expr} ${DIRECTION[dir]} nulls last`);
  };
  for (const o of p.orderBy) {
    if (o.by.kind === 'bucket') add('bucket', sql.ref('g.bk') as Frag, o.direction);
    else if (o.by.kind === 'group') add(`k${o.by.index}`, keyOrderSql(p, o.by.index), o.direction);
    else add(`m${o.by.index}`, sql.ref(`g.m${o.by.index}`) as Frag, o.direction);
  }
  if (p.bucket !== undefined) add('bucket', sql.ref('g.bk') as Frag, 'asc');
  p.groupBy.forEach((_g, i) => add(`k${i}`, keyOrderSql(p, i), 'asc'));
  return parts.length > 0 ? sql`order by ${sql.join(parts)}` : sql``;
}

export function aggregateSql(p: AggregatePlan, q: FactQueryPlan = queryPlanOf(p)): Frag {
  const fields = [...p.groupBy, ...p.measures.flatMap((m) => (m.field ? [m.field] : []))];
  const src = rowsOf(
    q,
    fields.some((f) => f.source === 'join'),
  );
  const inner: Frag[] = p.groupBy.map((g, i) => sql`${valueOf(g)} as ${sql.ref(`k${i}`)}`);
  if (p.bucket !== undefined) inner.push(sql`${bucketSql(ref('b', AXIS_COLUMN[p.axis]), p.bucket)} as bk`);
  p.measures.forEach((m, i) => inner.push(sql`${measureSql(m, q, src.id)} as ${sql.ref(`m${i}`)}`));
  const grouped = p.groupBy.length + (p.bucket === undefined ? 0 : 1);
  const groupBy = grouped > 0 ? sql`group by ${sql.join(Array.from({ length: grouped }, (_v, i) => sql.raw(String(i + 1))))}` : sql``;
  const outer: Frag[] = p.groupBy.map((g, i) => (isNumber(g) ? sql`${sql.ref(`g.k${i}`)}::float8 as ${sql.ref(`k${i}`)}` : sql.ref(`g.k${i}`)));
  outer.push(p.bucket === undefined ? sql`null::timestamptz as bk` : sql`g.bk`);
  p.measures.forEach((_m, i) => outer.push(sql.ref(`g.m${i}`)));
  return sql`select ${sql.join(outer)} from (select ${sql.join(inner)} from ${src.from} ${whereClause(src.where)} ${groupBy}) as g
    ${orderSql(p)} limit ${p.limit + 1}`;
}

type SqlRow = Record<string, unknown>;

function toRow(p: AggregatePlan, r: SqlRow): AggregateRow {
  return {
    keys: p.groupBy.map((_g, i) => r[`k${i}`] ?? null),
    bucket: (r.bk as Date | null) ?? null,
    values: p.measures.map((_m, i) => {
      const v = r[`m${i}`];
      return v === null || v === undefined ? null : Number(v);
    }),
  };
}

export async function runAggregate(db: Db, p: AggregatePlan): Promise<AggregateResult> {
  if (p.series) return runSeries(db, p);
  const q = await withAsOfSource(db, queryPlanOf(p));
  const { rows } = await aggregateSql(p, q).execute(db);
  const cut = rows.length > p.limit;
  return { rows: (rows as SqlRow[]).slice(0, p.limit).map((r) => toRow(p, r)), cut };
}
