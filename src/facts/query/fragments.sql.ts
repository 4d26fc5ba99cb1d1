/** SQL fragments shared by the page, count and as-of statements of a fact query. */
import { sql } from 'kysely';
import type { TimeAxis } from '../../db/tables.ts';
import { clauseSql } from './filters.sql.ts';
import type { FactQueryPlan, Frag } from './plan-types.ts';

export const AXIS_COLUMN: Record<TimeAxis, string> = { observed_at: 'observed_at', inserted_at: 'inserted_at' };
export const DIRECTION: Record<'asc' | 'desc', Frag> = { asc: sql.raw('asc'), desc: sql.raw('desc') };

export const ref = (alias: string, column: string): Frag => sql.ref(`${alias}.${column}`) as Frag;

/** The newest-first order that defines "latest" on an axis (ties by inserted_at, then id). */
export function latestOrder(alias: string, axis: TimeAxis): Frag {
  return axis === 'observed_at'
    ? sql`${ref(alias, 'observed_at')} desc, ${ref(alias, 'inserted_at')} desc, ${ref(alias, 'id')} desc`
    : sql`${ref(alias, 'inserted_at')} desc, ${ref(alias, 'id')} desc`;
}

export const FACT_COLUMNS = sql`f.id, f.entity_id, f.observed_at, f.inserted_at, f.data`;

/** Facts of the plan's model and workspace at or before `until`, under `alias`. */
export function upToUntil(p: FactQueryPlan, alias = 'f'): Frag {
  return sql`${ref(alias, 'data_model_id')} = ${p.model.id} and ${ref(alias, 'workspace_id')} = ${p.workspaceId} and ${ref(alias, AXIS_COLUMN[p.axis])} <= ${p.until!}`;
}

/** fact_current rows of the plan's model, workspace and axis, as alias c. */
export function currentOfPlan(p: FactQueryPlan): Frag {
  return sql`c.data_model_id = ${p.model.id} and c.workspace_id = ${p.workspaceId} and c.axis = ${p.axis}`;
}

export function whereClause(conditions: Frag[]): Frag {
  return conditions.length > 0 ? sql`where ${sql.join(conditions, sql` and `)}` : sql``;
}

export function orderBy(p: FactQueryPlan, alias: string, idColumn: string): Frag {
  const dir = DIRECTION[p.direction];
  const id = ref(alias, idColumn);
  if (p.mode === 'timeline' && p.sort === 'entity_id') {
    // Byte order, so the order is the same on every server whatever its default collation.
    return sql`${ref(alias, 'entity_id')} collate "C" ${dir} nulls last, ${id} ${dir}`;
  }
  const column = p.mode === 'timeline' ? AXIS_COLUMN[p.sort as TimeAxis] : 'observed_at';
  return sql`${ref(alias, column)} ${dir}, ${id} ${dir}`;
}

/** The joined model's newest fact for the entity of `outer`, among those passing joinFilters. */
export function joinLateral(p: FactQueryPlan, outer: string): Frag {
  const join = p.join!;
  const entity = ref(outer, 'entity_id');
  if (join.filters.length === 0 && p.until === undefined) {
    // Without joinFilters the newest fact is the current state: a primary-key lookup.
    return sql`(select jc.data from fact_current as jc
      where jc.data_model_id = ${join.model.id} and jc.workspace_id = ${p.workspaceId} and jc.axis = ${p.axis}
        and jc.entity_key = ${entity} and jc.entity_id = ${entity})`;
  }
  const conds: Frag[] = [sql`jf.data_model_id = ${join.model.id}`, sql`jf.workspace_id = ${p.workspaceId}`, sql`jf.entity_id = ${entity}`];
  if (p.until !== undefined) conds.push(sql`${ref('jf', AXIS_COLUMN[p.axis])} <= ${p.until}`);
  for (const c of join.filters) conds.push(clauseSql(sql.ref('jf.data') as Frag, c));
  return sql`(select jf.data from facts as jf where ${sql.join(conds, sql` and `)} order by ${latestOrder('jf', p.axis)} limit 1)`;
}

export function columns(alias: string, idColumn: string, withData: boolean): Frag {
  const base = sql`${ref(alias, idColumn)} as id, ${ref(alias, 'entity_id')} as entity_id, ${ref(alias, 'observed_at')} as observed_at, ${ref(alias, 'inserted_at')} as inserted_at`;
  return withData ? sql`${base}, ${ref(alias, 'data')} as data` : base;
}

/** A left join never changes which rows are on the page: the joined facts are looked up for the page's rows only, after the limit. */
export function withLeftJoin(p: FactQueryPlan, page: Frag, opts: { withData: boolean }): Frag {
  if (p.join?.type !== 'left' || !opts.withData) return page;
  return sql`select pg.*, j.data as joined from (${page}) as pg
    left join lateral ${joinLateral(p, 'pg')} as j on true
    order by ${orderBy(p, 'pg', 'id')}`;
}
