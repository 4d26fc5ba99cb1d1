/**
 * factQuery as SQL: one statement for the page, one for the count when a selected field
 * needs it. Which table answers depends on the mode:
 *
 * - latest without `until` reads fact_current (one row per entity and axis, kept on write),
 *   never the history, so a page costs an index scan whatever the history's size;
 * - latest with `until` (as of) takes, per entity, the newest fact at or before `until`
 *   (facts without an entity id are each their own entity). A newest-first page walks the
 *   history back from `until` and keeps each fact that no newer one of its entity
 *   precedes; the rest (counts, oldest-first pages, and pages the walk cannot fill) read
 *   one of two equivalent sources picked per query: the history up to `until` (DISTINCT
 *   ON), or the current state, probing the history only for the entities changed since;
 * - timeline reads facts in [since, until) over the (model, axis, id) index.
 *
 * Every value that came from the caller is a bound parameter; identifiers (columns,
 * directions) are picked from fixed lists, never built from the caller's text.
 */
import { sql } from 'kysely';
import type { Db } from '../../db/connect.ts';
import { clauseSql, rowFiltersSql } from './filters.sql.ts';
import { asOfFromCurrent, asOfFromHistory, AS_OF_WALK_WINDOW, walkable, walkPage, withAsOfSource } from './as-of.sql.ts';
import { AXIS_COLUMN, columns, joinLateral, orderBy, ref, whereClause, withLeftJoin } from './fragments.sql.ts';
import type { FactQueryPlan, FactSqlRow, Frag } from './plan-types.ts';

interface Source {
  /** FROM item, aliased b. */
  from: Frag;
  where: Frag[];
  /** The fact id column of b. */
  id: string;
  /** b is fact_current itself, whose partitions hold the field indexes. */
  current?: boolean;
  /** b is an as-of subquery, whose rows carry data but no typed slots. */
  as_of?: boolean;
}

function baseSource(p: FactQueryPlan): Source {
  const axis = AXIS_COLUMN[p.axis];
  const where: Frag[] = [];
  let source: Source;
  if (p.mode === 'timeline') {
    source = {
      from: sql`facts as b`,
      where: [
        sql`b.data_model_id = ${p.model.id}`,
        sql`b.workspace_id = ${p.workspaceId}`,
        sql`${ref('b', axis)} >= ${p.since!}`,
        sql`${ref('b', axis)} < ${p.until!}`,
      ],
      id: 'id',
    };
  } else if (p.until === undefined) {
    source = {
      from: sql`fact_current as b`,
      current: true,
      where: [sql`b.data_model_id = ${p.model.id}`, sql`b.workspace_id = ${p.workspaceId}`, sql`b.axis = ${p.axis}`],
      id: 'fact_id',
    };
  } else {
    source = { from: sql`(${p.asOf === 'current' ? asOfFromCurrent(p) : asOfFromHistory(p)}) as b`, where: [], id: 'id', as_of: true };
  }
  if (p.mode === 'latest' && p.since !== undefined) where.push(sql`${ref('b', axis)} >= ${p.since}`);
  const data = sql.ref('b.data') as Frag;
  // Typed slots are on fact_current and facts (the timeline); an as-of source has data only,
  // where every clause is tested per row in its cheapest form.
  where.push(...(source.as_of === true ? p.filters.map((c) => clauseSql(data, c)) : rowFiltersSql('b', p.filters, source.current === true)));
  return { ...source, where: [...source.where, ...where] };
}

/** The page statement; `extra` rows beyond the limit are fetched to learn whether a next page exists. */
export function pageSql(p: FactQueryPlan, opts: { withData: boolean; extra: number }): Frag {
  const src = baseSource(p);
  const where = whereClause(src.where);
  const limit = p.limit + opts.extra;
  if (p.join?.type === 'inner') {
    return sql`select ${columns('b', src.id, opts.withData)}${opts.withData ? sql`, j.data as joined` : sql``}
      from ${src.from} join lateral ${joinLateral(p, 'b')} as j on true
      ${where} order by ${orderBy(p, 'b', src.id)} limit ${limit} offset ${p.offset}`;
  }
  const page = sql`select ${columns('b', src.id, opts.withData)} from ${src.from} ${where}
    order by ${orderBy(p, 'b', src.id)} limit ${limit} offset ${p.offset}`;
  return withLeftJoin(p, page, opts);
}

export function countSql(p: FactQueryPlan): Frag {
  const src = baseSource(p);
  // An inner join's count needs only whether each row has a match. As EXISTS (whose ORDER
  // BY and LIMIT the planner drops) the joined side can be read once and hashed, a
  // semi-join, where the lateral form probes it once per row.
  const conditions = p.join?.type === 'inner' ? [...src.where, sql`exists ${joinLateral(p, 'b')}`] : src.where;
  return sql`select count(*)::int as n from ${src.from} ${whereClause(conditions)}`;
}

export async function selectPage(db: Db, p: FactQueryPlan, opts: { withData: boolean; extra: number }, window = AS_OF_WALK_WINDOW): Promise<FactSqlRow[]> {
  if (walkable(p, window)) {
    const walked = await walkPage(db, p, opts, window);
    if (walked !== undefined) return walked;
  }
  const { rows } = await pageSql(await withAsOfSource(db, p), opts).execute(db);
  return rows as FactSqlRow[];
}

export async function selectCount(db: Db, p: FactQueryPlan): Promise<number> {
  const { rows } = await countSql(await withAsOfSource(db, p)).execute(db);
  return (rows[0] as { n: number }).n;
}
