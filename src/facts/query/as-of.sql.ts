/**
 * The as-of reads: per entity the newest fact at or before `until`. A newest-first page
 * walks the history back from `until`; otherwise one of two equivalent sources is picked
 * per query (chooseAsOf): the history up to `until`, or the current state with the
 * history probed only for the entities changed since.
 */
import { sql } from 'kysely';
import type { Db } from '../../db/connect.ts';
import { clauseSql } from './filters.sql.ts';
import { AXIS_COLUMN, columns, currentOfPlan, FACT_COLUMNS, latestOrder, orderBy, ref, upToUntil, whereClause, withLeftJoin } from './fragments.sql.ts';
import type { AsOfSource, FactQueryPlan, FactSqlRow, Frag } from './plan-types.ts';

/** Per entity the newest fact up to `until`, over the (model, entity, axis desc) index. */
export function asOfFromHistory(p: FactQueryPlan): Frag {
  return sql`(select distinct on (f.entity_id) ${FACT_COLUMNS}
        from facts as f where ${upToUntil(p)} and f.entity_id is not null
        order by f.entity_id, ${latestOrder('f', p.axis)})
      union all
      (select ${FACT_COLUMNS} from facts as f where ${upToUntil(p)} and f.entity_id is null)`;
}

/**
 * An entity's current fact is its newest up to `until` unless it is newer than `until`;
 * only then is the history probed (facts without an entity id are their own current
 * fact, which a probe by entity id never finds: they are in or out by their own time).
 */
export function asOfFromCurrent(p: FactQueryPlan): Frag {
  const axis = AXIS_COLUMN[p.axis];
  const current = currentOfPlan(p);
  return sql`(select c.fact_id as id, c.entity_id, c.observed_at, c.inserted_at, c.data
        from fact_current as c where ${current} and ${ref('c', axis)} <= ${p.until!})
      union all
      (select h.id, h.entity_id, h.observed_at, h.inserted_at, h.data from fact_current as c
        cross join lateral (select ${FACT_COLUMNS} from facts as f
          where ${upToUntil(p)} and f.entity_id = c.entity_id order by ${latestOrder('f', p.axis)} limit 1) as h
        where ${current} and ${ref('c', axis)} > ${p.until!})`;
}

/**
 * How many facts a newest-first as-of page walks back from `until` before it gives up and
 * reads a source instead. A fact is on the page when no newer fact of its entity (up to
 * `until`) exists; walking newest first, most facts near `until` are their entity's newest,
 * so a page fills after a few dozen. Oldest first it would not (the oldest facts are the
 * ones superseded), nor with a filter that the newest facts fail: the window bounds what
 * such a walk costs (about 1,000 probes, a few ms) before the fallback.
 */
export const AS_OF_WALK_WINDOW = 1000;

/**
 * Whether an as-of page can be walked: newest first, on the observed_at axis (the page's
 * order, so the window is a range of the (model, observed_at, id) index; as of an
 * inserted_at the walk would read facts out of that order to find the window's), within
 * the window, and no inner join (which would drop rows the walk counted).
 */
export function walkable(p: FactQueryPlan, window: number): boolean {
  return (
    p.mode === 'latest' &&
    p.until !== undefined &&
    p.axis === 'observed_at' &&
    p.direction === 'desc' &&
    p.join?.type !== 'inner' &&
    p.offset + p.limit < window
  );
}

/**
 * The as-of page by walking: the `window` newest facts up to `until` (and from `since`),
 * in page order (observed_at, id), keep those passing the filters that no newer fact of
 * their entity up to `until` supersedes. Each row also says how many facts were walked.
 */
export function asOfWalkSql(p: FactQueryPlan, opts: { withData: boolean; extra: number }, window: number): Frag {
  const axis = AXIS_COLUMN[p.axis];
  const walk = [upToUntil(p)];
  if (p.since !== undefined) walk.push(sql`${ref('f', axis)} >= ${p.since}`);
  const newer =
    p.axis === 'observed_at'
      ? sql`(g.observed_at, g.inserted_at, g.id) > (b.observed_at, b.inserted_at, b.id)`
      : sql`(g.inserted_at, g.id) > (b.inserted_at, b.id)`;
  const kept = [
    ...p.filters.map((c) => clauseSql(sql.ref('b.data') as Frag, c)),
    sql`not exists (select 1 from facts as g where ${upToUntil(p, 'g')} and g.entity_id = b.entity_id and ${newer})`,
  ];
  const page = sql`select ${columns('b', 'id', opts.withData)} from w as b ${whereClause(kept)}
    order by ${orderBy(p, 'b', 'id')} limit ${p.limit + opts.extra} offset ${p.offset}`;
  return sql`with w as materialized (select ${FACT_COLUMNS} from facts as f where ${sql.join(walk, sql` and `)}
      order by ${orderBy(p, 'f', 'id')} limit ${window})
    select n.walked, pg.* from (select count(*)::int as walked from w) as n
      left join lateral (${withLeftJoin(p, page, opts)}) as pg on true
    order by ${orderBy(p, 'pg', 'id')}`;
}

/** The walked page, or undefined when the window held too few of its rows (the page continues beyond it). */
export async function walkPage(db: Db, p: FactQueryPlan, opts: { withData: boolean; extra: number }, window: number): Promise<FactSqlRow[] | undefined> {
  const { rows } = await asOfWalkSql(p, opts, window).execute(db);
  const walked = (rows[0] as { walked: number }).walked;
  const page = (rows as (FactSqlRow & { walked?: number; id: string | null })[]).filter((r) => r.id !== null);
  for (const r of page) delete r.walked;
  return page.length === p.limit + opts.extra || walked < window ? page : undefined;
}

/**
 * chooseAsOf's measure: entities changed since `until` (up to a cap), and, only when there
 * are fewer, facts up to `until` (counted up to HISTORY_PER_PROBE times as many). Both are
 * index-only range counts whose cost is bounded by what the cheaper source would cost.
 */
const CHANGED_CAP = 32_768;
/** A probe of the history costs about as much as reading this many facts of it in DISTINCT ON (measured by bench/facts.ts). */
const HISTORY_PER_PROBE = 16;

export function asOfGateSql(p: FactQueryPlan): Frag {
  const axis = AXIS_COLUMN[p.axis];
  return sql`select c.n as changed,
      case when c.n < ${CHANGED_CAP} then (select count(*)::int from (select 1 from facts as f where ${upToUntil(p)}
        limit ${HISTORY_PER_PROBE} * c.n + 1) as h) end as before
    from (select count(*)::int as n from (select 1 from fact_current as c
      where ${currentOfPlan(p)} and ${ref('c', axis)} > ${p.until!}
      limit ${CHANGED_CAP}) as s) as c`;
}

/** The cheaper as-of source for this plan: the current state when few entities changed since `until` against the facts before it. */
export async function chooseAsOf(db: Db, p: FactQueryPlan): Promise<AsOfSource> {
  const { rows } = await asOfGateSql(p).execute(db);
  const { changed, before } = rows[0] as { changed: number; before: number | null };
  return before !== null && before > HISTORY_PER_PROBE * changed ? 'current' : 'history';
}

// One choice per plan: a page that falls back and the count of the same query share it.
const chosen = new WeakMap<FactQueryPlan, Promise<AsOfSource>>();

export async function withAsOfSource(db: Db, p: FactQueryPlan): Promise<FactQueryPlan> {
  if (p.mode !== 'latest' || p.until === undefined || p.asOf !== undefined) return p;
  let choice = chosen.get(p);
  if (choice === undefined) {
    choice = chooseAsOf(db, p);
    chosen.set(p, choice);
  }
  return { ...p, asOf: await choice };
}
