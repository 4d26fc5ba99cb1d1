/**
 * factAggregate's `series`: the latest-state aggregate as of the end of each bucket of a
 * window ("open orders at the end of each day for 90 days").
 *
 * For bucket i of the window the values are those of a latest-mode aggregate as of
 * `end(i) - 1 ms` (factQuery's as-of: per entity its newest fact at or before that instant;
 * facts without an entity id are each their own entity). Running one as-of read per bucket
 * would read the history once per bucket; instead one pass over the history gives each fact
 * the buckets it is its entity's newest in: from the bucket its time falls in up to (not
 * including) the bucket its successor's time falls in. Counts and sums are then a sweep, +1
 * (or +value) at the first bucket a matching fact covers and -1 at the first it no longer
 * does, summed cumulatively per group; min and max join each interval with the bucket ends
 * it covers. Filters and group keys are read on the fact itself: the fact that covers an
 * instant is its entity's newest then, so this is the as-of read's "filters on the newest
 * fact".
 *
 * Joins are refused (joinDataModelSlug): the joined model's newest fact changes within an
 * entity's interval, and joinFilters pick among the joined history, which a sweep over one
 * model's intervals does not follow.
 */
import { sql } from 'kysely';
import type { Db } from '../../db/connect.ts';
import { fieldValue } from '../typed.sql.ts';
import { clauseSql } from '../query/filters.sql.ts';
import { badArgument } from '../query/filters.ts';
import type { Frag } from '../query/plan-types.ts';
import type { AggregateBucket, AggregateField, AggregatePlan, AggregateResult, AggregateRow, BucketUnit } from './plan-types.ts';

/** The most buckets a series evaluates (the issue asks for at least 366: a daily year). */
export const MAX_SERIES_BUCKETS = 1000;

/**
 * An upper bound of each unit's length in ms in any time zone (a DST day is 25 hours), so a
 * window that surely holds too many buckets is refused before asking the database, and the
 * bucket query of any other reads about MAX_SERIES_BUCKETS rows.
 */
const MAX_UNIT_MS: Record<BucketUnit, number> = {
  minute: 60_000,
  hour: 2 * 3_600_000,
  day: 26 * 3_600_000,
  week: 7 * 26 * 3_600_000,
  month: 31 * 26 * 3_600_000,
};

const UNIT_SQL: Record<BucketUnit, Frag> = {
  minute: sql.lit('minute') as Frag,
  hour: sql.lit('hour') as Frag,
  day: sql.lit('day') as Frag,
  week: sql.lit('week') as Frag,
  month: sql.lit('month') as Frag,
};

const STEP_SQL: Record<BucketUnit, Frag> = {
  minute: sql`interval '1 minute'`,
  hour: sql`interval '1 hour'`,
  day: sql`interval '1 day'`,
  week: sql`interval '1 week'`,
  month: sql`interval '1 month'`,
};

/**
 * The start of the bucket holding the instant `t` (a timestamptz expression), in the
 * bucket's time zone: minutes and hours are truncated by PostgreSQL's zone-aware
 * date_trunc (a repeated hour at a DST change is two buckets); days, weeks and months on
 * the local calendar (a DST day is 23 or 25 hours long), weeks from weekStart.
 */
export function bucketStartSql(t: Frag, b: AggregateBucket): Frag {
  const tz = sql`${b.timezone}::text`;
  if (b.unit === 'minute' || b.unit === 'hour') return sql`date_trunc(${UNIT_SQL[b.unit]}, ${t}, ${tz})`;
  const local = sql`(${t} at time zone ${tz})`;
  if (b.unit === 'week' && b.weekStart === 'sunday') {
    return sql`((date_trunc('week', ${local} + interval '1 day') - interval '1 day') at time zone ${tz})`;
  }
  return sql`(date_trunc(${UNIT_SQL[b.unit]}, ${local}) at time zone ${tz})`;
}

function tooMany(count: number | string): Error {
  return badArgument(`series over this window has ${count} buckets; at most ${MAX_SERIES_BUCKETS} are allowed (a longer bucket or a shorter window)`, 'bucket');
}

/**
 * The bucket starts of the window [since, until), and one more (the end of the last
 * bucket): every bucket the window touches, the first starting at or before `since`.
 * Refuses (graphql_validation on `bucket`) more than MAX_SERIES_BUCKETS.
 */
export async function seriesBucketStarts(db: Db, b: AggregateBucket, since: Date, until: Date): Promise<Date[]> {
  if (!(since.getTime() < until.getTime())) throw badArgument('series needs since before until', 'since');
  const atLeast = Math.floor((until.getTime() - since.getTime()) / MAX_UNIT_MS[b.unit]);
  if (atLeast > MAX_SERIES_BUCKETS) throw tooMany(`at least ${atLeast}`);
  const tz = sql`${b.timezone}::text`;
  const first = bucketStartSql(sql`${since}::timestamptz`, b);
  // Minutes and hours step in elapsed time (an hour is an hour across a DST change);
  // longer units step on the local calendar. Each step is truncated again, so a series
  // step lands on a bucket start even where a zone's offset changed by part of an hour.
  const series =
    b.unit === 'minute' || b.unit === 'hour'
      ? sql`generate_series(${first}, ${until}::timestamptz + ${STEP_SQL[b.unit]}, ${STEP_SQL[b.unit]})`
      : sql`generate_series(${first} at time zone ${tz}, (${until}::timestamptz at time zone ${tz}) + ${STEP_SQL[b.unit]}, ${STEP_SQL[b.unit]})`;
  const start = b.unit === 'minute' || b.unit === 'hour' ? bucketStartSql(sql`s`, b) : bucketStartSql(sql`(s at time zone ${tz})`, b);
  const { rows } = await sql<{ start: Date }>`select distinct ${start} as start from ${series} as s order by 1`.execute(db);
  // Every start before `until` and the first one after (the last bucket's end).
  const starts: Date[] = [];
  for (const r of rows) {
    starts.push(r.start);
    if (r.start.getTime() >= until.getTime()) break;
  }
  if (starts.length - 1 > MAX_SERIES_BUCKETS) throw tooMany(starts.length - 1);
  return starts;
}

const NUMERIC_TYPES = new Set(['integer', 'float']);

/** A group key as the row returns it: numbers as float8 (numeric arrives as text from the drivers), the rest as typed. */
function keyOut(column: Frag, f: AggregateField): Frag {
  return NUMERIC_TYPES.has(f.field.type ?? '') ? sql`${column}::float8` : column;
}

/** Text keys order by bytes, the same on every server whatever its collation. */
function keyOrder(column: Frag, f: AggregateField): Frag {
  return f.field.type === 'string' ? sql`${column} collate "C"` : column;
}

const DIR = { asc: sql.raw('asc'), desc: sql.raw('desc') } as const;

/** The sweep's statement for a checked series plan and its bucket starts (seriesBucketStarts). */
export function seriesSql(p: AggregatePlan, starts: Date[]): Frag {
  const n = starts.length - 1;
  const ends = sql`${starts.slice(1).map((d) => d.toISOString())}::timestamptz[]`;

  const axis = sql.ref(`f.${p.axis}`);
  // Newest first, the order of the (model, entity, axis desc) index: the fact before a fact
  // in this order is its successor, the one that replaces it as its entity's newest.
  const newestFirst = p.axis === 'observed_at' ? sql`f.observed_at desc, f.inserted_at desc, f.id desc` : sql`f.inserted_at desc, f.id desc`;
  const keys = p.groupBy.map((_, i) => sql.ref(`k${i}`) as Frag);
  const values = p.measures.map((m, i) => (m.field === undefined ? undefined : (sql.ref(`v${i}`) as Frag)));
  const ivColumns: Frag[] = [
    ...p.groupBy.map((g, i) => sql`${fieldValue('f', g.field)} as ${sql.ref(`k${i}`)}`),
    ...p.measures.flatMap((m, i) => (m.field === undefined ? [] : [sql`${fieldValue('f', m.field.field)} as ${sql.ref(`v${i}`)}`])),
  ];
  const pass =
    p.filters.length === 0
      ? sql`true`
      : sql.join(
          p.filters.map((c) => clauseSql(sql.ref('f.data') as Frag, c)),
          sql` and `,
        );
  // The filters, keys and operands are computed on each fact before the facts are sorted by
  // entity for lag(), so the sort carries a few narrow columns instead of each fact's data
  // (`offset 0` keeps the planner from merging the two levels, which would sort the rows
  // with their data and compute the expressions after).
  const carried = [
    ...p.groupBy.map((_, i) => sql.ref(`f.k${i}`) as Frag),
    ...p.measures.flatMap((m, i) => (m.field === undefined ? [] : [sql.ref(`f.v${i}`) as Frag])),
  ];
  const narrow = sql`select f.entity_id, f.observed_at, f.inserted_at, f.id, (${pass}) as pass${ivColumns.length > 0 ? sql`, ${sql.join(ivColumns)}` : sql``}
    from facts as f where f.data_model_id = ${p.model.id} and f.workspace_id = ${p.workspaceId} offset 0`;
  // Only the facts that match and cover at least one bucket leave the window (lag() sees them all).
  const iv = sql`select * from (select width_bucket(${axis}, ${ends}) as i0,
      case when f.entity_id is null then ${n}::int else coalesce(width_bucket(lag(${axis}) over (partition by f.entity_id order by ${newestFirst}), ${ends}), ${n}::int) end as i1,
      ${sql.join([sql`f.pass`, ...carried])}
    from (${narrow}) as f) as w where w.pass and w.i0 < w.i1`;

  const groupCols = keys.length > 0 ? sql`${sql.join(keys)}, ` : sql``;
  const sums = p.measures.flatMap((m, i) => (values[i] && (m.op === 'sum' || m.op === 'avg') ? [i] : []));
  const extremes = p.measures.flatMap((m, i) => (values[i] && (m.op === 'min' || m.op === 'max') ? [i] : []));
  const nullCols: Frag[] = [
    ...sums.flatMap((i) => [sql`null::numeric as ${sql.ref(`s${i}`)}`, sql`0::bigint as ${sql.ref(`n${i}`)}`]),
    ...extremes.flatMap((i) => [sql`null::numeric as ${sql.ref(`lo${i}`)}`, sql`null::numeric as ${sql.ref(`hi${i}`)}`]),
  ];
  const tail = (cols: Frag[]): Frag => (cols.length > 0 ? sql`, ${sql.join(cols)}` : sql``);
  const groupByI = (i: Frag) => sql`group by ${groupCols}${i}`;

  // Deltas per group and bucket: +1 where an interval starts covering, -1 where it stops,
  // both from one read of the intervals.
  const deltaSums = sums.flatMap((i) => [
    sql`sum(e.d * ${values[i]!}) as ${sql.ref(`s${i}`)}`,
    sql`sum(case when ${values[i]!} is not null then e.d else 0 end) as ${sql.ref(`n${i}`)}`,
  ]);
  const deltas = sql`select ${groupCols}e.i, sum(e.d) as c${tail(deltaSums)}${tail(extremes.flatMap((i) => [sql`null::numeric as ${sql.ref(`lo${i}`)}`, sql`null::numeric as ${sql.ref(`hi${i}`)}`]))}
    from iv cross join lateral (values (iv.i0, 1), (iv.i1, -1)) as e(i, d) where e.i < ${n}::int ${groupByI(sql`e.i`)}`;
  // min and max over the intervals covering each bucket, without joining every interval
  // with every bucket it covers (facts x their buckets: tens of millions for a year of
  // dailies). Intervals are first reduced to one row per group and (first, stop) bucket
  // pair, at most N^2/2 of them. The extreme at bucket b is the extreme over the pairs with
  // first <= b < stop: per group and first bucket, a running extreme over the pairs by
  // stop descending, read at every bucket b from `first` on (grid rows between the pairs,
  // at 2b, pairs at 2 stop - 1, so a pair counts at b exactly when stop > b), then the
  // extreme over those cells per bucket.
  const loHi = (agg: 'min' | 'max', of: (i: number) => Frag) =>
    extremes.map((i) => sql`${sql.raw(agg)}(${of(i)}) as ${sql.ref(`${agg === 'min' ? 'lo' : 'hi'}${i}`)}`);
  const extremeRefs = (f: (i: number) => Frag[]) => sql.join(extremes.flatMap(f));
  const covering =
    extremes.length === 0
      ? { ctes: sql``, rows: sql`` }
      : {
          ctes: sql`, pairs as (select ${groupCols}iv.i0, iv.i1, ${sql.join([...loHi('min', (i) => values[i]!), ...loHi('max', (i) => values[i]!)])}
              from iv ${groupByI(sql`iv.i0, iv.i1`)}),
            stream as (select ${groupCols}i0, 2 * i1 - 1 as at, ${extremeRefs((i) => [sql.ref(`lo${i}`) as Frag, sql.ref(`hi${i}`) as Frag])} from pairs
              union all
              select ${groupCols}g.i0, 2 * b.i as at, ${extremeRefs(() => [sql`null::numeric`, sql`null::numeric`])}
              from (select distinct ${groupCols}i0 from pairs) as g cross join lateral generate_series(g.i0, ${n - 1}::int) as b(i)),
            cells as (select ${groupCols}at, ${extremeRefs((i) => [
              sql`min(${sql.ref(`lo${i}`)}) over w as ${sql.ref(`lo${i}`)}`,
              sql`max(${sql.ref(`hi${i}`)}) over w as ${sql.ref(`hi${i}`)}`,
            ])}
              from stream window w as (partition by ${groupCols}i0 order by at desc))`,
          rows: sql`union all select ${groupCols}at / 2 as i, 0::bigint as c${tail(sums.flatMap((i) => [sql`null::numeric as ${sql.ref(`s${i}`)}`, sql`0::bigint as ${sql.ref(`n${i}`)}`]))},
              ${sql.join([...loHi('min', (i) => sql.ref(`lo${i}`) as Frag), ...loHi('max', (i) => sql.ref(`hi${i}`) as Frag)])}
            from cells where at % 2 = 0 ${groupByI(sql`at`)}`,
        };
  // Every bucket of every group present: a zero row per bucket.
  const zeroSource =
    keys.length > 0
      ? sql`(select distinct ${sql.join(keys)} from d) as g cross join generate_series(0, ${n - 1}::int) as b(i)`
      : sql`generate_series(0, ${n - 1}::int) as b(i)`;
  const zeros = sql`select ${groupCols}b.i, 0::bigint as c${tail(nullCols)} from ${zeroSource}`;

  const partition = keys.length > 0 ? sql`partition by ${sql.join(keys)} ` : sql``;
  const running = sql`over (${partition}order by i)`;
  const dense = sql`select ${groupCols}i, sum(c) as c${tail(sums.flatMap((i) => [sql`sum(${sql.ref(`s${i}`)}) as ${sql.ref(`s${i}`)}`, sql`sum(${sql.ref(`n${i}`)}) as ${sql.ref(`n${i}`)}`]))}${tail(
    extremes.flatMap((i) => [sql`min(${sql.ref(`lo${i}`)}) as ${sql.ref(`lo${i}`)}`, sql`max(${sql.ref(`hi${i}`)}) as ${sql.ref(`hi${i}`)}`]),
  )}
    from (select * from d union all ${zeros}) as x ${groupByI(sql`i`)}`;
  const measureOut = p.measures.map((m, i) => {
    const name = sql.ref(`m${i}`);
    switch (m.op) {
      case 'count':
      case 'count_distinct_entities':
        // Latest mode counts entities, and a fact without an entity id is its own entity: both are the number of covering facts.
        return sql`(sum(c) ${running})::float8 as ${name}`;
      case 'sum':
        return sql`case when sum(${sql.ref(`n${i}`)}) ${running} > 0 then (sum(${sql.ref(`s${i}`)}) ${running})::float8 end as ${name}`;
      case 'avg':
        return sql`case when sum(${sql.ref(`n${i}`)}) ${running} > 0 then (sum(${sql.ref(`s${i}`)}) ${running} / sum(${sql.ref(`n${i}`)}) ${running})::float8 end as ${name}`;
      case 'min':
        return sql`${sql.ref(`lo${i}`)}::float8 as ${name}`;
      case 'max':
        return sql`${sql.ref(`hi${i}`)}::float8 as ${name}`;
    }
  });
  const cumulative = sql`select ${groupCols}i, sum(c) ${running} as total${tail(measureOut)} from dense`;
  // A group shows in every bucket when it has an entity at some bucket's end; without groupBy the one group always shows.
  const shown = keys.length > 0 ? sql`where r.seen > 0` : sql``;
  const order: Frag[] = p.orderBy.map((o) => {
    const dir = DIR[o.direction];
    if (o.by.kind === 'measure') return sql`${sql.ref(`r.m${o.by.index}`)} ${dir}`;
    if (o.by.kind === 'group') return sql`${keyOrder(sql.ref(`r.k${o.by.index}`) as Frag, p.groupBy[o.by.index]!)} ${dir}`;
    return sql`r.i ${dir}`;
  });
  order.push(sql`r.i asc`, ...p.groupBy.map((g, i) => sql`${keyOrder(sql.ref(`r.k${i}`) as Frag, g)} asc`));
  const out = [
    ...p.groupBy.map((g, i) => sql`${keyOut(sql.ref(`r.k${i}`) as Frag, g)} as ${sql.ref(`k${i}`)}`),
    sql`r.i`,
    ...p.measures.map((_, i) => sql.ref(`r.m${i}`) as Frag),
  ];
  // Read once (deltas) the intervals are streamed; min and max read them a second time.
  const keep = extremes.length > 0 ? sql`materialized` : sql`not materialized`;
  return sql`with iv as ${keep} (${iv})${covering.ctes},
      d as (${deltas} ${covering.rows}),
      dense as (${dense})
    select ${sql.join(out)} from (select *, max(total) over (${keys.length > 0 ? sql`partition by ${sql.join(keys)}` : sql``}) as seen from (${cumulative}) as c) as r
    ${shown}
    order by ${sql.join(order)}
    limit ${p.limit + 1}`;
}

export async function runSeries(db: Db, p: AggregatePlan): Promise<AggregateResult> {
  if (p.mode !== 'latest' || !p.series || p.bucket === undefined || p.since === undefined || p.until === undefined) {
    throw new Error('runSeries: a series plan has latest mode, a bucket, since and until');
  }
  if (p.join !== undefined) throw badArgument('series does not take joinDataModelSlug: a series reads one data model', 'joinDataModelSlug');
  if (p.groupBy.some((g) => g.source !== 'model') || p.measures.some((m) => m.field !== undefined && m.field.source !== 'model')) {
    throw badArgument('series does not take joinDataModelSlug: a series reads one data model', 'joinDataModelSlug');
  }
  const starts = await seriesBucketStarts(db, p.bucket, p.since, p.until);
  const { rows } = await seriesSql(p, starts).execute(db);
  const result = (rows as Record<string, unknown>[]).map((r): AggregateRow => ({
    keys: p.groupBy.map((_, i) => r[`k${i}`] ?? null),
    bucket: starts[r.i as number]!,
    values: p.measures.map((_, i) => (r[`m${i}`] as number | null) ?? null),
  }));
  const cut = result.length > p.limit;
  return { rows: cut ? result.slice(0, p.limit) : result, cut };
}
